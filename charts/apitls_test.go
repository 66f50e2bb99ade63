package charts_test

import (
	"slices"
	"strings"
	"testing"
)

// apiTLSOn names the REST API's certificate Secret, as a cert-manager Certificate would write it.
func apiTLSOn() map[string]any {
	return map[string]any{"apiTLS": map[string]any{"secretName": "tatara-operator-api-tls"}}
}

// TestOperatorAPITLS: apiTLS.secretName mounts that Secret read-only, passes --api-tls-cert-dir
// and makes the default TATARA_OPERATOR_URL https; unset, none of it is rendered.
func TestOperatorAPITLS(t *testing.T) {
	const certDirArg = "--api-tls-cert-dir=/var/run/tatara/api-tls"
	withURL := apiTLSOn()
	withURL["agentEnv"] = map[string]any{"operatorURL": "https://operator.example.test:8443"}
	tests := []struct {
		name    string
		vals    map[string]any
		wantURL string
		wantTLS bool
	}{
		{"off by default", nil, "http://tatara-operator.tatara-system.svc:8082", false},
		{"on", apiTLSOn(), "https://tatara-operator.tatara-system.svc:8082", true},
		{"on, with an https operatorURL", withURL, "https://operator.example.test:8443", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dep := mustRender(t, "tatara-operator", tt.vals).find("Deployment", "tatara-operator")
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
		{"http operatorURL with TLS on", httpURL, []string{`agentEnv.operatorURL "http://tatara-operator.tatara-system.svc:8082" must be https when apiTLS.secretName is set`}},
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
