package egress

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

// EventReason is the reason of the Warning Event the proxy records on a Task whose agent it
// refused; its note is `blocked: <host>:<port> (<reason>)`.
const EventReason = "EgressBlocked"

// eventAction is the Event's action (events.k8s.io requires one): "Connect <host>:<port>", at
// most 128 bytes. The target is in it because the events.k8s.io recorder folds Events of one
// regarding, related, reason and action into a series that keeps the first note: with a fixed
// action, a Task's second blocked host would only raise the first one's count.
func eventAction(ref *Refusal) string {
	a := "Connect " + ref.Target()
	return a[:min(len(a), 128)]
}

// reporter makes every decision visible: a log line, a count, and for a refusal from a Task's
// pod an Event on the Task (within the Event budget).
type reporter struct {
	project, namespace string
	log                *slog.Logger
	metrics            *Metrics
	identify           Identifier
	events             events.EventRecorder
	budget             *eventBudget
}

func (r *reporter) who(ctx context.Context, src netip.Addr) Identity {
	if r.identify == nil || !src.IsValid() {
		return Identity{}
	}
	return r.identify.Identify(ctx, src)
}

func (r *reporter) attrs(id Identity, src netip.Addr, host string, port int) []any {
	source := unknown
	if src.IsValid() {
		source = src.String()
	}
	return []any{"project", r.project, "task", orUnknown(id.Task), "pod", orUnknown(id.Pod), "source", source,
		"host", displayHost(host), "port", port}
}

func (r *reporter) allowed(ctx context.Context, src netip.Addr, host string, port int) {
	r.metrics.Requests.WithLabelValues(DecisionAllowed, string(allowlist.ReasonAllowed)).Inc()
	r.log.InfoContext(ctx, "egress allowed", r.attrs(r.who(ctx, src), src, host, port)...)
}

func (r *reporter) upstreamFailed(ctx context.Context, src netip.Addr, host string, port int, err error) {
	r.metrics.UpstreamErrors.Inc()
	r.log.WarnContext(ctx, "egress upstream unreachable", append(r.attrs(r.who(ctx, src), src, host, port), "error", err)...)
}

func (r *reporter) denied(ctx context.Context, src netip.Addr, ref *Refusal) {
	r.metrics.Requests.WithLabelValues(DecisionDenied, string(ref.Reason)).Inc()
	id := r.who(ctx, src)
	attrs := append(r.attrs(id, src, ref.Host, ref.Port), "reason", string(ref.Reason))
	if ref.Reason == allowlist.ReasonNoProject {
		attrs = append(attrs, "detail", "the proxy has not seen Project "+r.project+" (yet, or any more): everything is refused until it does")
	}
	r.log.WarnContext(ctx, "egress blocked", attrs...)
	if id.Task == "" || r.events == nil {
		return
	}
	if !r.budget.allow(id.Task, time.Now()) {
		r.metrics.EventsSuppressed.Inc()
		return
	}
	task := &tatarav1.Task{
		TypeMeta:   metav1.TypeMeta{APIVersion: tatarav1.GroupVersion.String(), Kind: "Task"},
		ObjectMeta: metav1.ObjectMeta{Name: id.Task, Namespace: r.namespace, UID: id.TaskUID},
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: id.Pod, Namespace: r.namespace, UID: id.PodUID},
	}
	r.events.Eventf(task, pod, corev1.EventTypeWarning, EventReason, eventAction(ref), "blocked: %s (%s)", ref.Target(), ref.Reason)
}
