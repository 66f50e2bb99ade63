//go:build e2e

package suite

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// How the features share the cluster. Features that do not disturb each other (their own Tasks,
// Projects or namespaces, nothing cluster-wide changed) run side by side: sharedFeature. Features
// that restart, fail over or upgrade the operator run alone, one at a time, after every shared
// feature has ended: aloneFeature. Go runs each top-level test up to its t.Parallel() one after the
// other before it resumes any of them, so every shared feature has joined sharedRunning before an
// alone feature waits on it. make e2e runs go test with -parallel above the number of features:
// an alone feature holds its slot while it waits.
//
// Alone: TestOperatorRollouts and TestLeaderFailover (rollout_test.go), TestUpgradeAndRollback
// (upgrade_test.go) and TestLostNode (nodelost_test.go); every other feature is shared. The 2-core kind node has CPU requests for
// about nine agent pods at once besides the system's (seven before the control plane's were
// lowered: hack/kind-cluster.yaml), and a pod past them waits unscheduled. Teardown: each feature
// deletes what it created in its Teardown step with deleting (helpers_test.go); the cluster
// itself goes in tearDown (main_test.go) after the last feature, unless E2E_KEEP_CLUSTER=1.
var (
	sharedRunning sync.WaitGroup
	aloneTurn     sync.Mutex
)

// sharedFeature runs the test beside the other shared ones. Call it first in the test.
func sharedFeature(t *testing.T) {
	sharedRunning.Add(1)
	t.Cleanup(sharedRunning.Done)
	t.Parallel()
}

// aloneFeature runs the test after every shared one has ended, and alone. Call it first in the
// test.
func aloneFeature(t *testing.T) {
	t.Parallel()
	sharedRunning.Wait()
	aloneTurn.Lock()
	t.Cleanup(aloneTurn.Unlock)
}

// featureTimes records each feature's wall time for the run's summary.
var featureTimes = &featureClock{}

type featureClock struct {
	mu   sync.Mutex
	runs []featureRun
}

type featureRun struct {
	name       string
	start, end time.Time
	failed     bool
}

func (c *featureClock) start(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, featureRun{name: name, start: time.Now()})
}

func (c *featureClock) end(name string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.runs {
		if c.runs[i].name == name && c.runs[i].end.IsZero() {
			c.runs[i].end, c.runs[i].failed = time.Now(), failed
			return
		}
	}
}

// print logs one line per feature, in the order they started, with its start (seconds into the
// run), its wall time and its result.
func (c *featureClock) print() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) == 0 {
		return
	}
	runs := slices.Clone(c.runs)
	slices.SortFunc(runs, func(a, b featureRun) int { return a.start.Compare(b.start) })
	logf("summary: features (start: seconds into the run)")
	for _, r := range runs {
		result, took := "ok", "-"
		switch {
		case r.end.IsZero():
			result = "unfinished"
		case r.failed:
			result = "FAIL"
		}
		if !r.end.IsZero() {
			took = r.end.Sub(r.start).Round(time.Second).String()
		}
		logf("  %-60s start %5.0fs %7s %s", r.name, r.start.Sub(runLog.Start()).Seconds(), took, result)
	}
}
