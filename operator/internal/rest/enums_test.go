package rest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/profiles"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestEnumsAgreeWithTheCLI proves the operator accepts every enumerated value the cli advertises
// to agents in its tool schemas, and refuses a value outside the list with an error naming the
// field (an extra value the operator alone accepts would go unnoticed for request bodies).
func TestEnumsAgreeWithTheCLI(t *testing.T) {
	kinds := make([]string, 0, len(tatarav1.TaskKinds))
	for _, k := range tatarav1.TaskKinds {
		kinds = append(kinds, string(k))
	}
	phases := make([]string, 0, len(tatarav1.TaskPhases))
	for _, p := range tatarav1.TaskPhases {
		phases = append(phases, string(p))
	}
	// Query filters are checked against the CRD enums directly (taskList uses exactly these).
	queries := map[string]map[string][]string{ToolTaskList: {"kind": kinds, "phase": phases}}
	bodies := map[string]func() validator{ToolSubtaskCreate: func() validator { return &subtaskCreateRequest{} }}

	enums := profiles.OperatorArgEnums()
	for tool, args := range enums {
		for arg, values := range args {
			t.Run(tool+"."+arg, func(t *testing.T) {
				if want, ok := queries[tool][arg]; ok {
					if !sameSet(values, want) {
						t.Errorf("the cli advertises %v, the operator accepts %v", values, want)
					}
					return
				}
				newBody := bodies[tool]
				if newBody == nil && newIntentRequest(tool) != nil {
					newBody = func() validator { return newIntentRequest(tool) }
				}
				if newBody == nil {
					t.Fatalf("no operator request type for %s: add it to this test", tool)
				}
				for _, v := range values {
					if err := validateWith(t, newBody(), arg, v); err != nil {
						t.Errorf("%q is advertised by the cli but refused: %v", v, err)
					}
				}
				err := validateWith(t, newBody(), arg, "not-an-advertised-value")
				if err == nil || !strings.Contains(err.Error(), `"`+arg+`"`) {
					t.Errorf("a value outside the enum must be refused naming %q, got %v", arg, err)
				}
			})
		}
	}
	for tool, args := range queries {
		for arg := range args {
			if _, ok := enums[tool][arg]; !ok {
				t.Errorf("%s.%s is an enum in the operator but free text in the cli's schema", tool, arg)
			}
		}
	}
}

// validateWith decodes a body whose every field is set to a valid placeholder, except arg = value.
func validateWith(t *testing.T, req validator, arg, value string) *apiError {
	t.Helper()
	body := map[string]any{}
	typ := reflect.TypeOf(req).Elem()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch f.Type.Kind() {
		case reflect.String:
			body[name] = "x"
		case reflect.Pointer:
			body[name] = 1
		default:
			t.Fatalf("%s.%s: no placeholder for %s", typ.Name(), f.Name, f.Type)
		}
	}
	if _, ok := body[arg]; !ok {
		t.Fatalf("%s has no field %q", typ.Name(), arg)
	}
	body[arg] = value
	b, _ := json.Marshal(body)
	if err := json.Unmarshal(b, req); err != nil {
		t.Fatal(err)
	}
	return req.validate()
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
