{{/*
The PrometheusRule that alerts on every report_internal_issue call the cli (its MCP handler) or the
wrapper (the agent's transcript) counted. Called with a dict:
  context  the chart's root context (.Values.monitoring: internalIssueAlert, labels)
  alert    the alert's name
  metric   the counter
  summary  the summary annotation (Prometheus template text)
  logs     whose logs hold the reports, and logLine: the field that finds their lines
The chart's own template states, in two comment lines before it, what its counter counts.
*/}}
{{- define "tatara-common.internalIssueAlert" -}}
{{- $ := .context -}}
{{- $w := $.Values.monitoring.internalIssueAlert.window -}}
#
# Agent pods live seconds to minutes, so the expression counts two kinds of series in the window:
#   - a series that already existed a window ago (a long-lived pod): its increase();
#   - a series born inside the window (a new pod, possibly first scraped with the report already
#     counted, once or a few times): its highest value, as a new pod's counter started at 0.
# `increase(x[w]) > 0` alone misses the second kind: increase() needs two samples and cannot see
# a series that starts above 0. The report's own severity is kept as report_severity: the rule's
# `severity` label would overwrite it, and a warn and an error report of one category would then
# collide ("vector contains metrics with the same labelset"), which stops the rule altogether.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "tatara-common.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "tatara-common.labels" $ | nindent 4 }}
    {{- with $.Values.monitoring.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  groups:
    - name: {{ $.Chart.Name }}
      rules:
        - alert: {{ .alert }}
          expr: |
            sum by (namespace, project, task_kind, category, report_severity) (
              label_replace(
                (max_over_time({{ .metric }}[{{ $w }}]) unless {{ .metric }} offset {{ $w }})
                  or increase({{ .metric }}[{{ $w }}]),
                "report_severity", "$1", "severity", "(.*)"
              )
            ) > 0
          for: {{ $.Values.monitoring.internalIssueAlert.for }}
          labels:
            severity: {{ $.Values.monitoring.internalIssueAlert.severity | quote }}
            component: {{ $.Chart.Name }}
          annotations:
            summary: '{{ .summary }}'
            description: >-
              {{ .metric }} of agent pods in namespace {{`{{ $labels.namespace }}`}}, project
              {{`{{ $labels.project }}`}}, Task kind {{`{{ $labels.task_kind }}`}} counted
              {{`{{ $value | humanize }}`}} {{`{{ $labels.report_severity }}`}} report(s) of category
              {{`{{ $labels.category }}`}} in the last {{ $w }}. Find them in {{ .logs }} logs:
              {{ .logLine }}, category="{{`{{ $labels.category }}`}}", project="{{`{{ $labels.project }}`}}".
              Runbook: docs/observability.md of the Tatara repository.
{{- end }}
