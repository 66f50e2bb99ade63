package charts_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// apiTLSOn names the REST API's certificate Secret, as a cert-manager Certificate would write it.
func apiTLSOn() map[string]any {
	return map[string]any{"apiTLS": map[string]any{"secretName": "tatara-operator-api-tls"}}
}

// apiTLSOff turns the REST API's TLS off.
func apiTLSOff() map[string]any {
	return map[string]any{"apiTLS": map[string]any{"enabled": false}}
}

// TestOperatorAPITLS: by default the operator issues its own certificate into
// <fullname>-api-tls (--api-tls-issue-secret, a Role for that Secret alone) and the default
// TATARA_OPERATOR_URL is https; apiTLS.secretName mounts that Secret read-only instead and passes
// --api-tls-cert-dir; apiTLS.enabled false renders none of it.
func TestOperatorAPITLS(t *testing.T) {
	const (
		certDirArg = "--api-tls-cert-dir=/var/run/tatara/api-tls"
		issueArg   = "--api-tls-issue-secret=tatara-system/tatara-operator-api-tls"
	)
	withURL := apiTLSOn()
	withURL["agentEnv"] = map[string]any{"operatorURL": "https://operator.example.test:8443"}
	tests := []struct {
		name       string
		vals       map[string]any
		wantURL    string
		wantTLS    bool // a mounted certificate
		wantIssued bool
	}{
		{"issued by default", nil, "https://tatara-operator.tatara-system.svc:8082", false, true},
		{"off", apiTLSOff(), "http://tatara-operator.tatara-system.svc:8082", false, false},
		{"mounted", apiTLSOn(), "https://tatara-operator.tatara-system.svc:8082", true, false},
		{"mounted, with an https operatorURL", withURL, "https://operator.example.test:8443", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustRender(t, "tatara-operator", tt.vals)
			dep := objs.find("Deployment", "tatara-operator")
			if dep == nil {
				t.Fatal("no Deployment tatara-operator")
			}
			spec := nested(t, dep, "spec", "template", "spec").(map[string]any)
			c := spec["containers"].([]any)[0].(map[string]any)
			args := c["args"].([]any)
			if !slices.Contains(args, any("--operator-url="+tt.wantURL)) {
				t.Errorf("args %v lack --operator-url=%s", args, tt.wantURL)
			}
			if got := slices.Contains(args, any(certDirArg)); got != tt.wantTLS {
				t.Errorf("%s in args = %v, want %v", certDirArg, got, tt.wantTLS)
			}
			if got := slices.Contains(args, any(issueArg)); got != tt.wantIssued {
				t.Errorf("%s in args = %v, want %v", issueArg, got, tt.wantIssued)
			}
			role := objs.find("Role", "tatara-operator-api-tls")
			if (role != nil) != tt.wantIssued {
				t.Fatalf("Role tatara-operator-api-tls rendered = %v, want %v", role != nil, tt.wantIssued)
			}
			if role != nil {
				checkIssuedSecretRole(t, role.Object)
			}
			secret := objs.find("Secret", "tatara-operator-api-tls")
			if (secret != nil) != tt.wantIssued {
				t.Errorf("Secret tatara-operator-api-tls rendered = %v, want %v", secret != nil, tt.wantIssued)
			}
			if secret != nil {
				if data, _ := secret.Object["data"].(map[string]any); len(data) != 0 {
					t.Errorf("the chart's Secret has data %v: helm would overwrite the operator's CA", data)
				}
			}
			vols, _ := spec["volumes"].([]any)
			mounts, _ := c["volumeMounts"].([]any)
			if !tt.wantTLS {
				if len(vols) != 0 || len(mounts) != 0 {
					t.Errorf("TLS off renders volumes %v and mounts %v", vols, mounts)
				}
				return
			}
			if len(vols) != 1 || len(mounts) != 1 {
				t.Fatalf("volumes %v, mounts %v: want the certificate's Secret alone", vols, mounts)
			}
			v, m := vols[0].(map[string]any), mounts[0].(map[string]any)
			if secret, _ := v["secret"].(map[string]any); secret["secretName"] != "tatara-operator-api-tls" {
				t.Errorf("volume %v, want Secret tatara-operator-api-tls", v)
			}
			if m["name"] != v["name"] || m["mountPath"] != "/var/run/tatara/api-tls" || m["readOnly"] != true {
				t.Errorf("mount %v, want volume %v read-only at /var/run/tatara/api-tls", m, v["name"])
			}
		})
	}
}

// TestOperatorAPITLSRefusesBadValues: a Secret name Kubernetes would refuse fails the schema, and
// an http operator URL next to TLS fails the render (the token would go out in clear).
func TestOperatorAPITLSRefusesBadValues(t *testing.T) {
	httpURL := apiTLSOn()
	httpURL["agentEnv"] = map[string]any{"operatorURL": "http://tatara-operator.tatara-system.svc:8082"}
	tests := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"Secret name not a DNS name", map[string]any{"apiTLS": map[string]any{"secretName": "API_TLS"}}, []string{"/apiTLS/secretName", "values don't meet the specifications of the schema"}},
		{"typo in apiTLS", map[string]any{"apiTLS": map[string]any{"secret": "x"}}, []string{"secret", "additional properties"}},
		{"http operatorURL with a mounted certificate", httpURL, []string{`agentEnv.operatorURL "http://tatara-operator.tatara-system.svc:8082" must be https while apiTLS.enabled is true`}},
		{"http operatorURL with an issued certificate", map[string]any{"agentEnv": map[string]any{"operatorURL": "http://op:8082"}}, []string{`agentEnv.operatorURL "http://op:8082" must be https`}},
		{"enabled not a boolean", map[string]any{"apiTLS": map[string]any{"enabled": "yes"}}, []string{"/apiTLS/enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, "tatara-operator", tt.vals)
			if err == nil {
				t.Fatalf("chart accepted %v", tt.vals)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// checkIssuedSecretRole: the operator may read and renew its certificate's Secret, by name, and
// nothing else (the chart creates the Secret).
func checkIssuedSecretRole(t *testing.T, role map[string]any) {
	t.Helper()
	rules, _ := role["rules"].([]any)
	var named bool
	for _, r := range rules {
		rule := r.(map[string]any)
		verbs := fmt.Sprint(rule["verbs"])
		names, _ := rule["resourceNames"].([]any)
		switch {
		case fmt.Sprint(rule["resources"]) != "[secrets]":
			t.Errorf("rule %v grants more than Secrets", rule)
		case verbs == "[get update]" && len(names) == 1 && names[0] == "tatara-operator-api-tls":
			named = true
		default:
			t.Errorf("unexpected rule %v", rule)
		}
	}
	if !named {
		t.Errorf("rules %v: want get and update on Secret tatara-operator-api-tls", rules)
	}
}
