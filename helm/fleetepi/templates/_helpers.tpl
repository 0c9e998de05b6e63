{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "fleetepi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource-name prefix: <release>-fleetepi, or <release> when it already says fleetepi. */}}
{{- define "fleetepi.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fleetepi.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "fleetepi.labels" -}}
helm.sh/chart: {{ include "fleetepi.chart" . }}
app.kubernetes.io/name: {{ include "fleetepi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetepi
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "agent"). */}}
{{- define "fleetepi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetepi.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "fleetepi.componentLabels" -}}
{{ include "fleetepi.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "fleetepi.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Name of the Secret holding the hook's bearer token. */}}
{{- define "fleetepi.hookSecret" -}}
{{- default (printf "%s-hook-token" (include "fleetepi.fullname" .)) .Values.hook.existingSecret }}
{{- end }}

{{/* Container security context of the worker and hook: nothing but the process. */}}
{{- define "fleetepi.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* The --broker URL of agent and worker. */}}
{{- define "fleetepi.brokerUrl" -}}
{{- printf "kafka://%s" .Values.kafka.bootstrapServers }}
{{- end }}
