{{/*
Name of the release check (the Helm test pod, and for the operator and project charts its
ServiceAccount, Role and RoleBinding): <release>-release-check.
*/}}
{{- define "tatara-common.releaseCheckName" -}}
{{- printf "%s-release-check" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the release check's objects. Its name label differs from the chart's, so no selector of
the release (a Deployment's, a Service's, a NetworkPolicy's podSelector) matches its pod: a
ReplicaSet would adopt a pod its selector matches, and a Service would send it traffic.
*/}}
{{- define "tatara-common.releaseCheckLabels" -}}
helm.sh/chart: {{ include "tatara-common.chart" . }}
app.kubernetes.io/name: {{ include "tatara-common.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "tatara-common.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tatara
app.kubernetes.io/component: release-check
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels that select the release check's pod (the operator chart's NetworkPolicy admits it by them).
*/}}
{{- define "tatara-common.releaseCheckSelector" -}}
app.kubernetes.io/name: {{ include "tatara-common.name" . | trunc 49 | trimSuffix "-" }}-release-check
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: release-check
{{- end }}

{{/*
The release check's pod-level securityContext, and its container's: the restricted Pod Security
Standard, UID 65532 as in the images.
*/}}
{{- define "tatara-common.releaseCheckPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tatara-common.releaseCheckSecurityContext" -}}
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
{{- define "tatara-common.releaseCheckResources" -}}
requests:
  cpu: 10m
  memory: 32Mi
limits:
  memory: 128Mi
{{- end }}
