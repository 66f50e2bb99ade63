package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tatara.dev/operator/internal/agent"
)

func TestRuntimeResources(t *testing.T) {
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-system", Name: name}, Data: data}
	}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		check   func(t *testing.T, r agent.Resources)
		wantErr string
	}{
		{"cli keys", cm(CLIRuntimeConfigMap, map[string]string{ImageKey: "x", CLIResourcesKey: `{"requests":{"cpu":"20m","memory":"48Mi"},"limits":{"memory":"128Mi"}}`}),
			func(t *testing.T, r agent.Resources) {
				if q := r.CLI.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("128Mi")) != 0 {
					t.Errorf("cli memory limit %v, want 128Mi", q.String())
				}
				if len(r.GitGateway.Requests) != 0 {
					t.Errorf("git-gateway %v, want untouched (its key is absent)", r.GitGateway)
				}
			}, ""},
		{"wrapper keys", cm(WrapperRuntimeConfigMap, map[string]string{AgentResourcesKey: `{"limits":{"memory":"8Gi"}}`, WorkspaceInitResourcesKey: `{"requests":{"cpu":"1"}}`}),
			func(t *testing.T, r agent.Resources) {
				if q := r.Agent.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("8Gi")) != 0 {
					t.Errorf("agent memory limit %v, want 8Gi", q.String())
				}
				if q := r.WorkspaceInit.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
					t.Errorf("workspace-init cpu %v, want 1", q.String())
				}
			}, ""},
		{"a cli key in the wrapper map is not read", cm(WrapperRuntimeConfigMap, map[string]string{CLIResourcesKey: `{"limits":{"memory":"1Gi"}}`}),
			func(t *testing.T, r agent.Resources) {
				if len(r.CLI.Limits) != 0 {
					t.Errorf("cli %v taken from the wrapper's ConfigMap", r.CLI)
				}
			}, ""},
		{"bad JSON", cm(CLIRuntimeConfigMap, map[string]string{CLIResourcesKey: `{"requests":`}), nil, `key "resources"`},
		{"unknown field", cm(CLIRuntimeConfigMap, map[string]string{GitGatewayResourcesKey: `{"request":{"cpu":"1"}}`}), nil, `unknown field "request"`},
		{"bad quantity", cm(WrapperRuntimeConfigMap, map[string]string{AgentResourcesKey: `{"limits":{"memory":"lots"}}`}), nil, `key "agentResources"`},
		{"two values", cm(WrapperRuntimeConfigMap, map[string]string{AgentResourcesKey: `{} {}`}), nil, "more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r agent.Resources
			err := runtimeResources(tt.cm, &r)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.cm.Name) {
					t.Fatalf("error %v, want one naming %s and %q", err, tt.cm.Name, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
		})
	}
}

func TestRuntimeScrapeInterval(t *testing.T) {
	for _, tt := range []struct {
		name    string
		data    map[string]string
		want    time.Duration
		wantErr string
	}{
		{"monitoring off: no key", map[string]string{ImageKey: "x"}, 0, ""},
		{"the chart's default", map[string]string{ScrapeIntervalKey: "30s"}, 30 * time.Second, ""},
		{"minutes", map[string]string{ScrapeIntervalKey: "2m"}, 2 * time.Minute, ""},
		{"no unit", map[string]string{ScrapeIntervalKey: "30"}, 0, `key "metricsScrapeInterval" is not a positive duration such as 30s: "30"`},
		{"zero", map[string]string{ScrapeIntervalKey: "0s"}, 0, "not positive"},
		{"negative", map[string]string{ScrapeIntervalKey: "-5s"}, 0, "not positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-system", Name: CLIRuntimeConfigMap}, Data: tt.data}
			got, err := runtimeScrapeInterval(cm)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "tatara-system/"+CLIRuntimeConfigMap) {
					t.Fatalf("error %v, want one naming the ConfigMap and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("runtimeScrapeInterval = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestRuntimeRecordInternalIssues(t *testing.T) {
	for _, tt := range []struct {
		name    string
		data    map[string]string
		want    bool
		wantErr string
	}{
		{"a chart from before the key", map[string]string{ImageKey: "x"}, false, ""},
		{"on", map[string]string{RecordInternalIssuesKey: "true"}, true, ""},
		{"off", map[string]string{RecordInternalIssuesKey: "false"}, false, ""},
		{"not a boolean", map[string]string{RecordInternalIssuesKey: "yes"}, false, `key "recordInternalIssues" is "yes": want true or false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-system", Name: CLIRuntimeConfigMap}, Data: tt.data}
			got, err := runtimeRecordInternalIssues(cm)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "tatara-system/"+CLIRuntimeConfigMap) {
					t.Fatalf("error %v, want one naming the ConfigMap and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("runtimeRecordInternalIssues = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
