package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// validator is implemented by every request body: it names the first missing or bad field.
type validator interface {
	validate() *apiError
}

// decodeBody reads at most maxBytes of JSON into dst and validates it. Over the limit is
// 413; anything malformed is 400 with a message naming the field or the byte offset.
func decodeBody(w http.ResponseWriter, r *http.Request, maxBytes int64, dst validator) *apiError {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, "request body exceeds the limit of %d bytes", maxBytes)
		}
		return errorf(http.StatusBadRequest, "failed to read request body: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return errorf(http.StatusBadRequest, "request body is empty: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "malformed JSON: unexpected data after the JSON object")
	}
	return dst.validate()
}

func jsonError(err error) *apiError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errorf(http.StatusBadRequest, "malformed JSON at byte offset %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errorf(http.StatusBadRequest, "request body must be a JSON object, got a JSON %s", typ.Value)
		}
		return errorf(http.StatusBadRequest, "field %q must be %s, got a JSON %s", typ.Field, jsonTypeName(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	}
}

func jsonTypeName(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int32", "int64", "ptr":
		return "an integer"
	case "bool":
		return "a boolean"
	default:
		return "a " + goKind
	}
}

func required(field, value string) *apiError {
	if strings.TrimSpace(value) == "" {
		return errorf(http.StatusBadRequest, "field %q is required and must be a non-empty string", field)
	}
	return nil
}

func oneOf(field, value string, allowed ...string) *apiError {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	if value == "" {
		return errorf(http.StatusBadRequest, "field %q is required: one of %s", field, strings.Join(allowed, ", "))
	}
	return errorf(http.StatusBadRequest, "field %q is %q: want one of %s", field, value, strings.Join(allowed, ", "))
}

// maxBytes refuses a field longer than limit bytes.
func maxBytes(field, value string, limit int) *apiError {
	if len(value) > limit {
		return errorf(http.StatusBadRequest, "field %q is %d bytes: want at most %d", field, len(value), limit)
	}
	return nil
}

func firstErr(errs ...*apiError) *apiError {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
