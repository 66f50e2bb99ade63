{{/*
Chart name, truncated to 63 characters: Kubernetes label values and DNS names stop there.
*/}}
{{- define "tatara-common.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it already contains the chart name, else
release-chart; truncated to 63 characters for the same reason as above.
*/}}
{{- define "tatara-common.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
chart label value: name-version, with "+" (not allowed in label values) replaced.
*/}}
{{- define "tatara-common.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The component label: the chart's name without "tatara-" (cli, wrapper, operator, project).
*/}}
{{- define "tatara-common.component" -}}
{{- .Chart.Name | trimPrefix "tatara-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "tatara-common.labels" -}}
helm.sh/chart: {{ include "tatara-common.chart" . }}
{{ include "tatara-common.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tatara-common.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: {{ include "tatara-common.component" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "tatara-common.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara-common.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Image tag: the pinned image.tag, or the chart's appVersion when empty or when the chart has no
image (the project chart: its version label is its appVersion).
*/}}
{{- define "tatara-common.tag" -}}
{{- (.Values.image | default dict).tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Image reference: image.repository at the tag above.
*/}}
{{- define "tatara-common.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "tatara-common.tag" .) }}
{{- end }}

{{/*
Selector of Tatara agent pods (labels the operator puts on every agent pod).
*/}}
{{- define "tatara-common.agentPodSelector" -}}
app.kubernetes.io/name: tatara-agent
app.kubernetes.io/managed-by: tatara-operator
{{- end }}
