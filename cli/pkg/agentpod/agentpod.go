// Package agentpod is the agent pod's contract: its containers' names and where each listens
// inside the pod. The operator's pod builder passes these addresses and probes these ports, the cli and the
// wrapper default to them, and the wrapper points the agent's MCP config at MCPURL; one
// definition, so the three cannot drift apart.
package agentpod

const (
	// MCPListen is the cli sidecar's streamable HTTP MCP endpoint: loopback, the pod's only.
	MCPListen = "127.0.0.1:7777"
	// MCPPath is the endpoint's path.
	MCPPath = "/mcp"
	// MCPURL is what the agent CLI connects to.
	MCPURL = "http://" + MCPListen + MCPPath

	// GitGatewayListen is the git gateway sidecar's address; the agent's origin remote is
	// GitGatewayURL.
	GitGatewayListen = "127.0.0.1:7778"
	GitGatewayURL    = "http://" + GitGatewayListen + "/"

	// ModelGatewayListen is the model gateway sidecar's address; the agent CLI's
	// ANTHROPIC_BASE_URL is ModelGatewayURL.
	ModelGatewayListen = "127.0.0.1:7779"
	ModelGatewayURL    = "http://" + ModelGatewayListen

	// The ports Prometheus scrapes and the kubelet probes, on every interface of the pod.
	WrapperMetricsPort   = 9090
	CLIMetricsPort       = 9091
	GitGatewayHealthPort = 9092
	// ModelGatewayMetricsPort serves the model gateway's /metrics and /healthz.
	ModelGatewayMetricsPort = 9093
)

// ProxyEnv are the variables through which an agent pod's programs find its Project's egress
// proxy, in both cases (curl reads only the lowercase http_proxy): the operator sets them in every
// container of a proxied Project's pods, and the wrapper passes them on to git, whose environment
// it builds.
var ProxyEnv = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"}

// The agent pod's container names: the operator builds them, and what reads a pod's logs or
// status (the operator's status mapping, the e2e suite) names them.
const (
	WrapperContainer        = "wrapper"
	CLIContainer            = "cli"
	WrapperInstallContainer = "wrapper-install"
	WorkspaceInitContainer  = "workspace-init"
	GitGatewayContainer     = "git-gateway"
	ModelGatewayContainer   = "model-gateway"
)

// What the images of the cli and wrapper charts can do for the operator's pods: each chart lists
// its image's features, comma-separated, under FeaturesKey of its runtime ConfigMap, so an operator
// can tell an image that predates a feature from one that has it, instead of building pods the
// image cannot run or dropping what it does not know.
const (
	FeaturesKey = "features"
	// FeatureWorkspaceInit is a wrapper image with git whose `workspace-init` also installs the
	// wrapper (--install-to) and that has `wrapper install`: the pod layout from operator 0.8.0,
	// which needs it of the wrapper.
	FeatureWorkspaceInit = "workspace-init"
	// FeatureClaimRef is a cli that passes a warm-pool claim's ref on to the wrapper, and a wrapper
	// that fetches it: a Task on another ref than a pool's checkout claims a pool pod only when
	// both list it, since an older image would drop the ref and the agent would work on the pool's
	// branch.
	FeatureClaimRef = "claim-ref"
	// FeatureModelGateway is a cli image with `tatara model-gateway`: the operator gives a pod
	// the model gateway sidecar (and the agent no model credential) only when the cli lists it.
	FeatureModelGateway = "model-gateway"
)
