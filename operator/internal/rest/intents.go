package rest

import (
	"context"
	"net/http"
)

// intentHandler serves the intent tool: the body decoded into its request type, recorded as a
// taskops.Intent (whose Body is the canonical JSON of the request, so whitespace and key order do
// not defeat idempotence).
func (s *Server) intentHandler(tool string) handler {
	return func(ctx context.Context, c *call) (int, any, *apiError) {
		req := newIntentRequest(tool)
		if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, req); err != nil {
			return 0, nil, err
		}
		in, err := intentOf(tool, req)
		if err != nil {
			return 0, nil, errorf(http.StatusInternalServerError, "%v", err)
		}
		res, oerr := s.ops.RecordIntent(ctx, c.task, in)
		if oerr != nil {
			return 0, nil, fromOps(oerr)
		}
		return http.StatusOK, map[string]any{"result": res.Result, "outcome": res.Outcome, "changeSummary": res.ChangeSummary}, nil
	}
}
