package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/egress"
	"tatara.dev/testkit/testutil"
)

// TestEgressProxyBinary runs the real `operator egress-proxy` process against the API server, as
// the tatara-project chart does: it is ready once it has read its Project; a CONNECT from an agent
// pod's address to a host off the allow-list gets the 403 with the refusal header, the refusal is
// counted on /metrics, and the Task that owns the pod gets an EgressBlocked Event for each host,
// found from the source address through the proxy's cache of agent pods; SIGTERM stops it cleanly.
func TestEgressProxyBinary(t *testing.T) {
	bin := testutil.BuildBinary(t, "../..", "./cmd")
	ns := newNamespace(t)
	ctx := context.Background()
	project := newProject(t, ns, "egress", withEgress(&tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy,
		ProxyURL: "http://egress-proxy.team.svc:3128", Allow: []string{"pkgs.example.com"}}))
	task := newTask(t, ns, "asker", "egress", tatarav1.KindImplement)

	// The agent pod the request comes from, as the operator builds it (no operator runs here);
	// the proxy knows it by its address, 127.0.0.1.
	pod := agent.BuildPod(task, project, agent.Config{CLIImage: "cli:test", WrapperImage: "wrapper:test"})
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	kubeconfig := writeKubeconfig(t)
	proxyAddr, metricsAddr, probeAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "egress-proxy", "--project=egress", "--namespace="+ns, "--listen="+proxyAddr,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probeAddr)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})

	eventually(t, 30*time.Second, "the proxy is ready (it has read its Project)", func() error {
		return httpOK("http://" + probeAddr + "/readyz")
	})

	// The pod's cache may trail the proxy's readiness: ask until the refusal names the Task.
	eventually(t, 30*time.Second, "a refusal the proxy attributes to the Task", func() error {
		code, header, body, err := connect(proxyAddr, "evil.example.test:443")
		if err != nil {
			return err
		}
		if code != http.StatusForbidden || header.Get(egress.BlockedHeader) != egress.BlockedValue ||
			body != "tatara egress proxy: blocked: evil.example.test:443 (not_allowed)" {
			t.Fatalf("CONNECT off the allow-list: %d %v %q", code, header, body)
		}
		if !strings.Contains(stderr.String(), `"task":"asker"`) {
			return fmt.Errorf("no refusal logged for task asker yet:\n%s", stderr.String())
		}
		return nil
	})
	// A second host: its own Event, not a repeat of the first one's (the recorder folds Events it
	// takes for the same into one series that keeps the first note).
	if code, _, body, err := connect(proxyAddr, "other.example.test:8443"); err != nil || code != http.StatusForbidden {
		t.Fatalf("CONNECT to a second host off the allow-list: %d %q %v", code, body, err)
	}
	for _, note := range []string{"blocked: evil.example.test:443 (not_allowed)", "blocked: other.example.test:8443 (not_allowed)"} {
		eventually(t, 30*time.Second, "the EgressBlocked Event "+note+" on the Task", func() error {
			var evs corev1.EventList
			if err := k8s.List(ctx, &evs); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Namespace == ns && e.InvolvedObject.Kind == "Task" && e.InvolvedObject.Name == "asker" && e.InvolvedObject.UID == task.UID &&
					e.Reason == egress.EventReason && e.Type == corev1.EventTypeWarning && e.Message == note {
					return nil
				}
			}
			return fmt.Errorf("%d events, none EgressBlocked %q on task asker", len(evs.Items), note)
		})
	}
	eventually(t, 10*time.Second, "the refusal on /metrics", func() error {
		body, err := httpGet("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "tatara_egress_proxy_requests_total{") && strings.Contains(line, `decision="denied"`) &&
				strings.Contains(line, `project="egress"`) && strings.Contains(line, `reason="not_allowed"`) && !strings.HasSuffix(line, " 0") {
				return nil
			}
		}
		return fmt.Errorf("no denied not_allowed count on /metrics")
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM the proxy exited with %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the proxy did not stop within a minute of SIGTERM\n%s", stderr.String())
	}
}

// connect sends CONNECT target to the proxy at addr and returns its answer.
func connect(addr, target string) (int, http.Header, string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return 0, nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(body)), nil
}

func httpGet(url string) (string, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url) //nolint:noctx // the test's own process on loopback
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

func httpOK(url string) error {
	_, err := httpGet(url)
	return err
}
