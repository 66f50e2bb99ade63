package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/testkit/testutil"
)

// TestBinary builds cmd/ and runs the real tatara-operator process against the API server:
// probes answer, a Task gets its pod, the REST API answers with the Task's token, every log
// line is JSON, and SIGTERM stops it cleanly.
func TestBinary(t *testing.T) {
	bin := testutil.BuildBinary(t, "../..", "./cmd")
	kubeconfig := writeKubeconfig(t)

	metricsAddr, probeAddr, apiAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr, "--api-bind-address", apiAddr,
		"--runtime-namespace", runtimeNS, "--memory-url", "http://memory.test:8080")
	// The process's stderr, read while it runs.
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	eventually(t, 30*time.Second, "/readyz of the operator process", func() error {
		if code, body := get(t, "http://"+probeAddr+"/readyz"); code != 200 {
			return fmt.Errorf("%d %s; stderr:\n%s", code, body, stderr.String())
		}
		return nil
	})
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "from-binary", "p", tatarav1.KindIncident)
	pod := waitPod(t, ns, task.Name)
	if env := initContainer(t, pod, agent.CLIContainer).Env; len(env) < 5 || env[4].Name != "TATARA_MEMORY_URL" || env[4].Value != "http://memory.test:8080" {
		t.Fatalf("flag --memory-url not in the cli container's env: %+v", env)
	}
	if r := call(t, "http://"+apiAddr, "GET", "/api/v1/tasks/from-binary", token(t, ns, task.Name), ""); r.code != 200 {
		t.Fatalf("task_get through the process = %d %s", r.code, r.raw)
	}
	if code, body := get(t, "http://"+metricsAddr+"/metrics"); code != 200 || !bytes.Contains([]byte(body), []byte("tatara_operator_agent_pods_created_total 1")) {
		t.Fatalf("/metrics = %d, lacks the pod counter", code)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("operator exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("operator did not stop within 20s of SIGTERM")
	}
	sc := bufio.NewScanner(bytes.NewReader([]byte(stderr.String())))
	lines := 0
	for sc.Scan() {
		lines++
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
			t.Errorf("log line is not slog JSON: %s", sc.Text())
		}
	}
	if lines == 0 {
		t.Fatal("the operator logged nothing")
	}
}

// writeKubeconfig writes a kubeconfig for the envtest API server (cfg) and returns its path, for
// a process of the operator binary.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
