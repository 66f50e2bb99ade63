// Package modelusage is the model gateway's report of what one agent pod's model requests used,
// and its contract with the operator: the gateway keeps its totals in its container's
// termination message (rewritten after every response), and the operator adds them to the Task's
// status when the pod ends. Every token the upstream reports counts: input, output, and the
// prompt cache's writes and reads.
package modelusage

import (
	"encoding/json"
	"fmt"
)

// Usage is one pod's (one attempt's) model use. Its JSON is the gateway's termination message,
// far below the kubelet's 4 KiB bound on one.
type Usage struct {
	// Requests counts the model requests forwarded upstream (refused ones are not).
	Requests int64 `json:"requests"`
	// The token counts, as the upstream's usage reported them.
	InputTokens              int64 `json:"inputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens"`
	// BudgetExceeded is set once the gateway refused a request because the Task's token budget
	// was spent.
	BudgetExceeded bool `json:"budgetExceeded,omitempty"`
}

// Tokens is every token of u, the figure a budget bounds.
func (u Usage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// Add returns u plus v (BudgetExceeded if either has it).
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Requests:                 u.Requests + v.Requests,
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		BudgetExceeded:           u.BudgetExceeded || v.BudgetExceeded,
	}
}

// Parse reads a gateway's termination message. It refuses negative counts: the message is
// written by a process in the agent's pod, and a count must never lower a Task's recorded use.
func Parse(message string) (Usage, error) {
	var u Usage
	if err := json.Unmarshal([]byte(message), &u); err != nil {
		return Usage{}, fmt.Errorf("invalid model usage %q: %w", message, err)
	}
	for name, v := range map[string]int64{"requests": u.Requests, "inputTokens": u.InputTokens, "outputTokens": u.OutputTokens,
		"cacheCreationInputTokens": u.CacheCreationInputTokens, "cacheReadInputTokens": u.CacheReadInputTokens} {
		if v < 0 {
			return Usage{}, fmt.Errorf("invalid model usage: %s is %d, want >= 0", name, v)
		}
	}
	return u, nil
}
