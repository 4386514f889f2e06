{{/* _helpers.tpl - names, labels and checked values shared by the templates. */}}

{{- define "areal-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "areal-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "areal-operator.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "areal-operator.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "areal-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "areal-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "areal-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "areal-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "areal-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "areal-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "areal-operator.leaseName" -}}
{{- default (include "areal-operator.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{- define "areal-operator.workerImage" -}}
{{- default (printf "areal/worker:%s" .Chart.AppVersion) .Values.workerImage -}}
{{- end -}}

{{/* The watched namespace ("" = all), after checking the list. */}}
{{- define "areal-operator.watchNamespace" -}}
{{- if gt (len .Values.namespaces) 1 -}}
{{- fail (printf "namespaces: %v lists %d namespaces, but the operator watches one namespace or all (--namespace); list at most one" .Values.namespaces (len .Values.namespaces)) -}}
{{- end -}}
{{- if .Values.namespaces -}}{{ index .Values.namespaces 0 }}{{- end -}}
{{- end -}}

{{/* The rules of the jobs' namespaces: the watch of arealjobs and every write of a reconcile. */}}
{{- define "areal-operator.jobRules" }}
  - apiGroups: [areal.io]
    resources: [arealjobs]
    verbs: [list, watch, patch, delete]
  - apiGroups: [areal.io]
    resources: [arealjobs/status]
    verbs: [patch]
  - apiGroups: [""]
    resources: [pods]
    verbs: [create, delete]
  - apiGroups: [""]
    resources: [services, configmaps]
    verbs: [create, patch]
  - apiGroups: [""]
    resources: [pods/binding, events]
    verbs: [create]
{{- end -}}
