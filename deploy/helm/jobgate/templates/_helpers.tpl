{{/* The release's base name, at most 63 characters with a component suffix. */}}
{{- define "jobgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jobgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "gateway"). */}}
{{- define "jobgate.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The environment every jobgate container gets. */}}
{{- define "jobgate.env" -}}
- name: JOBGATE_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: JOBGATE_DATA_DIR
  value: /var/lib/jobgate
{{- if .Values.auth.existingSecret }}
- name: JOBGATE_AUTH_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.existingSecret }}
      key: {{ .Values.auth.secretKey }}
{{- end }}
{{- if .Values.metrics.existingSecret }}
- name: JOBGATE_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.metrics.existingSecret }}
      key: {{ .Values.metrics.secretKey }}
{{- end }}
{{- if eq .Values.mode "external" }}
- name: JOBGATE_NATS_URL
  value: {{ required "mode external needs nats.url" .Values.nats.url | quote }}
- name: JOBGATE_NATS_REPLICAS
  value: {{ .Values.nats.replicas | quote }}
{{- if .Values.nats.credsSecret }}
- name: JOBGATE_NATS_CREDS
  value: /etc/jobgate/nats/{{ .Values.nats.credsKey }}
{{- end }}
{{- with .Values.nats.tls }}
{{- if .existingSecret }}
- name: JOBGATE_NATS_TLS_CA
  value: /etc/jobgate/nats-tls/{{ .caKey }}
{{- if .certKey }}
- name: JOBGATE_NATS_TLS_CERT
  value: /etc/jobgate/nats-tls/{{ .certKey }}
- name: JOBGATE_NATS_TLS_KEY
  value: /etc/jobgate/nats-tls/{{ required "nats.tls.keyKey goes with nats.tls.certKey" .keyKey }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The Secrets mounted as files (NATS credentials, TLS). */}}
{{- define "jobgate.secretMounts" -}}
{{- if and (eq .Values.mode "external") .Values.nats.credsSecret }}
- name: nats-creds
  mountPath: /etc/jobgate/nats
  readOnly: true
{{- end }}
{{- if and (eq .Values.mode "external") .Values.nats.tls.existingSecret }}
- name: nats-tls
  mountPath: /etc/jobgate/nats-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "jobgate.secretVolumes" -}}
{{- if and (eq .Values.mode "external") .Values.nats.credsSecret }}
- name: nats-creds
  secret:
    secretName: {{ .Values.nats.credsSecret }}
    defaultMode: 0440
{{- end }}
{{- if and (eq .Values.mode "external") .Values.nats.tls.existingSecret }}
- name: nats-tls
  secret:
    secretName: {{ .Values.nats.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Liveness and readiness on a named port. */}}
{{- define "jobgate.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: {{ . }}}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ . }}}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
startupProbe:
  httpGet: {path: /healthz, port: {{ . }}}
  periodSeconds: 2
  failureThreshold: 60
{{- end -}}
