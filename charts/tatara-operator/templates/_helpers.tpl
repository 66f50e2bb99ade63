{{/*
The operator chart's own named templates. Names, labels and the release check's are shared by every
Tatara chart: tatara-common (charts/tatara-common), a library chart this one depends on.
*/}}
{{/*
Service account name.
*/}}
{{- define "tatara-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tatara-common.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Name of the FlowSchema and PriorityLevelConfiguration: cluster-scoped, so the release's namespace
is in it.
*/}}
{{- define "tatara-operator.flowControlName" -}}
{{- printf "%s-%s" .Release.Namespace (include "tatara-common.fullname" .) | trunc 253 | trimSuffix "-" }}
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
{{- $url := default (printf "%s://%s.%s.svc:%d" $scheme (include "tatara-common.fullname" .) .Release.Namespace (int .Values.ports.api)) .Values.agentEnv.operatorURL }}
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
{{- default (printf "%s-api-tls" (include "tatara-common.fullname" .)) .Values.apiTLS.secretName }}
{{- end }}

{{/*
Where the REST API's certificate Secret is mounted (--api-tls-cert-dir).
*/}}
{{- define "tatara-operator.apiTLSDir" -}}
/var/run/tatara/api-tls
{{- end }}
