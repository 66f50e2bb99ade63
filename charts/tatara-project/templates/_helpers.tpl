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

{{/*
Name of the release check (the Helm test pod, and for the operator and project charts its
ServiceAccount, Role and RoleBinding): <release>-release-check.
*/}}
{{- define "tatara-project.releaseCheckName" -}}
{{- printf "%s-release-check" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the release check's objects. Its name label differs from the chart's, so no selector of
the release (a Deployment's, a Service's, a NetworkPolicy's podSelector) matches its pod: a
ReplicaSet would adopt a pod its selector matches, and a Service would send it traffic.
*/}}
{{- define "tatara-project.releaseCheckLabels" -}}
helm.sh/chart: {{ include "tatara-project.chart" . }}
app.kubernetes.io/name: {{ include "tatara-project.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
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
{{- define "tatara-project.releaseCheckPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tatara-project.releaseCheckSecurityContext" -}}
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
{{- define "tatara-project.releaseCheckResources" -}}
requests:
  cpu: 10m
  memory: 32Mi
limits:
  memory: 128Mi
{{- end }}

{{/*
Image of the release check: the operator image of this chart's appVersion (tatara-project is
versioned with the operator), or releaseCheck.image.tag when pinned.
*/}}
{{- define "tatara-project.releaseCheckImage" -}}
{{- printf "%s:%s" .Values.releaseCheck.image.repository (.Values.releaseCheck.image.tag | default .Chart.AppVersion) }}
{{- end }}
