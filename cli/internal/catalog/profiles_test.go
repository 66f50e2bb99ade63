package catalog

import (
	"slices"
	"testing"
)

func TestCatalogCounts(t *testing.T) {
	tests := []struct {
		group string
		got   []Tool
		want  int
	}{
		{"memory", MemoryTools(), 13},
		{"code-graph", CodeGraphTools(), 19},
		{"operator", OperatorTools(), 20},
		{"chat", ChatTools(), 10},
		{"platform", PlatformTools(), 1},
		{"all", All(), 63},
	}
	for _, tt := range tests {
		t.Run(tt.group, func(t *testing.T) {
			if len(tt.got) != tt.want {
				t.Errorf("%s has %d tools, want %d", tt.group, len(tt.got), tt.want)
			}
		})
	}
}

// The one hand-pinned statement of the design's profile table (docs/architecture.md, "Profiles"):
// each Task kind's profile and that profile's tool count, worked out by hand. The catalog computes
// them from groups and names, so agreement is a real check; every other test derives its
// expectations from the catalog.
func TestKindProfiles(t *testing.T) {
	want := map[string]string{
		"implement": ProfileImplement, "review": ProfileReview, "triageIssue": ProfileTriage,
		"brainstorm": ProfileBrainstorm, "issueLifecycle": ProfileLifecycle, "incident": ProfileIncident,
		"selfImprove": ProfileSelfImprove,
	}
	for kind, profile := range want {
		if got := ProfileForKind(kind); got != profile {
			t.Errorf("ProfileForKind(%q) = %q, want %q", kind, got, profile)
		}
	}
	if got := Kinds(); len(got) != len(want) {
		t.Errorf("Kinds() = %v, want the %d kinds above", got, len(want))
	}
	for _, kind := range []string{"", "healthCheck", "Implement", "triage"} {
		if got := ProfileForKind(kind); got != "" {
			t.Errorf("ProfileForKind(%q) = %q, want \"\" (fail-open)", kind, got)
		}
	}
}

func TestProfileCounts(t *testing.T) {
	want := map[string]int{
		ProfileImplement: 46, ProfileReview: 39, ProfileTriage: 41, ProfileBrainstorm: 52,
		ProfileLifecycle: 60, ProfileIncident: 52, ProfileSelfImprove: 43,
	}
	if got := ProfileNames(); !slices.Equal(got, []string{"brainstorm", "implement", "incident", "lifecycle", "review", "selfImprove", "triage"}) {
		t.Fatalf("ProfileNames() = %v", got)
	}
	for name, n := range want {
		t.Run(name, func(t *testing.T) {
			tools, ok := ProfileTools(name)
			if !ok {
				t.Fatalf("profile %q unknown", name)
			}
			if len(tools) != n {
				t.Errorf("profile %q has %d tools, want %d", name, len(tools), n)
			}
			if len(tools) >= len(All()) {
				t.Errorf("profile %q is not smaller than the fail-open set", name)
			}
		})
	}
}

func TestProfileFailOpenNames(t *testing.T) {
	for _, name := range []string{"", "unknown", "Implement", "triageIssue"} {
		if tools, ok := ProfileTools(name); ok || tools != nil {
			t.Errorf("ProfileTools(%q) = %v, %v; want nil, false (fail-open)", name, tools, ok)
		}
	}
}

// Every name a profile references must exist in the catalog: guards Part B's merges and
// Part C's names against a stale profile string.
func TestProfileNamesExistInCatalog(t *testing.T) {
	for name, p := range profiles {
		for _, tool := range append(slices.Clone(alwaysOn), p.operator...) {
			if _, ok := ByName(tool); !ok {
				t.Errorf("profile %q names %q, which is not in the catalog", name, tool)
			}
		}
	}
	for _, gone := range []string{"code_community", "code_hyperedge"} {
		if _, ok := ByName(gone); ok {
			t.Errorf("%s must be gone after Part B", gone)
		}
	}
}

func TestProfileMembership(t *testing.T) {
	tests := []struct {
		profile  string
		includes []string
		excludes []string
	}{
		{ProfileBrainstorm, []string{"comment_on_issue", "propose_issue", "skip_research", "chat_post_message"},
			[]string{"change_summary", "review_verdict", "issue_outcome", "pr_outcome"}},
		{ProfileTriage, []string{"issue_outcome", "comment", "comment_on_issue"}, []string{"change_summary", "pr_outcome", "chat_list_rooms"}},
		{ProfileLifecycle, []string{"chat_list_rooms", "change_summary", "pr_outcome", "review_verdict", "issue_outcome", "decline_implementation", "already_done"}, nil},
		{ProfileReview, []string{"review_verdict"}, []string{"chat_list_rooms", "pr_outcome"}},
		{ProfileImplement, []string{"code_communities", "code_hyperedges", "create_memory"}, []string{"chat_list_rooms", "review_verdict", "skip_research"}},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			tools, _ := ProfileTools(tt.profile)
			for _, n := range append(AlwaysOn(), tt.includes...) {
				if !tools[n] {
					t.Errorf("%s lacks %s", tt.profile, n)
				}
			}
			for _, n := range tt.excludes {
				if tools[n] {
					t.Errorf("%s must not include %s", tt.profile, n)
				}
			}
		})
	}
}

func TestEveryProfileHasReportInternalIssueAndResearch(t *testing.T) {
	for _, name := range ProfileNames() {
		tools, _ := ProfileTools(name)
		if !tools[ReportInternalIssue] {
			t.Errorf("%s lacks %s", name, ReportInternalIssue)
		}
		for _, tool := range All() {
			if (tool.Group == GroupMemory || tool.Group == GroupCodeGraph) && !tools[tool.Name] {
				t.Errorf("%s lacks research tool %s", name, tool.Name)
			}
			if tool.Group == GroupChat && tools[tool.Name] != slices.Contains([]string{ProfileBrainstorm, ProfileLifecycle, ProfileIncident}, name) {
				t.Errorf("%s: chat tool %s membership wrong", name, tool.Name)
			}
		}
	}
}

// The operator tools of every profile, exactly as docs/architecture.md ("Profiles") lists them (alwaysOn
// project_get, repo_list and task_get included). Counts alone would miss a swapped tool.
func TestProfileOperatorToolsExact(t *testing.T) {
	always := []string{"project_get", "repo_list", "task_get"}
	implement := []string{"task_note", "subtask_create", "subtask_list", "subtask_get", "subtask_cancel", "comment",
		"change_summary", "pr_outcome", "decline_implementation", "already_done"}
	review := []string{"task_note", "comment", "review_verdict"}
	triage := []string{"task_note", "comment", "comment_on_issue", "issue_outcome", "task_list"}
	want := map[string][]string{
		ProfileImplement:   implement,
		ProfileReview:      review,
		ProfileTriage:      triage,
		ProfileBrainstorm:  {"task_note", "comment_on_issue", "propose_issue", "skip_research", "task_list", "proposal_list"},
		ProfileLifecycle:   append(append(slices.Clone(implement), review...), triage...),
		ProfileIncident:    {"task_note", "comment", "comment_on_issue", "propose_issue", "task_list", "issue_outcome"},
		ProfileSelfImprove: {"task_note", "propose_issue", "proposal_list", "change_summary", "pr_outcome", "decline_implementation", "already_done"},
	}
	for name, ops := range want {
		expected := append(slices.Clone(always), ops...)
		slices.Sort(expected)
		expected = slices.Compact(expected)
		tools, _ := ProfileTools(name)
		var got []string
		for _, tool := range OperatorTools() {
			if tools[tool.Name] {
				got = append(got, tool.Name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, expected) {
			t.Errorf("%s operator tools = %v, want %v", name, got, expected)
		}
	}
}
