{{/*
The name prefix: fullnameOverride, else the release name when it already
says millpond, else "<release>-millpond".
*/}}
{{- define "millpond.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride -}}
{{- else if contains "millpond" .Release.Name -}}
{{- .Release.Name -}}
{{- else -}}
{{- printf "%s-millpond" .Release.Name -}}
{{- end -}}
{{- end -}}

{{/*
The pipelines, from either form of `pipelines`, as JSON {"pipelines": [...]}:
every template ranges over (include "millpond.pipelines" . | fromJson).pipelines,
never over .Values.pipelines.
- A list of entries, each with its `name` (this chart's form).
- A map of name -> entry, the original's form: the key is the name, entries
  come in key order, and a null entry is no pipeline (so a later values file
  can remove one, or override one key of one pipeline).
Both give each entry the same defaults (`millpond.pipelineDefaults`) and a
`where` (how messages name it: pipelines[<name>] or pipelines.<name>).
*/}}
{{- define "millpond.pipelines" -}}
{{- $in := .Values.pipelines -}}
{{- $out := list -}}
{{- $defaults := include "millpond.pipelineDefaults" . | fromYaml -}}
{{- if kindIs "slice" $in -}}
{{- range $i, $p := $in -}}
{{- if not (kindIs "map" $p) -}}
{{- fail (printf "pipelines[%d]: an entry is a map (name, topic, table, replicas, ...), not %s" $i (kindOf $p)) -}}
{{- end -}}
{{- $e := dict -}}
{{- range $k, $v := $p -}}{{- $_ := set $e $k $v -}}{{- end -}}
{{- $_ := set $e "where" (printf "pipelines[%v]" ($p.name | default $i)) -}}
{{- $out = append $out $e -}}
{{- end -}}
{{- else if kindIs "map" $in -}}
{{- range $name, $p := $in -}}
{{- if kindIs "invalid" $p -}}{{- continue -}}{{- end -}}
{{- if not (kindIs "map" $p) -}}
{{- fail (printf "pipelines.%s: an entry of the map form is a map (topic, table, replicas, ...), not %s" $name (kindOf $p)) -}}
{{- end -}}
{{- if hasKey $p "name" -}}
{{- fail (printf "pipelines.%s: has a name; in the map form the key is the name (drop name, or use the list form)" $name) -}}
{{- end -}}
{{- $e := dict "name" $name -}}
{{- range $k, $v := $p -}}{{- $_ := set $e $k $v -}}{{- end -}}
{{- $_ := set $e "where" (printf "pipelines.%s" $name) -}}
{{- $out = append $out $e -}}
{{- end -}}
{{- else if not (kindIs "invalid" $in) -}}
{{- fail (printf "pipelines: a list of entries or a map of name: entry, not %s" (kindOf $in)) -}}
{{- end -}}
{{- range $e := $out -}}
{{- range $k, $v := $defaults -}}
{{- if not (hasKey $e $k) -}}{{- $_ := set $e $k $v -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- dict "pipelines" $out | toJson -}}
{{- end -}}

{{/* What an entry of either form gets when it leaves a key out. */}}
{{- define "millpond.pipelineDefaults" -}}
destination: ducklake
{{- end -}}

{{/* A pipeline's StatefulSet, Service and PDB name. Context: {root, pipe}. */}}
{{- define "millpond.pipelineName" -}}
{{- printf "%s-%s" (include "millpond.fullname" .root) .pipe.name -}}
{{- end -}}

{{- define "millpond.serviceAccountName" -}}
{{- if .pipe.serviceAccountName -}}
{{- .pipe.serviceAccountName -}}
{{- else if .root.Values.serviceAccount.name -}}
{{- .root.Values.serviceAccount.name -}}
{{- else if .root.Values.serviceAccount.create -}}
{{- include "millpond.fullname" .root -}}
{{- else -}}
default
{{- end -}}
{{- end -}}

{{/* Labels that select a pipeline's pods (immutable on a StatefulSet). */}}
{{- define "millpond.selectorLabels" -}}
app.kubernetes.io/name: millpond
app.kubernetes.io/instance: {{ .root.Release.Name }}
millpond/pipeline: {{ .pipe.name }}
{{- end -}}

{{- define "millpond.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{ include "millpond.selectorLabels" . }}
millpond/destination: {{ .pipe.destination }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* A values scalar as env text: YAML integers arrive as floats. */}}
{{- define "millpond.scalar" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/* Variables the chart sets itself; no env map may set them. */}}
{{- define "millpond.reservedEnv" -}}
REPLICA_COUNT POD_NAME KAFKA_TOPIC KAFKA_BOOTSTRAP_SERVERS MILLPOND_DESTINATION DUCKLAKE_TABLE HOGLAKE_TABLE FLUSH_SIZE MILLPOND_WRITER_ADDR MILLPOND_HTTP_PORT MILLPOND_WRITER_HTTP_PORT MILLPOND_HTTP_HOST MILLPOND_WRITER_SHUTDOWN_GRACE_S
{{- end -}}

{{/* Names that hold a credential: a word SECRET, PASSWORD, PASSWD, TOKEN,
KEY or CREDENTIAL(S), unless the name ends in _LOCATION, _FILE or _PATH
(those name a file). tests/python/check_helm_chart.py applies the same rule. */}}
{{- define "millpond.secretNamePattern" -}}
(^|_)(SECRET|PASSWORD|PASSWD|TOKEN|KEY|CREDENTIALS?)(_|$)
{{- end -}}

{{/*
Merges env maps (later wins; a null value removes the variable) and renders
them as a container env list. Context: {maps: [map...], where: "text"}.
*/}}
{{- define "millpond.envList" -}}
{{- $merged := dict -}}
{{- range $m := .maps -}}
{{- range $k, $v := ($m | default dict) -}}
{{- $_ := set $merged $k $v -}}
{{- end -}}
{{- end -}}
{{- $reserved := splitList " " (include "millpond.reservedEnv" .) -}}
{{- range $name, $v := $merged -}}
{{- if kindIs "invalid" $v -}}{{- continue -}}{{- end -}}
{{- if has $name $reserved -}}
{{- fail (printf "%s: %s is set by the chart; remove it from the env maps" $.where $name) -}}
{{- end -}}
{{- if has $name (list "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY" "AWS_SESSION_TOKEN") -}}
{{- fail (printf "%s: %s would take precedence over the pod's IRSA role; use DUCKDB_S3_* or HOGLAKE_S3_* keys" $.where $name) -}}
{{- end }}
- name: {{ $name }}
{{- if kindIs "map" $v }}
  valueFrom:
    {{- toYaml $v | nindent 4 }}
{{- else }}
{{- if and (regexMatch (include "millpond.secretNamePattern" $) $name) (not (regexMatch "_(LOCATION|FILE|PATH)$" $name)) }}
{{- fail (printf "%s: %s holds a credential; give it as {secretKeyRef: {name: ..., key: ...}}, not a value" $.where $name) }}
{{- end }}
  value: {{ include "millpond.scalar" $v | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* "true" when the env maps leave the variable set (later wins, null
removes), else empty. Context: {maps, name}. */}}
{{- define "millpond.envSet" -}}
{{- $set := false -}}
{{- range $m := .maps -}}
{{- if hasKey ($m | default dict) $.name -}}{{- $set = not (kindIs "invalid" (index $m $.name)) -}}{{- end -}}
{{- end -}}
{{- if $set -}}true{{- end -}}
{{- end -}}

{{/* Memory for one container (values.yaml, "Memory"): explicit, or
factor x flushSize + base, in MiB rounded up. Context: {explicit, flush,
factor, baseMi}. */}}
{{- define "millpond.memory" -}}
{{- if .explicit -}}
{{- .explicit -}}
{{- else -}}
{{- printf "%dMi" (add (div (add (mul .factor .flush) 1048575) 1048576) .baseMi) -}}
{{- end -}}
{{- end -}}

{{/* Checks one pipeline entry (from millpond.pipelines); renders nothing.
Context: {root, pipe}. Messages name the entry by its `where`. */}}
{{- define "millpond.validate" -}}
{{- $p := .pipe -}}
{{- $w := $p.where -}}
{{- if not $p.name -}}{{- fail (printf "%s: every entry needs a name" $w) -}}{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $p.name) -}}
{{- fail (printf "%s: name %q must be lowercase letters, digits and '-'" $w $p.name) -}}
{{- end -}}
{{- $sts := include "millpond.pipelineName" . -}}
{{- if gt (len $sts) 52 -}}
{{- fail (printf "%s: StatefulSet name %q is over 52 characters (pod labels add a hash)" $w $sts) -}}
{{- end -}}
{{- range $k := list "topic" "table" "destination" -}}
{{- if not (index $p $k) -}}{{- fail (printf "%s: %s is required" $w $k) -}}{{- end -}}
{{- end -}}
{{- if not (has $p.destination (list "ducklake" "hoglake")) -}}
{{- fail (printf "%s: destination must be ducklake or hoglake (got %q)" $w $p.destination) -}}
{{- end -}}
{{- range $k := list "replicas" "partitions" -}}
{{- if hasKey $p $k -}}
{{- $v := index $p $k -}}
{{- $least := ternary 1 0 (eq $k "partitions") -}}
{{- if not (or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) (and (kindIs "string" $v) (regexMatch "^[0-9]+$" (toString $v)))) -}}
{{- fail (printf "%s: %s must be a whole number, %d or more (got %v)" $w $k $least $v) -}}
{{- end -}}
{{- if or (lt (float64 $v) (float64 $least)) (ne (float64 (int64 $v)) (float64 $v)) -}}
{{- fail (printf "%s: %s must be a whole number, %d or more (got %v)" $w $k $least $v) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not (hasKey $p "replicas") -}}{{- fail (printf "%s: replicas is required" $w) -}}{{- end -}}
{{- if and (hasKey $p "partitions") (gt (int64 $p.replicas) (int64 $p.partitions)) -}}
{{- fail (printf "%s: replicas (%d) is more than partitions (%d): a pod past the partition count would own none" $w (int64 $p.replicas) (int64 $p.partitions)) -}}
{{- end -}}
{{- if not (default .root.Values.kafka.bootstrapServers $p.bootstrapServers) -}}
{{- fail (printf "%s: set kafka.bootstrapServers or the pipeline's bootstrapServers" $w) -}}
{{- end -}}
{{- $other := ternary "hoglake" "ducklake" (eq $p.destination "ducklake") -}}
{{- if hasKey $p $other -}}
{{- fail (printf "%s: destination is %s but the entry has a %s group" $w $p.destination $other) -}}
{{- end -}}
{{- $group := merge (dict) (index $p $p.destination | default dict) (index .root.Values $p.destination).env -}}
{{- if and (eq $p.destination "ducklake") (not $group.DUCKLAKE_RDS_HOST) -}}
{{- fail (printf "%s: DuckLake needs DUCKLAKE_RDS_HOST (ducklake.env or the pipeline's ducklake group): the embedded catalog would live in one container" $w) -}}
{{- end -}}
{{- if and (eq $p.destination "hoglake") (not $group.HOGLAKE_URL) -}}
{{- fail (printf "%s: hoglake needs HOGLAKE_URL (hoglake.env or the pipeline's hoglake group)" $w) -}}
{{- end -}}
{{- $grace := int64 .root.Values.shutdown.writerGraceSeconds -}}
{{- if le (int64 .root.Values.shutdown.terminationGracePeriodSeconds) $grace -}}
{{- fail (printf "shutdown.terminationGracePeriodSeconds must exceed shutdown.writerGraceSeconds (%d)" $grace) -}}
{{- end -}}
{{- end -}}

{{/* An httpGet probe. Context: {path, port, spec}. */}}
{{- define "millpond.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
{{- toYaml .spec | nindent 0 }}
{{- end -}}
