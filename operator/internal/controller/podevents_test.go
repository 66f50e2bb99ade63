package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestPodEventsPutEndingTasksFirst: a pod that has just ended, or is deleted, queues its Task
// with taskEndPriority; any other event of a pod queues it as Owns would, and a pod no Task
// controls queues nothing.
func TestPodEventsPutEndingTasksFirst(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := tatarav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(tatarav1.GroupVersion.WithKind("Task"), meta.RESTScopeNamespace)
	mapper.Add(tatarav1.GroupVersion.WithKind("Project"), meta.RESTScopeNamespace)
	h := podEvents(handler.EnqueueRequestForOwner(scheme, mapper, &tatarav1.Task{}, handler.OnlyControllerOwner()))

	pod := func(owner string, phase corev1.PodPhase, rv string) client.Object {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "tatara-agent-t1", Namespace: "team-a", ResourceVersion: rv,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: tatarav1.GroupVersion.String(), Kind: owner, Name: "t1", UID: "u1", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	tests := []struct {
		name         string
		send         func(q priorityqueue.PriorityQueue[reconcile.Request])
		wantQueued   bool
		wantPriority int
	}{
		{"running to succeeded", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("Task", corev1.PodRunning, "1"), ObjectNew: pod("Task", corev1.PodSucceeded, "2")}, q)
		}, true, taskEndPriority},
		{"running to failed", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("Task", corev1.PodRunning, "1"), ObjectNew: pod("Task", corev1.PodFailed, "2")}, q)
		}, true, taskEndPriority},
		{"deleted", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Delete(context.Background(), event.DeleteEvent{Object: pod("Task", corev1.PodRunning, "1")}, q)
		}, true, taskEndPriority},
		{"pending to running", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("Task", corev1.PodPending, "1"), ObjectNew: pod("Task", corev1.PodRunning, "2")}, q)
		}, true, 0},
		{"an ended pod changes again", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("Task", corev1.PodSucceeded, "1"), ObjectNew: pod("Task", corev1.PodSucceeded, "2")}, q)
		}, true, 0},
		{"created", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: pod("Task", corev1.PodPending, "1")}, q)
		}, true, 0},
		{"a pool pod (a Project's) ends", func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("Project", corev1.PodRunning, "1"), ObjectNew: pod("Project", corev1.PodFailed, "2")}, q)
		}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			tt.send(q)
			if got := q.Len(); got != map[bool]int{true: 1, false: 0}[tt.wantQueued] {
				t.Fatalf("queued %d items, want queued=%t", got, tt.wantQueued)
			}
			if !tt.wantQueued {
				return
			}
			item, priority, _ := q.GetWithPriority()
			if item.Namespace != "team-a" || item.Name != "t1" {
				t.Errorf("queued %v, want team-a/t1", item)
			}
			if priority != tt.wantPriority {
				t.Errorf("priority %d, want %d", priority, tt.wantPriority)
			}
		})
	}
}
