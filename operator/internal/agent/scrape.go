package agent

import (
	"math"
	"time"
)

// WrapperScrapeWaitEnv tells the wrapper how long it waits, after the agent exits, for
// Prometheus to scrape its final counts; the cli gets the same bound as --scrape-wait.
const WrapperScrapeWaitEnv = "TATARA_WRAPPER_SCRAPE_WAIT"

// CLIShutdownTimeout is the cli's own bound on its graceful stop (tatara mcp --shutdown-timeout,
// whose default it is); the pod's grace period covers it.
const CLIShutdownTimeout = 10 * time.Second

// defaultGracePeriod is Kubernetes' default terminationGracePeriodSeconds.
const defaultGracePeriod = 30 * time.Second

// ScrapeWait is how long a container scraped every interval waits for a final scrape before it
// exits: two intervals. Prometheus scrapes a new pod within one interval of discovering it, and
// an exiting one within one interval of the exit; the second interval absorbs discovery latency
// and scrape jitter. No interval (monitoring off) means no wait.
func ScrapeWait(interval time.Duration) time.Duration { return 2 * interval }

// GracePeriodSeconds is the agent pod's terminationGracePeriodSeconds: once the wrapper has
// exited, the cli sidecar gets SIGTERM and must still stop its MCP server and wait for its
// final scrape; a deleted pod's wrapper waits for its own. Never below Kubernetes' default.
func GracePeriodSeconds(cfg Config) int64 {
	need := max(CLIShutdownTimeout+ScrapeWait(cfg.CLIScrapeInterval), ScrapeWait(cfg.WrapperScrapeInterval)) + 10*time.Second
	return int64(math.Ceil(max(need, defaultGracePeriod).Seconds()))
}
