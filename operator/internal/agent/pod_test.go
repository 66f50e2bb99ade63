package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/testkit/golden"
)

func testConfig() Config {
	return Config{
		OperatorURL:     "http://tatara-operator.tatara-system.svc:8082",
		MemoryURL:       "http://tatara-memory.tatara-system.svc:8080",
		ChatURL:         "http://tatara-chat.tatara-system.svc:8080",
		CLIImage:        "tatara-cli:0.1.0",
		WrapperImage:    "tatara-wrapper:0.1.0",
		OperatorVersion: "0.1.0",
	}
}

func testTask(kind tatarav1.TaskKind) *tatarav1.Task {
	return &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "team-a", UID: "uid-t1"},
		Spec: tatarav1.TaskSpec{
			Kind:       kind,
			ProjectRef: tatarav1.ProjectReference{Name: "p1"},
			Repo:       "operator",
			Directive:  "fix the flaky test",
		},
	}
}

func testProject(extra ...corev1.EnvVar) *tatarav1.Project {
	return &tatarav1.Project{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "team-a"},
		Spec:       tatarav1.ProjectSpec{Agent: tatarav1.ProjectAgent{ExtraEnvs: extra}},
	}
}

func envValue(env []corev1.EnvVar, name string) (string, int) {
	for i, e := range env {
		if e.Name == name {
			return e.Value, i
		}
	}
	return "", -1
}

// TestToolProfileForKind: every CRD kind gets the cli catalog's profile, which is never "";
// anything else fails open with "". The kind -> profile table itself is pinned once, in the
// cli catalog's tests.
func TestToolProfileForKind(t *testing.T) {
	for _, kind := range tatarav1.TaskKinds {
		t.Run(string(kind), func(t *testing.T) {
			want := profiles.ForKind(string(kind))
			if want == "" {
				t.Fatalf("the cli catalog has no profile for CRD kind %q", kind)
			}
			if got := ToolProfileForKind(kind); got != want {
				t.Fatalf("ToolProfileForKind(%q) = %q, want %q", kind, got, want)
			}
		})
	}
	for _, tt := range []struct {
		name string
		kind tatarav1.TaskKind
	}{
		{"unknown kind fails open", "deploy"},
		{"healthCheck is not a kind (healthCheck Tasks are kind brainstorm)", "healthCheck"},
		{"empty kind", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToolProfileForKind(tt.kind); got != "" {
				t.Fatalf("ToolProfileForKind(%q) = %q, want \"\"", tt.kind, got)
			}
		})
	}
}

// TestTaskKindsAreTheCatalogKinds: the CRD enum (tatarav1.TaskKinds, which TestCRDKindEnum ties
// to the generated CRD) and the kinds the cli catalog maps to a profile are one set; a kind
// added to either alone fails here.
func TestTaskKindsAreTheCatalogKinds(t *testing.T) {
	var crd []string
	for _, k := range tatarav1.TaskKinds {
		crd = append(crd, string(k))
	}
	catalog := profiles.Kinds()
	for _, k := range crd {
		if !slices.Contains(catalog, k) {
			t.Errorf("CRD kind %q has no profile in the cli catalog (profiles.Kinds() = %v)", k, catalog)
		}
	}
	for _, k := range catalog {
		if !slices.Contains(crd, k) {
			t.Errorf("the cli catalog maps kind %q, which is not in the CRD enum (tatarav1.TaskKinds = %v)", k, crd)
		}
	}
	if slices.Sort(crd); !slices.Equal(crd, catalog) {
		t.Errorf("sorted CRD kinds %v != profiles.Kinds() %v", crd, catalog)
	}
}

// TestBuildPodToolProfilePerKind checks the env of BOTH containers for every kind.
func TestBuildPodToolProfilePerKind(t *testing.T) {
	kinds := append(slices.Clone(tatarav1.TaskKinds), "notAKind")
	for _, kind := range kinds {
		want := profiles.ForKind(string(kind)) // "" for notAKind
		t.Run(string(kind), func(t *testing.T) {
			pod := BuildPod(testTask(kind), testProject(), testConfig())
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				got, i := envValue(c.Env, "TATARA_TOOL_PROFILE")
				if i < 0 {
					t.Fatalf("container %q has no TATARA_TOOL_PROFILE", c.Name)
				}
				if got != want {
					t.Errorf("container %q TATARA_TOOL_PROFILE = %q, want %q", c.Name, got, want)
				}
				if got, _ := envValue(c.Env, "TATARA_TASK_KIND"); got != string(kind) {
					t.Errorf("container %q TATARA_TASK_KIND = %q, want %q", c.Name, got, kind)
				}
			}
		})
	}
}

func names(env []corev1.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

// TestBuildPodEnvOrder: the contract's variables first (TATARA_TOOL_PROFILE last of them), the
// wrapper's own next, the Project's extras last; TATARA_TOKEN goes to the cli sidecar only.
func TestBuildPodEnvOrder(t *testing.T) {
	contract := []string{
		"TATARA_PROJECT", "TATARA_TASK", "TATARA_TASK_KIND", "TATARA_OPERATOR_URL",
		"TATARA_MEMORY_URL", "TATARA_CHAT_URL", "TATARA_TOKEN", "TATARA_TOOL_PROFILE",
	}
	withoutToken := slices.DeleteFunc(slices.Clone(contract), func(n string) bool { return n == "TATARA_TOKEN" })
	extras := []corev1.EnvVar{
		{Name: "TATARA_TOOL_PROFILE", Value: "review"},
		{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
	}
	tests := []struct {
		name      string
		container string
		want      []string
	}{
		{"cli sidecar", CLIContainer, append(slices.Clone(contract), "TATARA_TOOL_PROFILE", "HTTPS_PROXY")},
		{"wrapper", WrapperContainer, append(slices.Clone(withoutToken),
			"TATARA_DIRECTIVE", "TATARA_AGENT_COMMAND", "HOME", "ENABLE_TOOL_SEARCH", "TATARA_TOOL_PROFILE", "HTTPS_PROXY")},
	}
	pod := BuildPod(testTask(tatarav1.KindImplement), testProject(extras...), testConfig())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := container(t, pod, tt.container)
			if got := names(c.Env); !slices.Equal(got, tt.want) {
				t.Fatalf("env order\n got %v\nwant %v", got, tt.want)
			}
			// The profile from the kind comes first; the Project's extra (same name) is LAST,
			// so the kubelet resolves TATARA_TOOL_PROFILE to the extra's value.
			first := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TATARA_TOOL_PROFILE" })
			last := lastIndex(c.Env, "TATARA_TOOL_PROFILE")
			if c.Env[first].Value != "implement" || c.Env[last].Value != "review" || first >= last {
				t.Fatalf("profile env: first %d=%q last %d=%q", first, c.Env[first].Value, last, c.Env[last].Value)
			}
		})
	}
	tok := container(t, pod, CLIContainer).Env[slices.Index(contract, "TATARA_TOKEN")]
	if tok.Name != "TATARA_TOKEN" || tok.Value != "" || tok.ValueFrom == nil || tok.ValueFrom.SecretKeyRef == nil ||
		tok.ValueFrom.SecretKeyRef.Name != "tatara-agent-t1-token" || tok.ValueFrom.SecretKeyRef.Key != "token" {
		t.Fatalf("cli TATARA_TOKEN must be a secretKeyRef to tatara-agent-t1-token/token, got %+v", tok)
	}
}

// TestBuildPodOperatorCABundle: TATARA_OPERATOR_CA_BUNDLE is set only when the operator has a CA
// for its REST API, only in the cli sidecar (the one container that calls the operator), right
// after TATARA_TOKEN. Without a CA the env is the contract's (TestBuildPodEnvOrder, the goldens).
func TestBuildPodOperatorCABundle(t *testing.T) {
	const bundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	tests := []struct {
		name   string
		url    string
		bundle string
	}{
		{"plain HTTP", "http://tatara-operator.tatara-system.svc:8082", ""},
		{"TLS without a CA of its own", "https://tatara-operator.tatara-system.svc:8082", ""},
		{"TLS with a CA", "https://tatara-operator.tatara-system.svc:8082", bundle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.OperatorURL, cfg.OperatorCABundle = tt.url, tt.bundle
			pod := BuildPod(testTask(tatarav1.KindImplement), workspaceProject(), cfg)
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				got, i := envValue(c.Env, OperatorCABundleEnv)
				if c.Name != CLIContainer || tt.bundle == "" {
					if i >= 0 {
						t.Errorf("container %s has %s", c.Name, OperatorCABundleEnv)
					}
					continue
				}
				if got != tt.bundle {
					t.Errorf("cli %s = %q, want the CA's PEM", OperatorCABundleEnv, got)
				}
				if _, tok := envValue(c.Env, TokenEnv); i != tok+1 {
					t.Errorf("cli env %v: %s is not right after %s", names(c.Env), OperatorCABundleEnv, TokenEnv)
				}
			}
		})
	}
}

// TestBuildPodRecordInternalIssues: the cli chart's recording switch reaches the cli sidecar alone,
// before TATARA_TOOL_PROFILE (so the extras stay last), in a Task's pod and a pool pod alike.
func TestBuildPodRecordInternalIssues(t *testing.T) {
	for _, record := range []bool{false, true} {
		cfg := testConfig()
		cfg.RecordInternalIssues = record
		for name, pod := range map[string]*corev1.Pod{
			"task": BuildPod(testTask(tatarav1.KindImplement), workspaceProject(), cfg),
			"pool": BuildPoolPod(workspaceProject(), implementPool(), cfg),
		} {
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				got, i := envValue(c.Env, RecordInternalIssuesEnv)
				if c.Name != CLIContainer || !record {
					if i >= 0 {
						t.Errorf("%s pod, record %v: container %s has %s", name, record, c.Name, RecordInternalIssuesEnv)
					}
					continue
				}
				if _, profile := envValue(c.Env, "TATARA_TOOL_PROFILE"); got != "true" || i != profile-1 {
					t.Errorf("%s pod: cli env %v: want %s=true right before TATARA_TOOL_PROFILE", name, names(c.Env), RecordInternalIssuesEnv)
				}
			}
		}
	}
}

// TestWrapperHasNoToken: the agent runs arbitrary code in the wrapper's container and can read
// any process's environ there, so no container but the cli sidecar may carry the Task token, by
// value or by reference to its Secret, whatever the Project (agent image, repo, push).
func TestWrapperHasNoToken(t *testing.T) {
	withImage := testProject()
	withImage.Spec.Agent.Image = "agent:1"
	projects := map[string]*tatarav1.Project{
		"default":              testProject(),
		"extras":               testProject(corev1.EnvVar{Name: "X", Value: "1"}),
		"agent image":          withImage,
		"repo with clone+push": workspaceProject(),
	}
	for name, p := range projects {
		for _, kind := range tatarav1.TaskKinds {
			task := testTask(kind)
			pod := BuildPod(task, p, testConfig())
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				if c.Name == CLIContainer {
					if _, i := envValue(c.Env, "TATARA_TOKEN"); i < 0 {
						t.Errorf("%s: the cli container lost TATARA_TOKEN", name)
					}
					continue
				}
				for _, e := range c.Env {
					if e.Name == "TATARA_TOKEN" || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == SecretName(task.Name)) {
						t.Errorf("%s: container %q has the token in its env: %+v", name, c.Name, e)
					}
				}
				for _, ef := range c.EnvFrom {
					if ef.SecretRef != nil && ef.SecretRef.Name == SecretName(task.Name) {
						t.Errorf("%s: container %q imports the token Secret", name, c.Name)
					}
				}
			}
			for _, v := range pod.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == SecretName(task.Name) {
					t.Errorf("%s: the token Secret is mounted as volume %q", name, v.Name)
				}
			}
		}
	}
}

// TestToolSearchEnv: the Project's mode reaches the agent (the wrapper container) only; unset
// means "false", the measured default.
func TestToolSearchEnv(t *testing.T) {
	tests := []struct {
		mode tatarav1.ToolSearchMode
		want string
	}{
		{"", "false"},
		{tatarav1.ToolSearchOff, "false"},
		{tatarav1.ToolSearchOn, "true"},
		{tatarav1.ToolSearchAuto, "auto"},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			p := testProject()
			p.Spec.Agent.ToolSearch = tt.mode
			pod := BuildPod(testTask(tatarav1.KindImplement), p, testConfig())
			if got, i := envValue(container(t, pod, WrapperContainer).Env, "ENABLE_TOOL_SEARCH"); i < 0 || got != tt.want {
				t.Errorf("wrapper ENABLE_TOOL_SEARCH = %q (index %d), want %q", got, i, tt.want)
			}
			if _, i := envValue(container(t, pod, CLIContainer).Env, "ENABLE_TOOL_SEARCH"); i >= 0 {
				t.Errorf("the cli container has ENABLE_TOOL_SEARCH; only the agent reads it")
			}
		})
	}
}

func lastIndex(env []corev1.EnvVar, name string) int {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}

func container(t *testing.T, pod *corev1.Pod, name string) corev1.Container {
	t.Helper()
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("pod has no container %q", name)
	return corev1.Container{}
}

func TestBuildPodShape(t *testing.T) {
	task := testTask(tatarav1.KindReview)
	pod := BuildPod(task, testProject(), testConfig())

	if pod.Name != "tatara-agent-t1" || pod.Namespace != "team-a" {
		t.Fatalf("pod name %s/%s, want team-a/tatara-agent-t1", pod.Namespace, pod.Name)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != task.UID || !*pod.OwnerReferences[0].Controller {
		t.Fatalf("pod must have the Task as controlling owner, got %+v", pod.OwnerReferences)
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != WrapperContainer ||
		pod.Spec.Containers[0].Image != "tatara-wrapper:0.1.0" {
		t.Fatalf("main container must be the wrapper from the wrapper runtime image, got %+v", pod.Spec.Containers)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("without an agent image only the cli sidecar is an init container, got %d", len(pod.Spec.InitContainers))
	}
	cli := pod.Spec.InitContainers[0]
	if cli.Name != CLIContainer || cli.Image != "tatara-cli:0.1.0" ||
		cli.RestartPolicy == nil || *cli.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("cli must be a native sidecar (restartPolicy Always) from the cli runtime image, got %+v", cli)
	}
	wantCmd := []string{"tatara", "mcp", "--transport", "http", "--listen", "127.0.0.1:7777", "--metrics-addr", ":9091"}
	if got := append(slices.Clone(cli.Command), cli.Args...); !slices.Equal(got, wantCmd) {
		t.Fatalf("cli command %v, want %v", got, wantCmd)
	}
	if got, _ := envValue(pod.Spec.Containers[0].Env, "TATARA_AGENT_COMMAND"); got != "claude" {
		t.Fatalf("TATARA_AGENT_COMMAND = %q, want claude", got)
	}
	if got, _ := envValue(pod.Spec.Containers[0].Env, "TATARA_DIRECTIVE"); got != task.Spec.Directive {
		t.Fatalf("TATARA_DIRECTIVE = %q, want the Task's directive", got)
	}
	if _, i := envValue(cli.Env, "TATARA_DIRECTIVE"); i >= 0 {
		t.Fatal("the cli sidecar must not get the directive")
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("restartPolicy %q, want Never", pod.Spec.RestartPolicy)
	}
}

// TestBuildPodRestricted checks every field the restricted Pod Security Standard requires.
func TestBuildPodRestricted(t *testing.T) {
	p := workspaceProject()
	pod := BuildPod(testTask(tatarav1.KindImplement), p, testConfig())
	// A Task without a repo has the one init container a Task with one does not: wrapper-install.
	noRepo := testTask(tatarav1.KindImplement)
	noRepo.Spec.Repo = ""
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, BuildPod(noRepo, p, testConfig()).Spec.InitContainers[0])
	if got := containerNames(pod.Spec.InitContainers); !slices.Equal(got, []string{WorkspaceInitContainer, CLIContainer, GitGatewayContainer, WrapperInstallContainer}) {
		t.Fatalf("want every kind of container in the pod under test, got init containers %v", got)
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("pod security context not restricted: %+v", psc)
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil && v.Secret == nil {
			t.Errorf("volume %q is neither an emptyDir nor a Secret (restricted allows no other kinds here)", v.Name)
		}
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no security context", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: allowPrivilegeEscalation must be false", c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: must drop ALL capabilities and add none", c.Name)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0:
			t.Errorf("%s: must run as non-root", c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("%s: privileged", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: root filesystem must be read-only", c.Name)
		}
		if len(c.Ports) > 0 && c.Ports[0].HostPort != 0 {
			t.Errorf("%s: hostPort set", c.Name)
		}
	}
}

func TestBuildPodAgentImage(t *testing.T) {
	tests := []struct {
		name       string
		binaryPath string
		wantCmd    string
	}{
		{"default binary path", "", "/agent"},
		{"nested binary path", "/usr/local/bin/stand-in", "/usr/local/bin/stand-in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testProject()
			p.Spec.Agent.Image = "stand-in-agent:1"
			p.Spec.Agent.BinaryPath = tt.binaryPath
			cfg := testConfig()
			pod := BuildPod(testTask(tatarav1.KindImplement), p, cfg)
			if got := containerNames(pod.Spec.InitContainers); !slices.Equal(got, []string{WrapperInstallContainer, CLIContainer}) {
				t.Fatalf("init containers %v, want [wrapper-install cli]", got)
			}
			inst := container(t, pod, WrapperInstallContainer)
			if want := []string{"/usr/local/bin/wrapper", "install", "/opt/tatara/wrapper"}; inst.Image != cfg.WrapperImage || !slices.Equal(inst.Command, want) {
				t.Fatalf("wrapper-install %s %v, want %s %v", inst.Image, inst.Command, cfg.WrapperImage, want)
			}
			// The agent image hosts the main container; the wrapper copied from the wrapper image runs it.
			w := container(t, pod, WrapperContainer)
			if w.Image != "stand-in-agent:1" || !slices.Equal(w.Command, []string{"/opt/tatara/wrapper"}) {
				t.Fatalf("main container %s %v, want stand-in-agent:1 [/opt/tatara/wrapper]", w.Image, w.Command)
			}
			if got, _ := envValue(w.Env, "TATARA_AGENT_COMMAND"); got != tt.wantCmd {
				t.Fatalf("TATARA_AGENT_COMMAND = %q, want %q", got, tt.wantCmd)
			}
			if !slices.ContainsFunc(w.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.MountPath == WrapperDir && m.Name == "tatara-bin" && m.ReadOnly
			}) {
				t.Fatalf("main container does not mount the wrapper emptyDir read-only at %s", WrapperDir)
			}
		})
	}
}

func TestBuildSecret(t *testing.T) {
	s := BuildSecret(testTask(tatarav1.KindImplement), "tok")
	if s.Name != "tatara-agent-t1-token" || string(s.Data["token"]) != "tok" || s.OwnerReferences[0].Name != "t1" {
		t.Fatalf("unexpected secret %+v", s)
	}
}

// TestBuildPodGolden pins the whole pod; run `make generate` after a deliberate change.
func TestBuildPodGolden(t *testing.T) {
	withAgent := testProject(corev1.EnvVar{Name: "LOG_LEVEL", Value: "debug"})
	withAgent.Spec.Agent.Image = "stand-in-agent:1"
	withAgent.Spec.Agent.BinaryPath = "/agent"
	withAgent.Spec.Agent.ServiceAccountName = "agent"
	withAgent.Spec.Agent.RuntimeClassName = "gvisor"
	withAgent.Spec.Agent.Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	tests := []struct {
		name    string
		task    *tatarav1.Task
		project *tatarav1.Project
	}{
		{"implement-default", testTask(tatarav1.KindImplement), testProject()},
		{"brainstorm-agent-image", testTask(tatarav1.KindBrainstorm), withAgent},
		{"implement-workspace", testTask(tatarav1.KindImplement), workspaceProject()},
		{"implement-model-gateway", retriedTask(tatarav1.KindImplement, 1234), modelProject()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := yaml.Marshal(BuildPod(tt.task, tt.project, testConfig()))
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tt.name+".golden.yaml"), got)
		})
	}
}

// modelProject reaches the model API through the model gateway, with a budget per Task.
func modelProject() *tatarav1.Project {
	p := workspaceProject()
	p.Spec.Agent.Model = &tatarav1.AgentModel{BaseURL: "https://llm.example.test/anthropic", SecretName: "model-key",
		SecretKey: "token", AuthScheme: tatarav1.ModelAuthBearer, TaskTokenBudget: 500000}
	return p
}

// retriedTask is a Task whose earlier attempt used tokens of the model.
func retriedTask(kind tatarav1.TaskKind, tokens int64) *tatarav1.Task {
	t := testTask(kind)
	t.Status.Usage = &tatarav1.ModelUsage{Requests: 3, InputTokens: tokens, Tokens: tokens}
	return t
}

// TestModelGatewayKeepsTheCredentialFromTheAgent: with spec.agent.model, the model credential is
// mounted into the model gateway alone (only its key of the Secret), no other container mounts
// that volume, and the agent's container is pointed at the gateway with a placeholder instead of
// a key; the gateway's budget counts the tokens of earlier attempts.
func TestModelGatewayKeepsTheCredentialFromTheAgent(t *testing.T) {
	for _, pod := range []*corev1.Pod{
		BuildPod(retriedTask(tatarav1.KindImplement, 1234), modelProject(), testConfig()),
		BuildPoolPod(modelProject(), implementPool(), testConfig()),
	} {
		var gateway *corev1.Container
		for i, c := range pod.Spec.InitContainers {
			if c.Name == ModelGatewayContainer {
				gateway = &pod.Spec.InitContainers[i]
			}
		}
		if gateway == nil {
			t.Fatalf("pod %s has no %s container", pod.Name, ModelGatewayContainer)
		}
		var vol *corev1.Volume
		for i, v := range pod.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "model-key" {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil || len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != "token" {
			t.Fatalf("the model Secret's volume = %+v, want only its key %q", vol, "token")
		}
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			mounts := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol.Name })
			if mounts != (c.Name == ModelGatewayContainer) {
				t.Errorf("container %s mounts the model credential: %v", c.Name, mounts)
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "model-key" {
					t.Errorf("container %s has the model credential in its env (%s)", c.Name, e.Name)
				}
			}
		}
		env := map[string]string{}
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env[ModelBaseURLEnv] != "http://"+ModelGatewayListen || env[ModelAPIKeyEnv] != ModelAPIKeyPlaceholder {
			t.Errorf("the agent's %s=%q %s=%q, want the gateway and the placeholder", ModelBaseURLEnv, env[ModelBaseURLEnv], ModelAPIKeyEnv, env[ModelAPIKeyEnv])
		}
		args := strings.Join(gateway.Args, " ")
		for _, want := range []string{"--auth-scheme=bearer", "--token-budget=500000", "--upstream=https://llm.example.test/anthropic"} {
			if !strings.Contains(args, want) {
				t.Errorf("model gateway args %q lack %q", args, want)
			}
		}
		if pool := pod.Labels[LabelPool] != ""; strings.Contains(args, "--tokens-used=1234") == pool || strings.Contains(args, "--claim-file=") != pool {
			t.Errorf("model gateway args %q: a Task's pod carries the earlier attempts' tokens, a pool pod the claim file", args)
		}
	}
}

// TestCRDKindEnum reads the kind enum from the GENERATED CRD and checks it equals
// tatarav1.TaskKinds and that every kind maps to a non-empty profile.
func TestCRDKindEnum(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "tatara.dev_tasks.yaml"))
	if err != nil {
		t.Fatalf("failed to read the generated Task CRD (run make generate): %v", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatalf("failed to parse the Task CRD: %v", err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("want one CRD version, got %d", len(crd.Spec.Versions))
	}
	kindSchema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["kind"]
	var enum []string
	for _, v := range kindSchema.Enum {
		enum = append(enum, strings.Trim(string(v.Raw), `"`))
	}
	var declared []string
	for _, k := range tatarav1.TaskKinds {
		declared = append(declared, string(k))
	}
	if !slices.Equal(enum, declared) {
		t.Fatalf("CRD kind enum %v != tatarav1.TaskKinds %v", enum, declared)
	}
	for _, k := range enum {
		if ToolProfileForKind(tatarav1.TaskKind(k)) == "" {
			t.Errorf("CRD kind %q maps to no profile", k)
		}
	}
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// workspaceProject has an agent image and the Task's repo with clone and push credentials.
func workspaceProject() *tatarav1.Project {
	p := testProject()
	p.Spec.Agent.Image = "stand-in-agent:1"
	p.Spec.Repos = []tatarav1.ProjectRepo{{
		Name: "operator", URL: "https://git.example.com/tatara/operator.git", DefaultBranch: "main",
		Credentials: &tatarav1.RepoCredentials{SecretName: "operator-read"},
		Push:        &tatarav1.RepoPush{SecretName: "operator-push"},
	}}
	return p
}

// secretMounts lists the container's mounts of Secret volumes.
func secretMounts(pod *corev1.Pod, c corev1.Container) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				out = append(out, v.Secret.SecretName)
			}
		}
	}
	return out
}

// TestBuildPodWorkspace: the Task's repo is cloned by workspace-init before the cli starts, the
// clone credential is mounted only there and the push credential only into the git gateway; the
// agent's container mounts no Secret at all.
func TestBuildPodWorkspace(t *testing.T) {
	depth := int32(0)
	tests := []struct {
		name       string
		project    func() *tatarav1.Project
		ref        string
		wantInit   []string
		wantArgs   []string
		wantSecret map[string][]string // container -> Secret names it mounts
		wantBranch string
	}{
		{
			name:     "no repo in the Project: no clone",
			project:  func() *tatarav1.Project { p := testProject(); p.Spec.Agent.Image = "stand-in-agent:1"; return p },
			wantInit: []string{WrapperInstallContainer, CLIContainer},
		},
		{
			name:     "credentials and push, defaults",
			project:  workspaceProject,
			wantInit: []string{WorkspaceInitContainer, CLIContainer, GitGatewayContainer},
			wantArgs: []string{"--url=https://git.example.com/tatara/operator.git", "--ref=main", "--depth=1", "--timeout=300s",
				"--credentials-dir=" + CredentialsDir, "--credentials-secret=operator-read", "--push-url=" + GitGatewayURL, "--branch=tatara/t1-uidt1"},
			wantSecret: map[string][]string{WorkspaceInitContainer: {"operator-read"}, GitGatewayContainer: {"operator-push"}},
			wantBranch: "tatara/t1-uidt1",
		},
		{
			name: "Task ref, full history, anonymous, no push",
			project: func() *tatarav1.Project {
				p := workspaceProject()
				p.Spec.Repos[0].Credentials, p.Spec.Repos[0].Push = nil, nil
				p.Spec.Workspace = tatarav1.ProjectWorkspace{CloneDepth: &depth, TimeoutSeconds: 30}
				return p
			},
			ref:      "v1.2.3",
			wantInit: []string{WorkspaceInitContainer, CLIContainer},
			wantArgs: []string{"--ref=v1.2.3", "--depth=0", "--timeout=30s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := testTask(tatarav1.KindImplement)
			task.Spec.Ref = tt.ref
			pod := BuildPod(task, tt.project(), testConfig())
			if got := containerNames(pod.Spec.InitContainers); !slices.Equal(got, tt.wantInit) {
				t.Fatalf("init containers %v, want %v", got, tt.wantInit)
			}
			for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
				if got := secretMounts(pod, c); !slices.Equal(got, tt.wantSecret[c.Name]) {
					t.Errorf("container %s mounts Secrets %v, want %v", c.Name, got, tt.wantSecret[c.Name])
				}
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != SecretName(task.Name) {
						t.Errorf("container %s reads Secret %s into env %s", c.Name, e.ValueFrom.SecretKeyRef.Name, e.Name)
					}
				}
			}
			if !slices.Contains(tt.wantInit, WorkspaceInitContainer) {
				return
			}
			// One init container clones, in the wrapper image (our git handles the read
			// credential, not the agent image's), and installs the wrapper for the agent image.
			ws := container(t, pod, WorkspaceInitContainer)
			if ws.Image != testConfig().WrapperImage || !slices.Equal(ws.Command, []string{WrapperImageBinary}) || ws.Args[0] != "workspace-init" ||
				!slices.Contains(ws.Args, "--install-to="+InstalledWrapper) {
				t.Errorf("workspace-init runs %s %v %v, want the wrapper image's workspace-init installing %s", ws.Image, ws.Command, ws.Args, InstalledWrapper)
			}
			if !slices.ContainsFunc(ws.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == "tatara-bin" && m.MountPath == WrapperDir && !m.ReadOnly
			}) {
				t.Errorf("workspace-init mounts %v, want the wrapper's emptyDir writable at %s", ws.VolumeMounts, WrapperDir)
			}
			for _, a := range tt.wantArgs {
				if !slices.Contains(ws.Args, a) {
					t.Errorf("workspace-init args %v lack %q", ws.Args, a)
				}
			}
			if !slices.Contains(ws.Args, "--dir=/workspace/operator") || container(t, pod, WrapperContainer).WorkingDir != "/workspace/operator" {
				t.Errorf("the clone (%v) and the agent's working directory (%s) must be /workspace/operator", ws.Args, container(t, pod, WrapperContainer).WorkingDir)
			}
			if ws.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
				t.Errorf("workspace-init must report through its termination message file")
			}
			w := container(t, pod, WrapperContainer)
			if got, _ := envValue(w.Env, PushBranchEnv); got != tt.wantBranch {
				t.Errorf("%s = %q, want %q", PushBranchEnv, got, tt.wantBranch)
			}
			// The scratch dir (git's HOME, the ssh key's copy) is workspace-init's alone.
			for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
				for _, m := range c.VolumeMounts {
					if m.Name == "workspace-scratch" && c.Name != WorkspaceInitContainer {
						t.Errorf("container %s mounts workspace-init's scratch dir", c.Name)
					}
				}
			}
		})
	}
}

// With monitoring on, each container waits for a final scrape of at most two of its scrape
// intervals, and the pod's grace period covers the cli's stop after the wrapper has gone.
func TestBuildPodScrapeWait(t *testing.T) {
	for _, tc := range []struct {
		name                string
		cli, wrapper        time.Duration
		wantCLIArg, wantEnv string
		wantGrace           int64
	}{
		{"monitoring off", 0, 0, "", "", 30},
		{"the charts' 30s", 30 * time.Second, 30 * time.Second, "1m0s", "1m0s", 80},
		{"a slow wrapper scrape", 5 * time.Second, 2 * time.Minute, "10s", "4m0s", 250},
		{"fast scrapes keep the default grace", 5 * time.Second, 5 * time.Second, "10s", "10s", 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CLIScrapeInterval, cfg.WrapperScrapeInterval = tc.cli, tc.wrapper
			pod := BuildPod(testTask(tatarav1.KindImplement), testProject(), cfg)

			args := container(t, pod, CLIContainer).Args
			gotArg := ""
			if i := slices.Index(args, "--scrape-wait"); i >= 0 && i+1 < len(args) {
				gotArg = args[i+1]
			}
			if gotArg != tc.wantCLIArg {
				t.Errorf("cli --scrape-wait = %q, want %q (args %q)", gotArg, tc.wantCLIArg, args)
			}
			gotEnv, at := envValue(container(t, pod, WrapperContainer).Env, WrapperScrapeWaitEnv)
			if gotEnv != tc.wantEnv || (tc.wantEnv == "" && at >= 0) {
				t.Errorf("wrapper %s = %q (at %d), want %q", WrapperScrapeWaitEnv, gotEnv, at, tc.wantEnv)
			}
			if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != tc.wantGrace {
				t.Errorf("terminationGracePeriodSeconds = %v, want %d", g, tc.wantGrace)
			}
		})
	}
}

// A Task deleted and created again under its name is another object, with another branch: it can
// never push over the earlier Task's work.
func TestPushBranchIsPerTaskObject(t *testing.T) {
	first := testTask(tatarav1.KindImplement)
	first.UID = "3f2a9c1e-9a57-4c1e-8d2a-6f1b2c3d4e5f"
	again := first.DeepCopy()
	again.UID = "b71c04d2-1e3a-4f6b-9c8d-0a1b2c3d4e5f"
	if got := PushBranch(first); got != "tatara/t1-3f2a9c1e" {
		t.Errorf("PushBranch = %q, want tatara/t1-3f2a9c1e", got)
	}
	if PushBranch(first) == PushBranch(again) {
		t.Errorf("two Task objects named %s share the branch %s", first.Name, PushBranch(first))
	}
}

// A retry after a lost pod pushes to a branch of its own, which the lost pod's gateway (allowed
// its branch and branches under it) cannot write: the lost pod, which may still run, cannot push
// over the retry's work.
func TestPushBranchIsPerAttempt(t *testing.T) {
	task := testTask(tatarav1.KindImplement)
	task.UID = "3f2a9c1e-9a57-4c1e-8d2a-6f1b2c3d4e5f"
	task.Status.Attempts = []tatarav1.TaskAttempt{{Number: 1, PodName: "tatara-agent-t1"}}
	first := PushBranch(task)
	task.Status.Attempts = append(task.Status.Attempts, tatarav1.TaskAttempt{Number: 2, PodName: "tatara-agent-t1"})
	retry := PushBranch(task)
	if first != "tatara/t1-3f2a9c1e" || retry != "tatara/t1-3f2a9c1e-attempt2" {
		t.Fatalf("branches %q and %q, want tatara/t1-3f2a9c1e and tatara/t1-3f2a9c1e-attempt2", first, retry)
	}
	if retry == first || strings.HasPrefix(retry, first+"/") {
		t.Fatalf("the retry's branch %q is one the first attempt's gateway (prefix %q) may push to", retry, first)
	}
	pod := BuildPod(task, workspaceProject(), testConfig())
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == GitGatewayContainer })
	if i < 0 || !slices.Contains(pod.Spec.InitContainers[i].Args, "--branch-prefix="+retry) {
		t.Errorf("the retry's pod has no gateway that pushes to %s: %+v", retry, pod.Spec.InitContainers)
	}
}
