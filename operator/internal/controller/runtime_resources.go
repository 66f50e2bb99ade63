package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"tatara.dev/operator/internal/agent"
)

// Keys of the runtime ConfigMaps that hold container resources, each a JSON
// ResourceRequirements ({"requests":{...},"limits":{...}}). A missing key leaves the container
// to agent.DefaultResources, so a ConfigMap written before the keys existed still works.
const (
	CLIResourcesKey            = "resources"              // tatara-cli-runtime: the cli sidecar
	GitGatewayResourcesKey     = "gitGatewayResources"    // tatara-cli-runtime: the git-gateway sidecar
	ModelGatewayResourcesKey   = "modelGatewayResources"  // tatara-cli-runtime: the model-gateway sidecar
	WrapperInstallResourcesKey = "installResources"       // tatara-wrapper-runtime: wrapper-install
	WorkspaceInitResourcesKey  = "workspaceInitResources" // tatara-wrapper-runtime: workspace-init
	AgentResourcesKey          = "agentResources"         // tatara-wrapper-runtime: the agent, unless the Project sets its own
)

// runtimeResources reads the resource keys of one runtime ConfigMap into res. A value that is not
// a ResourceRequirements (bad JSON, an unknown field, a malformed quantity) is an error naming
// the ConfigMap and the key.
func runtimeResources(cm *corev1.ConfigMap, res *agent.Resources) error {
	var keys map[string]*corev1.ResourceRequirements
	switch cm.Name {
	case CLIRuntimeConfigMap:
		keys = map[string]*corev1.ResourceRequirements{CLIResourcesKey: &res.CLI, GitGatewayResourcesKey: &res.GitGateway, ModelGatewayResourcesKey: &res.ModelGateway}
	case WrapperRuntimeConfigMap:
		keys = map[string]*corev1.ResourceRequirements{WrapperInstallResourcesKey: &res.WrapperInstall,
			WorkspaceInitResourcesKey: &res.WorkspaceInit, AgentResourcesKey: &res.Agent}
	}
	for key, dst := range keys {
		raw, ok := cm.Data[key]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.DisallowUnknownFields()
		var r corev1.ResourceRequirements
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("configmap %s/%s key %q is not a resource requirements object ({\"requests\":{...},\"limits\":{...}}): %w",
				cm.Namespace, cm.Name, key, err)
		}
		if dec.More() {
			return fmt.Errorf("configmap %s/%s key %q holds more than one JSON value", cm.Namespace, cm.Name, key)
		}
		*dst = r
	}
	return nil
}

// ScrapeIntervalKey of either runtime ConfigMap is the interval at which Prometheus scrapes that
// chart's container (its PodMonitor's); the charts write it only when monitoring is on. The pod
// builder derives from it how long the container waits for a final scrape before it exits.
const ScrapeIntervalKey = "metricsScrapeInterval"

// runtimeScrapeInterval reads ScrapeIntervalKey: 0 when absent, an error naming the ConfigMap
// and the key when it is not a positive Go duration.
func runtimeScrapeInterval(cm *corev1.ConfigMap) (time.Duration, error) {
	raw, ok := cm.Data[ScrapeIntervalKey]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	if err != nil {
		return 0, fmt.Errorf("configmap %s/%s key %q is not a positive duration such as 30s: %q: %w", cm.Namespace, cm.Name, ScrapeIntervalKey, raw, err)
	}
	return d, nil
}

// RecordInternalIssuesKey of the cli runtime ConfigMap is the cli chart's internalIssues.record:
// "true" or "false"; absent (a chart from before the key) is false.
const RecordInternalIssuesKey = "recordInternalIssues"

// runtimeRecordInternalIssues reads RecordInternalIssuesKey: an error naming the ConfigMap and the
// key when it is neither true nor false.
func runtimeRecordInternalIssues(cm *corev1.ConfigMap) (bool, error) {
	raw, ok := cm.Data[RecordInternalIssuesKey]
	if !ok {
		return false, nil
	}
	switch raw {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("configmap %s/%s key %q is %q: want true or false", cm.Namespace, cm.Name, RecordInternalIssuesKey, raw)
}
