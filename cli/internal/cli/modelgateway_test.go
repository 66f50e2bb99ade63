package cli_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tatara.dev/cli/internal/cli"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/modelusage"
	"tatara.dev/testkit/testutil"
)

const modelKey = "sk-ant-api03-model-key-9b4e27c1d0f3"

// Bad flags stop the command before it listens, with an error naming the flag and no secret.
func TestModelGatewayFlagErrors(t *testing.T) {
	good := writeTokenFile(t, modelKey+"\n")
	empty := writeTokenFile(t, " \n\t")
	big := writeTokenFile(t, strings.Repeat("k", 65<<10))
	const up = "--upstream=https://api.example.com"
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no flags", nil, `required flag(s) "credential-file", "upstream" not set`},
		{"no credential file", []string{up}, `required flag(s) "credential-file" not set`},
		{"missing credential file", []string{up, "--credential-file=/nonexistent/key"}, "failed to read --credential-file"},
		{"empty credential file", []string{up, "--credential-file=" + empty}, "invalid --credential-file " + empty + ": it is empty"},
		{"oversized credential file", []string{up, "--credential-file=" + big}, "invalid --credential-file " + big + ": larger than"},
		{"listen on every interface", []string{"--listen=:7779", up, "--credential-file=" + good}, `invalid --listen ":7779": the model gateway must listen on a loopback IP address`},
		{"listen on a pod IP", []string{"--listen=10.0.0.5:7779", up, "--credential-file=" + good}, `invalid --listen "10.0.0.5:7779"`},
		{"listen without a port", []string{"--listen=127.0.0.1", up, "--credential-file=" + good}, `invalid --listen "127.0.0.1"`},
		{"credential in the upstream", []string{"--upstream=https://x:" + modelKey + "@api.example.com", "--credential-file=" + good}, "(--upstream): the URL must not carry credentials"},
		{"unparsable upstream", []string{"--upstream=https://x:" + modelKey + "@api.example.com:port", "--credential-file=" + good}, "invalid --upstream"},
		{"upstream with a query", []string{"--upstream=https://api.example.com/?beta=true", "--credential-file=" + good}, "(--upstream): the URL must not have a query"},
		{"ws upstream", []string{"--upstream=ws://api.example.com", "--credential-file=" + good}, "(--upstream): the scheme must be http or https"},
		{"auth scheme", []string{up, "--credential-file=" + good, "--auth-scheme=basic"}, `invalid auth scheme "basic" (--auth-scheme): want x-api-key or bearer`},
		{"negative budget", []string{up, "--credential-file=" + good, "--token-budget=-1"}, "(--token-budget): it must be 0 (no budget) or positive"},
		{"negative tokens used", []string{up, "--credential-file=" + good, "--tokens-used=-5"}, "(--tokens-used): it must not be negative"},
		{"budget not a number", []string{up, "--credential-file=" + good, "--token-budget=1e6"}, `invalid argument "1e6" for "--token-budget"`},
		{"unwritable usage file", []string{up, "--credential-file=" + good, "--usage-file=/nonexistent/dir/usage"}, "failed to write the usage file (--usage-file)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"model-gateway", "--listen=127.0.0.1:0", "--metrics-addr="}, tt.args...)
			code := cli.Execute(args, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.wantErr)
			}
			if strings.Contains(stderr.String(), modelKey) {
				t.Fatalf("the credential is in the output: %s", stderr.String())
			}
		})
	}
}

// The binary as the agent pod runs it: the kind and profile from the pod's env, a stream
// forwarded with the credential, its usage in the usage file and the metrics, /healthz, a pool
// pod's 503 until the claim, JSON logs without the credential, and a clean exit on SIGTERM.
func TestModelGatewayBinary(t *testing.T) {
	upstreamKeys := make(chan string, 10)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamKeys <- r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-bin\",\"usage\":{\"input_tokens\":30,\"cache_read_input_tokens\":70,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":25}}\n\n")
	}))
	defer upstream.Close()
	addrs := freeAddrs(t, 2)
	listen, metricsAddr := addrs[0], addrs[1]
	dir := t.TempDir()
	usageFile, claimFile := filepath.Join(dir, "termination-log"), filepath.Join(dir, "assignment.json")
	cmd := exec.Command(tataraBin(t), "model-gateway", "--listen", listen, "--metrics-addr", metricsAddr, "--upstream", upstream.URL,
		"--credential-file", writeTokenFile(t, "  "+modelKey+"\n"), "--usage-file", usageFile, "--claim-file", claimFile,
		"--token-budget", "1000", "--tokens-used", "100")
	cmd.Env = append(os.Environ(), "TATARA_TASK_KIND=implement", "TATARA_TOOL_PROFILE=implement")
	logs, logsDone := startLogged(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	testutil.WaitFor(t, "startup log", func() bool { return logs.find("model gateway started") != nil })
	if start := logs.find("model gateway started"); start["listen"] != "http://"+listen || start["upstream"] != upstream.URL ||
		start["kind"] != "implement" || start["token_budget"] != float64(1000) {
		t.Errorf("startup log = %v", start)
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/messages?beta=true", strings.NewReader(`{"stream":true}`))
		req.Header.Set("X-Api-Key", "agent-guess")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("http://" + metricsAddr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, body := get("http://" + listen + "/v1/models"); code != http.StatusNotFound || !strings.Contains(body, `"not_found_error"`) {
		t.Errorf("GET /v1/models = %d %s, want a 404 not_found_error", code, body)
	}
	if code, body := post(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not claimed yet") {
		t.Errorf("before the claim: %d %s, want 503", code, body)
	}
	if err := claim.WriteFile(claimFile, claim.Assignment{Project: "proj", Task: "t1", Kind: "implement", Directive: "d"}); err != nil {
		t.Fatal(err)
	}
	if code, body := post(); code != http.StatusOK || !strings.Contains(body, `"output_tokens":25`) {
		t.Errorf("after the claim: %d %q, want the stream", code, body)
	}
	if len(upstreamKeys) != 1 {
		t.Errorf("%d requests reached the upstream, want 1", len(upstreamKeys))
	} else if got := <-upstreamKeys; got != modelKey+"|" {
		t.Errorf("upstream credentials %q, want the gateway's x-api-key alone", got)
	}
	testutil.WaitFor(t, "the usage file", func() bool {
		raw, _ := os.ReadFile(usageFile)
		u, err := modelusage.Parse(string(raw))
		return err == nil && u == modelusage.Usage{Requests: 1, InputTokens: 30, OutputTokens: 25, CacheReadInputTokens: 70}
	})
	_, text := get("http://" + metricsAddr + "/metrics")
	for _, want := range []string{
		`tatara_model_requests_total{code="200",kind="implement",model="claude-bin",profile="implement"} 1`,
		`tatara_model_requests_total{code="503",kind="implement",model="none",profile="implement"} 1`,
		`tatara_model_tokens_total{kind="implement",model="claude-bin",profile="implement",type="output"} 25`,
		`tatara_model_tokens_total{kind="implement",model="claude-bin",profile="implement",type="cache_read"} 70`,
		`tatara_model_budget_refusals_total{kind="implement",profile="implement"} 0`,
		`tatara_model_gateway_build_info{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v (want 0); log: %s", err, strings.Join(logs.raw, "\n"))
	}
	if rec := logs.find("model gateway stopped"); rec == nil || rec["tokens"] != float64(125) {
		t.Errorf("stop log = %v, want the pod's 125 tokens", rec)
	}
	for _, l := range logs.raw {
		if strings.Contains(l, modelKey) {
			t.Errorf("the credential reached the log: %s", l)
		}
	}
}
