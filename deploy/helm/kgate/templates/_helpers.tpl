{{/* deploy/helm/kgate/templates/_helpers.tpl: names and labels shared by the chart's objects. */}}
{{- define "kgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kgate.labels" -}}
{{ include "kgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding the token: the user's, or the chart's own. */}}
{{- define "kgate.secretName" -}}
{{- if .Values.accessToken.existingSecret -}}
{{- .Values.accessToken.existingSecret -}}
{{- else -}}
{{- printf "%s-token" (include "kgate.fullname" .) -}}
{{- end -}}
{{- end -}}
