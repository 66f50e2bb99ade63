package rest

import (
	"slices"
	"tatara.dev/cli/pkg/profiles"
	"testing"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/taskops"
)

// TestAuthorizationAgreesWithProfiles is the agreement test between this operator's
// authorization table and the cli's profiles (docs/architecture.md, From Task kind to tool
// list): for every Task kind, the operator tools the kind's profile advertises are exactly the
// tools the server allows. Nothing advertised is always refused; nothing outside the profile is
// allowed.
func TestAuthorizationAgreesWithProfiles(t *testing.T) {
	operatorTools := profiles.OperatorTools()
	for _, kind := range tatarav1.TaskKinds {
		t.Run(string(kind), func(t *testing.T) {
			profile := agent.ToolProfileForKind(kind)
			advertised, ok := profiles.Tools(profile)
			if !ok {
				t.Fatalf("kind %q maps to profile %q, which the cli does not know", kind, profile)
			}
			for _, tool := range operatorTools {
				switch adv, allowed := advertised[tool], Allowed(kind, tool); {
				case adv && !allowed:
					t.Errorf("profile %q advertises %s but the server always refuses it for kind %q", profile, tool, kind)
				case !adv && allowed:
					t.Errorf("the server allows %s for kind %q but profile %q does not advertise it", tool, kind, profile)
				}
			}
			for _, tool := range AllowedTools(kind) {
				if !slices.Contains(operatorTools, tool) {
					t.Errorf("the table allows %q for kind %q, which is not a cli operator tool", tool, kind)
				}
			}
		})
	}
}

// TestRoutesAreTheOperatorTools checks the REST surface is exactly what the cli calls: one route
// per cli operator tool, with the same method and path.
func TestRoutesAreTheOperatorTools(t *testing.T) {
	routed := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		if _, dup := routed[rt.tool]; dup {
			t.Errorf("tool %s has two routes", rt.tool)
		}
		routed[rt.tool] = rt.method + " " + rt.path
	}
	called := profiles.OperatorRoutes()
	for tool, route := range called {
		if routed[tool] != route {
			t.Errorf("the cli calls %s as %q, the operator routes %q", tool, route, routed[tool])
		}
	}
	for tool := range routed {
		if _, ok := called[tool]; !ok {
			t.Errorf("the operator routes %s, which is not a cli operator tool", tool)
		}
	}
	if len(called) != 20 {
		t.Errorf("the cli has %d operator tools, want 20 (docs/architecture.md, From Task kind to tool list)", len(called))
	}
}

func TestAuthorizationTableCoversEveryKind(t *testing.T) {
	for _, kind := range tatarav1.TaskKinds {
		if len(AllowedTools(kind)) == 0 {
			t.Errorf("kind %q has no row in the authorization table", kind)
		}
	}
	if len(authorization) != len(tatarav1.TaskKinds) {
		t.Errorf("the table has %d rows for %d kinds", len(authorization), len(tatarav1.TaskKinds))
	}
}

func TestAllowedFailsClosed(t *testing.T) {
	tests := []struct {
		name string
		kind tatarav1.TaskKind
		tool string
		want bool
	}{
		{"review may record a verdict", tatarav1.KindReview, ToolReviewVerdict, true},
		{"review may not open a PR outcome", tatarav1.KindReview, ToolPROutcome, false},
		{"brainstorm may skip research", tatarav1.KindBrainstorm, ToolSkipResearch, true},
		{"brainstorm may not summarise changes", tatarav1.KindBrainstorm, ToolChangeSummary, false},
		{"triage may not record a PR outcome", tatarav1.KindTriageIssue, ToolPROutcome, false},
		{"unknown kind may not even read", "deploy", ToolTaskGet, false},
		{"empty kind may not note", "", ToolTaskNote, false},
		{"unknown tool", tatarav1.KindImplement, "delete_everything", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Allowed(tt.kind, tt.tool); got != tt.want {
				t.Fatalf("Allowed(%q, %q) = %v, want %v", tt.kind, tt.tool, got, tt.want)
			}
		})
	}
}

// TestEventActionsAreToolNames: the action of each Event taskops records is the name of the tool
// whose call made it.
func TestEventActionsAreToolNames(t *testing.T) {
	for _, tt := range []struct{ action, tool string }{
		{taskops.ActionTaskNote, ToolTaskNote},
		{taskops.ActionComment, ToolComment},
		{taskops.ActionCommentOnIssue, ToolCommentOnIssue},
		{taskops.ActionProposeIssue, ToolProposeIssue},
		{taskops.ActionSubtaskCreate, ToolSubtaskCreate},
		{taskops.ActionSubtaskCancel, ToolSubtaskCancel},
		{taskops.IntentChangeSummary, ToolChangeSummary},
	} {
		if tt.action != tt.tool {
			t.Errorf("taskops names %q where the tool is %q", tt.action, tt.tool)
		}
	}
}
