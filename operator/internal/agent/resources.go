package agent

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Resources are the requests and limits of the agent pod's containers. Every container gets
// both: memory is charged to the container that allocates it, so a sidecar without a limit (the
// cli taking a huge request body, say) would escape the agent container's limit. No CPU limits:
// throttling only slows a container down, and the requests already order scheduling.
type Resources struct {
	// CLI is the tatara mcp sidecar.
	CLI corev1.ResourceRequirements `json:"cli"`
	// GitGateway is the push sidecar (the cli image).
	GitGateway corev1.ResourceRequirements `json:"gitGateway"`
	// ModelGateway is the model API sidecar (the cli image).
	ModelGateway corev1.ResourceRequirements `json:"modelGateway"`
	// WrapperInstall copies the wrapper binary into the pod.
	WrapperInstall corev1.ResourceRequirements `json:"wrapperInstall"`
	// WorkspaceInit clones the repository (git's memory grows with the repository).
	WorkspaceInit corev1.ResourceRequirements `json:"workspaceInit"`
	// Agent is the wrapper container, where the agent runs, when the Project sets no
	// spec.agent.resources.
	Agent corev1.ResourceRequirements `json:"agent"`
}

func requirements(cpu, memory, memoryLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryLimit)},
	}
}

// DefaultResources apply to every container whose runtime ConfigMap names none. The sidecars
// idle at a few MB (the cli bounds its request bodies), git needs room for a large pack, and the
// agent CLI (a Node.js program) and the commands it runs need the most.
func DefaultResources() Resources {
	return Resources{
		CLI:            requirements("10m", "32Mi", "256Mi"),
		GitGateway:     requirements("10m", "32Mi", "512Mi"),
		ModelGateway:   requirements("10m", "32Mi", "256Mi"),
		WrapperInstall: requirements("10m", "16Mi", "64Mi"),
		WorkspaceInit:  requirements("50m", "64Mi", "1Gi"),
		Agent:          requirements("100m", "512Mi", "4Gi"),
	}
}

// isEmpty is true for requirements that set nothing.
func isEmpty(r corev1.ResourceRequirements) bool {
	return len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0
}

// completed fills what r leaves out from def, so that every container has CPU and memory requests
// and a memory limit whatever a ConfigMap or a Project sets: a request left out where its limit is
// set stays out (the API server copies the limit into it), and a memory limit left out becomes the
// default's, raised to the memory request if that is larger (a limit below the request is invalid).
func completed(r, def corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		_, hasRequest := out.Requests[name]
		_, hasLimit := out.Limits[name]
		if q, ok := def.Requests[name]; ok && !hasRequest && !hasLimit {
			out.Requests[name] = q.DeepCopy()
		}
	}
	if _, ok := out.Limits[corev1.ResourceMemory]; !ok {
		limit := def.Limits[corev1.ResourceMemory]
		if req, ok := out.Requests[corev1.ResourceMemory]; ok && req.Cmp(limit) > 0 {
			limit = req
		}
		out.Limits[corev1.ResourceMemory] = limit.DeepCopy()
	}
	return out
}

// withDefaults completes every container's requirements from DefaultResources.
func (r Resources) withDefaults() Resources {
	def := DefaultResources()
	for _, f := range []struct{ dst, def *corev1.ResourceRequirements }{
		{&r.CLI, &def.CLI}, {&r.GitGateway, &def.GitGateway}, {&r.ModelGateway, &def.ModelGateway}, {&r.WrapperInstall, &def.WrapperInstall},
		{&r.WorkspaceInit, &def.WorkspaceInit}, {&r.Agent, &def.Agent},
	} {
		*f.dst = completed(*f.dst, *f.def)
	}
	return r
}

// Bounds of the agent pod that apply when the Project leaves them unset (a Project stored before
// the fields had CRD defaults): they equal those defaults.
const (
	DefaultActiveDeadlineSeconds int64 = 14400 // 4 h
	DefaultWorkspaceSizeLimit          = "10Gi"
	DefaultHomeSizeLimit               = "2Gi"
	DefaultTmpSizeLimit                = "1Gi"
	// WrapperBinSizeLimit bounds the emptyDir wrapper-install copies the wrapper binary into.
	WrapperBinSizeLimit = "256Mi"
)

// ActiveDeadlineSeconds is the agent pod's activeDeadlineSeconds.
func ActiveDeadlineSeconds(project *tatarav1.Project) int64 {
	if d := project.Spec.Agent.ActiveDeadlineSeconds; d > 0 {
		return d
	}
	return DefaultActiveDeadlineSeconds
}

// Storage is the size limit of each of the agent pod's scratch emptyDirs.
type Storage struct{ Workspace, Home, Tmp resource.Quantity }

// StorageLimits are the Project's emptyDir size limits, defaults filled in.
func StorageLimits(project *tatarav1.Project) Storage {
	pick := func(q *resource.Quantity, def string) resource.Quantity {
		if q != nil && !q.IsZero() {
			return q.DeepCopy()
		}
		return resource.MustParse(def)
	}
	s := project.Spec.Agent.Storage
	return Storage{Workspace: pick(s.Workspace, DefaultWorkspaceSizeLimit), Home: pick(s.Home, DefaultHomeSizeLimit), Tmp: pick(s.Tmp, DefaultTmpSizeLimit)}
}
