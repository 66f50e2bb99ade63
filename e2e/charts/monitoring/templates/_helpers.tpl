{{/*
Labels of every object of the release; $component is operator or prometheus.
Usage: include "monitoring.labels" (list . "operator")
*/}}
{{- define "monitoring.labels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ printf "%s-%s" $.Chart.Name $.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "monitoring.selectorLabels" . }}
app.kubernetes.io/version: {{ include "monitoring.version" . | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
app.kubernetes.io/part-of: tatara-e2e
{{- end }}

{{/*
Selector labels: stable across upgrades (never the version).
*/}}
{{- define "monitoring.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ index . 1 | eq "operator" | ternary "prometheus-operator" "prometheus" }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/*
The version of a component: its image tag.
*/}}
{{- define "monitoring.version" -}}
{{- $ := index . 0 -}}
{{- index . 1 | eq "operator" | ternary $.Values.operator.image.tag $.Values.prometheus.image.tag }}
{{- end }}

{{/*
An image reference from images.registry and an image value (name, tag).
Usage: include "monitoring.image" (list . .Values.operator.image)
*/}}
{{- define "monitoring.image" -}}
{{- $ := index . 0 -}}
{{- $img := index . 1 -}}
{{- printf "%s/%s:%s" $.Values.images.registry $img.name $img.tag }}
{{- end }}
