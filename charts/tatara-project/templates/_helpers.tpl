{{/*
Chart name, truncated to 63 characters: Kubernetes label values and DNS names stop there.
*/}}
{{- define "tatara-project.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the Project: values.name, or the release name; truncated to 63 characters because it
becomes a label value (tatara.dev/project) on every agent pod.
*/}}
{{- define "tatara-project.projectName" -}}
{{- default .Release.Name .Values.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
chart label value: name-version, with "+" (not allowed in label values) replaced.
*/}}
{{- define "tatara-project.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "tatara-project.labels" -}}
helm.sh/chart: {{ include "tatara-project.chart" . }}
{{ include "tatara-project.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: project
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "tatara-project.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara-project.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
