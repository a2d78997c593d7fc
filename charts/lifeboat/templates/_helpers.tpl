{{/* Labels on every object, as `lifeboat install` sets them: uninstall
removes only what carries app.kubernetes.io/managed-by=lifeboat. */}}
{{- define "lifeboat.labels" -}}
app.kubernetes.io/managed-by: lifeboat
app.kubernetes.io/name: lifeboat
component: velero
{{- end }}

{{- define "lifeboat.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Velero's rule: a moving tag is pulled every time. */}}
{{- define "lifeboat.pullPolicy" -}}
{{- if .Values.image.pullPolicy -}}
{{ .Values.image.pullPolicy }}
{{- else if eq (.Values.image.tag | default .Chart.AppVersion) "latest" -}}
Always
{{- else -}}
IfNotPresent
{{- end }}
{{- end }}

{{/* A plugin's init container is named after its image as Velero names it
(install.PluginContainerName): no digest or tag, no registry host when
more path follows, and '-' for whatever a container name cannot hold. */}}
{{- define "lifeboat.pluginName" -}}
{{- $name := regexReplaceAll "@.*$" . "" -}}
{{- if not (contains "@" .) -}}
{{- $name = regexReplaceAll ":[^/]*$" $name "" -}}
{{- end -}}
{{- $name = regexReplaceAll "^[^/]*/(.*/.*)$" $name "${1}" -}}
{{- $name = regexReplaceAll "^/" $name "" -}}
{{- $name = regexReplaceAll "[^a-z0-9-]" (lower $name) "-" -}}
{{- if gt (len $name) 63 -}}
{{- $name = printf "%s-%s" (regexReplaceAll "-+$" (trunc 56 $name) "") (trunc 6 (sha256sum $name)) -}}
{{- end -}}
{{ $name }}
{{- end }}

{{- define "lifeboat.subjects" -}}
- kind: ServiceAccount
  name: velero
  namespace: {{ .Release.Namespace }}
{{- end }}
