package egress

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// Identity is who opened a connection: the agent pod at its source address, and the Task that
// owns the pod (none for a warm-pool pod not yet claimed). The zero Identity is an unknown source,
// which the proxy treats like any other.
type Identity struct {
	Pod, Task       string
	PodUID, TaskUID types.UID
}

// unknown is how an empty name is logged.
const unknown = "unknown"

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// Identifier maps a connection's source address to an Identity.
type Identifier interface {
	Identify(ctx context.Context, src netip.Addr) Identity
}

// PodIPIndex is the field index of agent pods by each of their addresses (IndexPodIPs).
const PodIPIndex = "egress.tatara.dev/podIP"

// IndexPodIPs is the PodIPIndex of a pod: its status.podIPs, except for a pod that has ended,
// whose address the cluster may already have given to another pod.
func IndexPodIPs(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	var ips []string
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(ips, a.Unmap().String()) {
			ips = append(ips, a.Unmap().String())
		}
	}
	add(pod.Status.PodIP)
	for _, ip := range pod.Status.PodIPs {
		add(ip.IP)
	}
	return ips
}

// PodIdentities identifies sources among the Project's agent pods in Reader, a cache that
// indexes them by PodIPIndex: a lookup reads the index, never the API server.
type PodIdentities struct {
	Reader             client.Reader
	Namespace, Project string
}

// Identify returns the agent pod whose address src is, and its Task; the newest pod if the index
// holds two (one ending while the other starts).
func (p *PodIdentities) Identify(ctx context.Context, src netip.Addr) Identity {
	var pods corev1.PodList
	err := p.Reader.List(ctx, &pods, client.InNamespace(p.Namespace),
		client.MatchingLabels(AgentPodLabels(p.Project)), client.MatchingFields{PodIPIndex: src.Unmap().String()})
	if err != nil || len(pods.Items) == 0 {
		return Identity{}
	}
	pod := slices.MaxFunc(pods.Items, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	id := Identity{Pod: pod.Name, PodUID: pod.UID, Task: pod.Labels[agent.LabelTask]}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "Task" &&
			ref.APIVersion == tatarav1.GroupVersion.String() && ref.Name == id.Task {
			id.TaskUID = ref.UID
		}
	}
	return id
}

// AgentPodLabels select the Project's agent pods, pool pods included.
func AgentPodLabels(project string) map[string]string {
	return map[string]string{
		agent.LabelName:      agent.AgentNameValue,
		agent.LabelManagedBy: agent.ManagedByValue,
		agent.LabelProject:   project,
	}
}
