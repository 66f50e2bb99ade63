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
Image of the release check: the operator image of this chart's appVersion (tatara-project is
versioned with the operator), or releaseCheck.image.tag when pinned.
*/}}
{{- define "tatara-project.releaseCheckImage" -}}
{{- printf "%s:%s" .Values.releaseCheck.image.repository (.Values.releaseCheck.image.tag | default .Chart.AppVersion) }}
{{- end }}
