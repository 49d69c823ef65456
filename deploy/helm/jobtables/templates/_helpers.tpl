{{- define "jobtables.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "jobtables.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "jobtables.secretName" -}}
{{- default (include "jobtables.fullname" .) .Values.slack.existingSecret -}}
{{- end -}}

{{- define "jobtables.redisSecretName" -}}
{{- default (printf "%s-redis" .Release.Name) .Values.redis.existingSecret -}}
{{- end -}}

{{- define "jobtables.incidentsClaim" -}}
{{- default (printf "%s-incidents" (include "jobtables.fullname" .)) .Values.incidents.existingClaim -}}
{{- end -}}

{{/* true when serviceAccount.automountToken is true, or "auto" and the roster has a
     kind = "kubernetes" cluster (a key of its own line or of an inline table, either TOML
     string quote; a commented-out one does not count); false otherwise */}}
{{- define "jobtables.automountToken" -}}
{{- $mode := toString .Values.serviceAccount.automountToken -}}
{{- if eq $mode "true" -}}true
{{- else if and (eq $mode "auto") (regexMatch "(?m)^[^#\\n]*(?:^|[\\s{,])[\"']?kind[\"']?\\s*=\\s*[\"']kubernetes[\"']" .Values.config) -}}true
{{- else -}}false
{{- end -}}
{{- end -}}
