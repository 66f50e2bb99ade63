{{/*
Chart name, truncated to 63 characters: Kubernetes label values and DNS names stop there.
*/}}
{{- define "tatara-wrapper.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it already contains the chart name, else
release-chart; truncated to 63 characters for the same reason as above.
*/}}
{{- define "tatara-wrapper.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
chart label value: name-version, with "+" (not allowed in label values) replaced.
*/}}
{{- define "tatara-wrapper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "tatara-wrapper.labels" -}}
helm.sh/chart: {{ include "tatara-wrapper.chart" . }}
{{ include "tatara-wrapper.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tatara-wrapper.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: wrapper
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "tatara-wrapper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara-wrapper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Image tag: the pinned image.tag, or the chart's appVersion when empty.
*/}}
{{- define "tatara-wrapper.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Image reference written into the runtime ConfigMap.
*/}}
{{- define "tatara-wrapper.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "tatara-wrapper.tag" .) }}
{{- end }}

{{/*
Selector of Tatara agent pods (labels the operator puts on every agent pod).
*/}}
{{- define "tatara-wrapper.agentPodSelector" -}}
app.kubernetes.io/name: tatara-agent
app.kubernetes.io/managed-by: tatara-operator
{{- end }}

{{/*
Name of the release check (the Helm test pod, and for the operator and project charts its
ServiceAccount, Role and RoleBinding): <release>-release-check.
*/}}
{{- define "tatara-wrapper.releaseCheckName" -}}
{{- printf "%s-release-check" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the release check's objects. Its name label differs from the chart's, so no selector of
the release (a Deployment's, a Service's, a NetworkPolicy's podSelector) matches its pod: a
ReplicaSet would adopt a pod its selector matches, and a Service would send it traffic.
*/}}
{{- define "tatara-wrapper.releaseCheckLabels" -}}
helm.sh/chart: {{ include "tatara-wrapper.chart" . }}
app.kubernetes.io/name: {{ include "tatara-wrapper.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "tatara-wrapper.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: release-check
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The release check's pod-level securityContext, and its container's: the restricted Pod Security
Standard, UID 65532 as in the images.
*/}}
{{- define "tatara-wrapper.releaseCheckPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tatara-wrapper.releaseCheckSecurityContext" -}}
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
{{- define "tatara-wrapper.releaseCheckResources" -}}
requests:
  cpu: 10m
  memory: 32Mi
limits:
  memory: 128Mi
{{- end }}
