package testutil

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// CheckHistogramBuckets fails t unless lines, the scraped `<metric>_bucket` lines of one series,
// are exactly the buckets plus +Inf, in order, each labelled {labels,le="..."}, and the +Inf
// bucket holds observations.
func CheckHistogramBuckets(t testing.TB, lines []string, metric, labels string, buckets []float64, observations int) {
	t.Helper()
	if len(lines) != len(buckets)+1 {
		t.Fatalf("%d %s_bucket lines, want %d buckets and +Inf: %q", len(lines), metric, len(buckets), lines)
	}
	for i, b := range lines {
		le := "+Inf"
		if i < len(buckets) {
			le = strconv.FormatFloat(buckets[i], 'g', -1, 64)
		}
		if !strings.HasPrefix(b, metric+"_bucket{"+labels+`,le="`+le+`"} `) {
			t.Errorf("bucket %d = %q, want labels {%s,le=%q}", i, b, labels, le)
		}
	}
	if inf := lines[len(lines)-1]; !strings.HasSuffix(inf, fmt.Sprintf("} %d", observations)) {
		t.Errorf("+Inf bucket = %q, want %d observations", inf, observations)
	}
}
