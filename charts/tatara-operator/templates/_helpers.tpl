{{/*
Chart name, truncated to 63 characters: Kubernetes label values and DNS names stop there.
*/}}
{{- define "tatara-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it already contains the chart name, else
release-chart; truncated to 63 characters for the same reason as above.
*/}}
{{- define "tatara-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
chart label value: name-version, with "+" (not allowed in label values) replaced.
*/}}
{{- define "tatara-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "tatara-operator.labels" -}}
helm.sh/chart: {{ include "tatara-operator.chart" . }}
{{ include "tatara-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tatara-operator.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "tatara-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Image tag: the pinned image.tag, or the chart's appVersion when empty.
*/}}
{{- define "tatara-operator.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Image reference of the operator container.
*/}}
{{- define "tatara-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "tatara-operator.tag" .) }}
{{- end }}

{{/*
Service account name.
*/}}
{{- define "tatara-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tatara-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Name of the FlowSchema and PriorityLevelConfiguration: cluster-scoped, so the release's namespace
is in it.
*/}}
{{- define "tatara-operator.flowControlName" -}}
{{- printf "%s-%s" .Release.Namespace (include "tatara-operator.fullname" .) | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/*
Namespace of the runtime ConfigMaps.
*/}}
{{- define "tatara-operator.runtimeNamespace" -}}
{{- default .Release.Namespace .Values.runtimeNamespace }}
{{- end }}

{{/*
URL agent pods reach the REST API at: https unless apiTLS.enabled is false. An http URL with TLS on
fails the render: the cli would send its Task token in clear to a port that only speaks TLS.
*/}}
{{- define "tatara-operator.operatorURL" -}}
{{- $scheme := ternary "https" "http" .Values.apiTLS.enabled }}
{{- $url := default (printf "%s://%s.%s.svc:%d" $scheme (include "tatara-operator.fullname" .) .Release.Namespace (int .Values.ports.api)) .Values.agentEnv.operatorURL }}
{{- if and .Values.apiTLS.enabled (not (hasPrefix "https://" $url)) }}
{{- fail (printf "agentEnv.operatorURL %q must be https while apiTLS.enabled is true" $url) }}
{{- end }}
{{- $url }}
{{- end }}

{{/*
Where the REST API's certificate comes from: "" (apiTLS.enabled false: plain HTTP), "mounted"
(apiTLS.secretName, e.g. cert-manager's) or "issued" (the operator's own, in apiTLSSecretName).
*/}}
{{- define "tatara-operator.apiTLSSource" -}}
{{- if .Values.apiTLS.enabled }}{{ ternary "mounted" "issued" (ne .Values.apiTLS.secretName "") }}{{ end }}
{{- end }}

{{/*
The Secret holding the REST API's certificate and CA: apiTLS.secretName, or <fullname>-api-tls,
which this chart creates empty and the operator fills and renews.
*/}}
{{- define "tatara-operator.apiTLSSecretName" -}}
{{- default (printf "%s-api-tls" (include "tatara-operator.fullname" .)) .Values.apiTLS.secretName }}
{{- end }}

{{/*
Where the REST API's certificate Secret is mounted (--api-tls-cert-dir).
*/}}
{{- define "tatara-operator.apiTLSDir" -}}
/var/run/tatara/api-tls
{{- end }}

{{/*
Name of the release check (the Helm test pod, and for the operator and project charts its
ServiceAccount, Role and RoleBinding): <release>-release-check.
*/}}
{{- define "tatara-operator.releaseCheckName" -}}
{{- printf "%s-release-check" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the release check's objects. Its name label differs from the chart's, so no selector of
the release (a Deployment's, a Service's, a NetworkPolicy's podSelector) matches its pod: a
ReplicaSet would adopt a pod its selector matches, and a Service would send it traffic.
*/}}
{{- define "tatara-operator.releaseCheckLabels" -}}
helm.sh/chart: {{ include "tatara-operator.chart" . }}
app.kubernetes.io/name: {{ include "tatara-operator.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "tatara-operator.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: release-check
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels that select the release check's pod (the NetworkPolicy admits it by them).
*/}}
{{- define "tatara-operator.releaseCheckSelector" -}}
app.kubernetes.io/name: {{ include "tatara-operator.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: release-check
{{- end }}

{{/*
The release check's pod-level securityContext, and its container's: the restricted Pod Security
Standard, UID 65532 as in the images.
*/}}
{{- define "tatara-operator.releaseCheckPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tatara-operator.releaseCheckSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The release check's resources: one short-lived process.
*/}}
{{- define "tatara-operator.releaseCheckResources" -}}
requests:
  cpu: 10m
  memory: 32Mi
limits:
  memory: 128Mi
{{- end }}
