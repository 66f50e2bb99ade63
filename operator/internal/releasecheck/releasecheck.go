// Package releasecheck is `operator release-check`, the post-deploy check (`helm test`) of the
// tatara-operator and tatara-project charts; their test pods run it in the operator image of the
// release. It prints one line per check and a summary (tatara.dev/cli/pkg/releasecheck).
//
//	operator release-check [operator] --namespace ... --deployment ... --service ...
//	operator release-check project --namespace ... --project ... [--limit-range ...] ...
//
// It reads the cluster with the test pod's own ServiceAccount, which the charts grant `get` on
// exactly the checked objects; the CRDs are checked through discovery, which every authenticated
// client may read, so no ClusterRole is needed.
package releasecheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/releasecheck"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Main runs the check with args (after "release-check") and returns the exit code: 0 when every
// check passed, 1 when one failed, 2 for bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	mode := "operator"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	switch mode {
	case "operator":
		return operatorMain(ctx, args, stdout, stderr)
	case "project":
		return projectMain(ctx, args, stdout, stderr)
	default:
		_, _ = fmt.Fprintf(stderr, "operator release-check: unknown mode %q (operator or project)\n", mode)
		return 2
	}
}

// commonFlags are the flags of both modes.
type commonFlags struct {
	chart, namespace, appVersion string
	timeout                      time.Duration
}

func (c *commonFlags) register(fs *flag.FlagSet, chart string) {
	fs.StringVar(&c.chart, "chart", chart, "chart name, for the summary line")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the release")
	fs.StringVar(&c.appVersion, "app-version", "", "the chart's appVersion, which this image's version must be")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "how long checks of state that converges (rollout, readiness) wait")
}

// parse parses args into fs, then checks that each of required (flag name to a pointer to its
// value) is set.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, required map[string]*string) bool {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "%s takes no arguments, got %q\n", fs.Name(), fs.Args())
		return false
	}
	ok := true
	for _, name := range slices.Sorted(maps.Keys(required)) {
		if *required[name] == "" {
			_, _ = fmt.Fprintf(stderr, "%s: --%s is required\n", fs.Name(), name)
			ok = false
		}
	}
	return ok
}

func operatorMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("operator release-check operator", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "tatara-operator")
	deployment := fs.String("deployment", "", "the operator Deployment")
	service := fs.String("service", "", "the operator Service")
	apiPort := fs.Int("api-port", 8082, "the Service's api port")
	metricsPort := fs.Int("metrics-port", 8080, "the Service's metrics port")
	caFile := fs.String("api-ca-file", "", "CA bundle (PEM) the REST API's certificate is verified against; empty means the API is plain HTTP")
	if !parse(fs, args, stderr, map[string]*string{"namespace": &c.namespace, "deployment": deployment, "service": service}) {
		return 2
	}
	check := OperatorCheck{
		Namespace: c.namespace, Deployment: *deployment, AppVersion: c.appVersion, Version: buildinfo.Version,
		Timeout: c.timeout, Interval: 2 * time.Second,
		APIURL:     fmt.Sprintf("http://%s.%s.svc:%d", *service, c.namespace, *apiPort),
		MetricsURL: fmt.Sprintf("http://%s.%s.svc:%d", *service, c.namespace, *metricsPort),
		HTTP:       &http.Client{Timeout: 10 * time.Second},
	}
	r := releasecheck.New(stdout, c.chart)
	if *caFile != "" {
		check.APIURL = fmt.Sprintf("https://%s.%s.svc:%d", *service, c.namespace, *apiPort)
		pool, err := loadCA(*caFile)
		if err != nil {
			r.Check("the REST API's CA bundle is readable", err)
			return r.Done()
		}
		check.APIHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}}
	}
	kube, _, err := inCluster()
	if err == nil {
		check.CRDs, err = inClusterCRDs()
	}
	if err == nil {
		check.WantCRDs, err = BuiltCRDs()
	}
	if err != nil {
		r.Check("the test pod reaches the Kubernetes API", err)
		return r.Done()
	}
	check.Kube = kube
	check.Run(ctx, r)
	return r.Done()
}

func projectMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("operator release-check project", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "tatara-project")
	project := fs.String("project", "", "the Project")
	limitRange := fs.String("limit-range", "", "the chart's LimitRange (empty: not rendered, not checked)")
	quota := fs.String("resource-quota", "", "the chart's ResourceQuota (empty: not rendered, not checked)")
	netpol := fs.String("network-policy", "", "the chart's NetworkPolicy (empty: not rendered, not checked)")
	if !parse(fs, args, stderr, map[string]*string{"namespace": &c.namespace, "project": project}) {
		return 2
	}
	r := releasecheck.New(stdout, c.chart)
	kube, dyn, err := inCluster()
	if err != nil {
		r.Check("the test pod reaches the Kubernetes API", err)
		return r.Done()
	}
	ProjectCheck{
		Kube: kube, Dynamic: dyn, Namespace: c.namespace, Project: *project,
		LimitRange: *limitRange, ResourceQuota: *quota, NetworkPolicy: *netpol,
		AppVersion: c.appVersion, Version: buildinfo.Version, Timeout: c.timeout, Interval: 2 * time.Second,
	}.Run(ctx, r)
	return r.Done()
}

func inCluster() (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("no in-cluster config (is the ServiceAccount token mounted?): %w", err)
	}
	cfg.UserAgent = "tatara-release-check/" + buildinfo.Version
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create a Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create a dynamic client: %w", err)
	}
	return kube, dyn, nil
}

func inClusterCRDs() (apiextensions.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster config (is the ServiceAccount token mounted?): %w", err)
	}
	cfg.UserAgent = "tatara-release-check/" + buildinfo.Version
	return apiextensions.NewForConfig(cfg)
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s (the apiTLS Secret's ca.crt): %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s (the apiTLS Secret's ca.crt) holds no PEM certificate", path)
	}
	return pool, nil
}

// eventually calls f until it returns nil or timeout passes, and returns its last error. The
// timeout bounds the retries, not an attempt (each has its client's own timeout): an attempt that
// outlasts it still ends with its real cause instead of "context deadline exceeded".
func eventually(ctx context.Context, timeout, interval time.Duration, f func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w (still so after %s)", err, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		case <-time.After(interval):
		}
	}
}

// explain names what a failed GET means: a 403 is the release check's own Role (it grants get
// on exactly the checked objects), a 404 a missing object.
func explain(err error, what string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("the release-check ServiceAccount may not get %s (its Role names exactly the checked objects): %w", what, err)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s does not exist", what)
	}
	return fmt.Errorf("failed to get %s: %w", what, err)
}

// ---- operator ----

// OperatorCheck checks a tatara-operator release.
type OperatorCheck struct {
	Kube kubernetes.Interface
	// CRDs reads the cluster's CRDs; WantCRDs are this build's (BuiltCRDs).
	CRDs                  apiextensions.Interface
	WantCRDs              []apiextensionsv1.CustomResourceDefinition
	Namespace, Deployment string
	// APIURL and MetricsURL are the Service's api and metrics ports (scheme://host:port).
	APIURL, MetricsURL string
	// HTTP reaches /metrics; APIHTTP the REST API (nil: HTTP).
	HTTP, APIHTTP       *http.Client
	AppVersion, Version string
	Timeout, Interval   time.Duration
}

// Run records every check in r.
func (c OperatorCheck) Run(ctx context.Context, r *releasecheck.Report) {
	r.Check(fmt.Sprintf("the image is the chart's build (appVersion %s)", c.AppVersion),
		releasecheck.Version("operator", c.Version, c.AppVersion))
	r.Check(fmt.Sprintf("deployment %s/%s is rolled out and Available", c.Namespace, c.Deployment),
		eventually(ctx, c.Timeout, c.Interval, c.deploymentAvailable))
	r.Check("the CRDs projects.tatara.dev, tasks.tatara.dev and internalissues.tatara.dev are established and served (tatara.dev/v1alpha1)",
		eventually(ctx, c.Timeout, c.Interval, c.crdsServed))
	r.Check("the cluster's CRDs are this operator's: the same versions, every field of every schema",
		crdsMatch(ctx, c.CRDs, c.WantCRDs))
	r.Check(fmt.Sprintf("the REST API answers GET %s/healthz with 200 ok", c.APIURL),
		eventually(ctx, c.Timeout, c.Interval, c.healthz))
	r.Check(fmt.Sprintf("%s/metrics serves tatara_operator_build_info of the chart's build (version %s)", c.MetricsURL, c.AppVersion),
		eventually(ctx, c.Timeout, c.Interval, c.metrics))
}

func (c OperatorCheck) deploymentAvailable(ctx context.Context) error {
	what := fmt.Sprintf("deployment %s/%s", c.Namespace, c.Deployment)
	d, err := c.Kube.AppsV1().Deployments(c.Namespace).Get(ctx, c.Deployment, metav1.GetOptions{})
	if err != nil {
		return explain(err, what)
	}
	return rolledOut(d)
}

// rolledOut is `kubectl rollout status` plus Available=True; its error names the False
// conditions.
func rolledOut(d *appsv1.Deployment) error {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	var problems []string
	for _, cond := range d.Status.Conditions {
		if cond.Status == corev1.ConditionFalse {
			problems = append(problems, fmt.Sprintf("condition %s=False (%s: %s)", cond.Type, cond.Reason, cond.Message))
		}
	}
	available := false
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			available = true
		}
	}
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		problems = append(problems, fmt.Sprintf("the controller has not observed generation %d yet", d.Generation))
	case d.Status.UpdatedReplicas < want || d.Status.Replicas > d.Status.UpdatedReplicas || d.Status.AvailableReplicas < want:
		problems = append(problems, fmt.Sprintf("%d of %d replicas updated, %d available, %d total", d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas, d.Status.Replicas))
	case !available && len(problems) == 0:
		problems = append(problems, "it has no condition Available=True")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func (c OperatorCheck) crdsServed(_ context.Context) error {
	gv := tatarav1.GroupVersion.String()
	list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the API server serves no %s: the CRDs are missing or not established (kubectl get crd projects.tatara.dev tasks.tatara.dev internalissues.tatara.dev)", gv)
		}
		return fmt.Errorf("discovery of %s failed: %w", gv, err)
	}
	served := map[string]bool{}
	for _, res := range list.APIResources {
		served[res.Name] = true
	}
	var missing []string
	for _, name := range []string{"projects", "tasks", "internalissues"} {
		if !served[name] {
			missing = append(missing, name+".tatara.dev")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not served under %s: the CRD is missing or not established", strings.Join(missing, ", "), gv)
	}
	return nil
}

func (c OperatorCheck) healthz(ctx context.Context) error {
	hc := c.APIHTTP
	if hc == nil {
		hc = c.HTTP
	}
	code, body, err := get(ctx, hc, c.APIURL+"/healthz", "")
	if err != nil {
		return err
	}
	if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		return fmt.Errorf("status %d, body %q", code, truncate(body))
	}
	return nil
}

func (c OperatorCheck) metrics(ctx context.Context) error {
	code, body, err := get(ctx, c.HTTP, c.MetricsURL+"/metrics", "text/plain;version=0.0.4")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("status %d, body %q", code, truncate(body))
	}
	return BuildInfo(body, "tatara_operator_build_info", c.AppVersion)
}

// BuildInfo checks that the Prometheus text exposition body holds gauge name = 1 with label
// version = want (the *_build_info contract: docs/architecture.md, "Observability contract").
func BuildInfo(body, name, want string) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not Prometheus text: %w", err)
	}
	mf, ok := families[name]
	if !ok || len(mf.GetMetric()) == 0 {
		return fmt.Errorf("it has no %s (%d metric families): is this the operator's metrics port?", name, len(families))
	}
	var versions []string
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "version" {
				versions = append(versions, l.GetValue())
				if l.GetValue() == want && m.GetGauge().GetValue() == 1 {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%s has version %s, want %s: the running operator is not this chart's build", name, strings.Join(versions, ", "), want)
}

func get(ctx context.Context, hc *http.Client, url, accept string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("bad URL %q: %w", url, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w (the Service, its endpoints or a NetworkPolicy)", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	return resp.StatusCode, string(b), nil
}

func truncate(s string) string {
	const n = 200
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ---- project ----

// ProjectCheck checks a tatara-project release.
type ProjectCheck struct {
	Kube               kubernetes.Interface
	Dynamic            dynamic.Interface
	Namespace, Project string
	// LimitRange, ResourceQuota and NetworkPolicy are the chart's objects; "" when not rendered.
	LimitRange, ResourceQuota, NetworkPolicy string
	AppVersion, Version                      string
	Timeout, Interval                        time.Duration
}

// Run records every check in r.
func (c ProjectCheck) Run(ctx context.Context, r *releasecheck.Report) {
	r.Check(fmt.Sprintf("the image is the chart's build (appVersion %s)", c.AppVersion),
		releasecheck.Version("operator", c.Version, c.AppVersion))
	r.Check(fmt.Sprintf("project %s/%s is Ready", c.Namespace, c.Project),
		eventually(ctx, c.Timeout, c.Interval, c.projectReady))
	if c.LimitRange != "" {
		r.Check(fmt.Sprintf("the agent namespace %s has the chart's LimitRange %s", c.Namespace, c.LimitRange),
			exists(func() error {
				_, err := c.Kube.CoreV1().LimitRanges(c.Namespace).Get(ctx, c.LimitRange, metav1.GetOptions{})
				return err
			}, "limitrange "+c.Namespace+"/"+c.LimitRange))
	}
	if c.ResourceQuota != "" {
		r.Check(fmt.Sprintf("the agent namespace %s has the chart's ResourceQuota %s", c.Namespace, c.ResourceQuota),
			exists(func() error {
				_, err := c.Kube.CoreV1().ResourceQuotas(c.Namespace).Get(ctx, c.ResourceQuota, metav1.GetOptions{})
				return err
			}, "resourcequota "+c.Namespace+"/"+c.ResourceQuota))
	}
	if c.NetworkPolicy != "" {
		r.Check(fmt.Sprintf("the agent namespace %s has the chart's NetworkPolicy %s", c.Namespace, c.NetworkPolicy),
			exists(func() error {
				_, err := c.Kube.NetworkingV1().NetworkPolicies(c.Namespace).Get(ctx, c.NetworkPolicy, metav1.GetOptions{})
				return err
			}, "networkpolicy "+c.Namespace+"/"+c.NetworkPolicy))
	}
}

func exists(get func() error, what string) error {
	if err := get(); err != nil {
		return explain(err, what)
	}
	return nil
}

func (c ProjectCheck) projectReady(ctx context.Context) error {
	what := fmt.Sprintf("project %s/%s", c.Namespace, c.Project)
	u, err := c.Dynamic.Resource(tatarav1.GroupVersion.WithResource("projects")).Namespace(c.Namespace).Get(ctx, c.Project, metav1.GetOptions{})
	if err != nil {
		return explain(err, what)
	}
	return ProjectReady(u)
}

// ProjectReady checks a Project's Ready condition; its error carries the reason and message.
func ProjectReady(u *unstructured.Unstructured) error {
	var p tatarav1.Project
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return fmt.Errorf("project %s/%s is not a tatara.dev Project: %w", u.GetNamespace(), u.GetName(), err)
	}
	cond := meta.FindStatusCondition(p.Status.Conditions, tatarav1.ProjectConditionReady)
	switch {
	case cond == nil:
		return errors.New("it has no Ready condition yet: is the operator of this version running and serving the Project's namespace (agentNamespaces)?")
	case cond.Status != metav1.ConditionTrue:
		return fmt.Errorf("its Ready condition is %s, reason %s: %s", cond.Status, cond.Reason, cond.Message)
	case cond.ObservedGeneration != 0 && cond.ObservedGeneration < p.Generation:
		return fmt.Errorf("its Ready condition (True) is for generation %d, the Project is at %d: the operator has not reconciled the change yet", cond.ObservedGeneration, p.Generation)
	}
	return nil
}
