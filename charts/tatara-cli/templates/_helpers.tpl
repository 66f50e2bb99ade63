{{/*
Chart name, truncated to 63 characters: Kubernetes label values and DNS names stop there.
*/}}
{{- define "tatara-cli.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it already contains the chart name, else
release-chart; truncated to 63 characters for the same reason as above.
*/}}
{{- define "tatara-cli.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
chart label value: name-version, with "+" (not allowed in label values) replaced.
*/}}
{{- define "tatara-cli.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "tatara-cli.labels" -}}
helm.sh/chart: {{ include "tatara-cli.chart" . }}
{{ include "tatara-cli.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tatara-cli.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: cli
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "tatara-cli.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara-cli.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Image tag: the pinned image.tag, or the chart's appVersion when empty.
*/}}
{{- define "tatara-cli.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Image reference written into the runtime ConfigMap.
*/}}
{{- define "tatara-cli.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "tatara-cli.tag" .) }}
{{- end }}

{{/*
Selector of Tatara agent pods (labels the operator puts on every agent pod).
*/}}
{{- define "tatara-cli.agentPodSelector" -}}
app.kubernetes.io/name: tatara-agent
app.kubernetes.io/managed-by: tatara-operator
{{- end }}
