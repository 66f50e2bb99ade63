package rest

import (
	"context"
	"net/http"

	"tatara.dev/cli/pkg/internalissue"
	"tatara.dev/operator/internal/taskops"
)

// ToolReportInternalIssue is the cli's own tool whose reports the cli forwards to the operator to
// be recorded (internalissue.Path). It is no operator tool (the agent's call is answered by the cli,
// which sends the report on after it), so it is not among routes(); every kind may report, as the
// tool is in every profile.
const ToolReportInternalIssue = "report_internal_issue"

// ReportResultRateLimited is the result label of a report refused by the per-Task report limit.
const ReportResultRateLimited = "rate_limited"

// DefaultInternalIssueRateLimit bounds each Task's reports, apart from its other calls: 10 at once,
// then one a minute. An agent that meets a broken platform reports it a few times; one in a loop
// is refused with 429 (the cli has logged and counted the report before sending it).
var DefaultInternalIssueRateLimit = RateLimit{PerSecond: 1.0 / 60, Burst: 10}

// reportRoute is the route of a Task's reports.
func (s *Server) reportRoute() route {
	return route{ToolReportInternalIssue, http.MethodPost, internalissue.Path, scopeTask, s.reportInternalIssue}
}

type internalIssueRequest struct {
	internalissue.Report
}

func (r *internalIssueRequest) validate() *apiError {
	if r.Severity == "" {
		r.Severity = "error" // the tool's default
	}
	return firstErr(oneOf("category", r.Category, internalissue.Categories()...), oneOf("severity", r.Severity, internalissue.Severities()...),
		required("description", r.Description), maxBytes("description", r.Description, internalissue.MaxDescriptionBytes),
		maxBytes("offending_tool", r.OffendingTool, internalissue.MaxNameBytes), maxBytes("resource_id", r.ResourceID, internalissue.MaxNameBytes))
}

func (s *Server) reportInternalIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req internalIssueRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if s.reportLimiters != nil {
		if ok, wait := s.reportLimiters.allow(c.task.UID); !ok {
			if s.opts.Metrics != nil {
				s.opts.Metrics.InternalIssueReports.WithLabelValues(ReportResultRateLimited).Inc()
			}
			after := retryAfter(wait)
			c.w.Header().Set("Retry-After", after)
			return 0, nil, errorf(http.StatusTooManyRequests, "internal issue reports: %s exceeded: retry after %ss", s.opts.InternalIssueRateLimit, after)
		}
	}
	rec, err := s.ops.ReportInternalIssue(ctx, c.task, taskops.InternalIssueReport{Report: req.Report, RequestID: c.requestID})
	if err != nil {
		return 0, nil, fromOps(err)
	}
	status := http.StatusOK
	if rec.Result == taskops.ReportNew {
		status = http.StatusCreated
	}
	return status, rec, nil
}
