//go:build scale

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The scale benchmark's cluster: the test's API server (envtest) with the real kube-scheduler
// binding the agent pods to fake nodes, and kwok (sigs.k8s.io/kwok) playing every kubelet: it
// moves each pod to Running, sidecars included, and kwokRunFor later to Succeeded. Both run as
// processes of their own, so the operator's figures (heap, CPU, requests) stay the operator's.

const (
	// kwokNodes fake nodes of kwokNodePods pods each: room for 11,000 agent pods.
	kwokNodes    = 100
	kwokNodePods = 110
	// kwokRunFor is how long an agent pod runs, from Running to Succeeded (kwok picks each pod's
	// delay between it and a second more, so the endings do not all arrive at once).
	kwokRunFor = 20 * time.Second
	// kwokNodeAnnotation marks the nodes kwok manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// kwokStages are the kwok Stages of the run: a node becomes Ready; a pod on a node becomes
// Running with its native sidecars started and its other init containers done; an agent pod
// ends Succeeded kwokRunFor later, every container exiting 0; a deleted pod goes at once. They
// are written here from kwok's Stage API, not copied from kwok's defaults, which end only the
// pods of Jobs.
// kwok's own client has no client-side rate limit: the API server's priority and fairness decides.
var kwokStages = fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      conditions:
      - type: Ready
        status: "True"
        reason: KubeletReady
        message: kwok plays this node's kubelet
        lastHeartbeatTime: {{ Now | Quote }}
        lastTransitionTime: {{ Now | Quote }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      conditions:
      {{ range list "Initialized" "ContainersReady" "Ready" }}
      - type: {{ . }}
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        ready: true
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ else }}
        ready: false
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: agent-pod-succeeded
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      app.kubernetes.io/name: tatara-agent
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
  delay:
    durationMilliseconds: %d
    jitterDurationMilliseconds: %d
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Succeeded
      conditions:
      {{ range list "ContainersReady" "Ready" }}
      - type: {{ . }}
        status: "False"
        reason: PodCompleted
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-deleted
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
`, kwokRunFor.Milliseconds(), (kwokRunFor + time.Second).Milliseconds())

// schedulerConfig is the kube-scheduler's configuration: no leader election (it is alone), and
// a client limit well above what 10,000 bindings in a burst need, as large clusters set it; the
// scheduler's own default (50/s) would make the bench measure that limit.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`

// startKwokCluster starts the scheduler and kwok against the test API server and creates the
// fake nodes; both processes are stopped when the test ends. TATARA_KWOK and
// TATARA_KUBE_SCHEDULER name the binaries (make bench-scale builds and sets them): a missing one
// fails the bench, it is never skipped.
func startKwokCluster(t *testing.T) {
	t.Helper()
	bins := map[string]string{}
	for _, env := range []string{"TATARA_KWOK", "TATARA_KUBE_SCHEDULER"} {
		path := os.Getenv(env)
		if st, err := os.Stat(path); path == "" || err != nil || st.IsDir() {
			t.Fatalf("%s=%q: want the binary's path (make bench-scale sets it: hack/tools.sh kwok, hack/k8s-binaries.sh kube-scheduler)", env, path)
		}
		bins[env] = path
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"envtest": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"envtest": {Cluster: "envtest", AuthInfo: "admin"}},
		CurrentContext: "envtest",
	}, kubeconfig); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	scheduler := write("scheduler.yaml", fmt.Sprintf(schedulerConfig, kubeconfig))
	stages := write("kwok.yaml", kwokStages)
	start(t, dir, "kube-scheduler", bins["TATARA_KUBE_SCHEDULER"], "--config="+scheduler, "--secure-port=0", "-v=1")
	start(t, dir, "kwok", bins["TATARA_KWOK"], "--kubeconfig="+kubeconfig, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--cidr=10.128.0.0/12", "--node-ip=10.127.0.1", "--server-address=127.0.0.1:0")

	ctx := context.Background()
	for i := range kwokNodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%03d", i),
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				Labels:      map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": fmt.Sprintf("kwok-node-%03d", i), "type": "kwok"},
			},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("1Ti"),
					corev1.ResourcePods: *resource.NewQuantity(kwokNodePods, resource.DecimalSI),
				},
			},
		}
		node.Status.Capacity = node.Status.Allocatable
		if err := k8s.Create(ctx, node); err != nil {
			t.Fatalf("creating fake node %s: %v", node.Name, err)
		}
	}
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &corev1.Node{}); err != nil {
			t.Errorf("deleting the fake nodes: %v", err)
		}
	})
	// The nodes are ready once kwok has made them so.
	deadline := time.Now().Add(time.Minute)
	for {
		var nodes corev1.NodeList
		if err := k8s.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == kwokNodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kwok made %d of %d fake nodes Ready in a minute (logs in %s)", ready, kwokNodes, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Admission taints a new node not-ready; the node lifecycle controller of
	// kube-controller-manager, which envtest does not run, lifts the taint once the node is Ready.
	// Here the bench does.
	for i := range kwokNodes {
		var node corev1.Node
		if err := k8s.Get(ctx, client.ObjectKey{Name: fmt.Sprintf("kwok-node-%03d", i)}, &node); err != nil {
			t.Fatal(err)
		}
		node.Spec.Taints = nil
		if err := k8s.Update(ctx, &node); err != nil {
			t.Fatalf("lifting the not-ready taint of %s: %v", node.Name, err)
		}
	}
}

// start runs a helper process with its output in dir/<name>.log, and stops it when the test
// ends; one that exits early fails the test with its log's tail.
func start(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
			raw, _ := os.ReadFile(logPath)
			t.Errorf("%s exited before the end of the bench: %s", name, tail(string(raw), 2000))
		default:
			if t.Failed() {
				raw, _ := os.ReadFile(logPath)
				t.Logf("%s's log, its end: %s", name, tail(string(raw), 3000))
			}
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		_ = logFile.Close()
	})
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
