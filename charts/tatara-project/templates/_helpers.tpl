{{/*
The project chart's own named templates. Names, labels and the release check's are shared by every
Tatara chart: tatara-common (charts/tatara-common), a library chart this one depends on.
*/}}
{{/*
Name of the Project: values.name, or the release name; truncated to 63 characters because it
becomes a label value (tatara.dev/project) on every agent pod.
*/}}
{{- define "tatara-project.projectName" -}}
{{- default .Release.Name .Values.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The operator image of this chart's appVersion (tatara-project is versioned with the operator), or
image.tag when pinned: the egress proxy and the release check run it.
*/}}
{{- define "tatara-project.operatorImage" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Name of the egress proxy's Deployment, Service, ServiceAccount and PodDisruptionBudget.
*/}}
{{- define "tatara-project.egressProxyName" -}}
{{- printf "%s-egress-proxy" (include "tatara-project.projectName" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels of the egress proxy's pods: the agents' NetworkPolicy admits exactly these.
*/}}
{{- define "tatara-project.egressProxySelector" -}}
app.kubernetes.io/name: tatara-egress-proxy
app.kubernetes.io/instance: {{ .Release.Name }}
tatara.dev/project: {{ include "tatara-project.projectName" . }}
{{- end }}

{{/*
The egress proxy's URL, which the Project gives agent pods as HTTPS_PROXY and HTTP_PROXY.
*/}}
{{- define "tatara-project.egressProxyURL" -}}
{{- printf "http://%s.%s.svc:%d" (include "tatara-project.egressProxyName" .) .Release.Namespace (int .Values.egress.proxy.port) }}
{{- end }}
