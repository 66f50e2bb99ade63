package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// ScrapeLines GETs a /metrics endpoint and returns its sample lines that start with prefix (a
// histogram's name gives its _bucket, _sum and _count lines; comments never match).
func ScrapeLines(t testing.TB, url, prefix string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("failed to scrape %s: %v", url, err)
	}
	text, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("failed to read the scrape of %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape of %s answered %d: %s", url, resp.StatusCode, text)
	}
	var out []string
	for line := range strings.SplitSeq(string(text), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}
