#!/usr/bin/env python3
"""Check the Helm chart deploy/helm/millpond by rendering it with real Helm.

Helm runs through helm-python-sdk (libhelm_c.so, Helm's Go SDK behind a C
ABI; scripts/helm_template.py). The chart is linted, rendered with
tests/helm/values-multi.yaml (several pipelines, both destinations), and
every rendered object is validated offline against the Kubernetes schemas
(kubernetes-validate, strict). The checks on the rendered objects then each
run once more against a deliberately broken copy and must fail there, so
none of them can pass vacuously. deploy/helm/original-values.yaml (the
original's map form of `pipelines`) goes through the same checks, and the
two forms of one set of pipelines must render the same objects.

Exit 0 when every check passes; prints "N passed, M failed" last.

    python tests/python/check_helm_chart.py
"""

from __future__ import annotations

import copy
import re
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import helm_template as ht  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "python"))
from helm_forms import (  # noqa: E402
    NAMESPACE,
    RELEASE,
    as_list,
    as_map,
    entries,
    forms_comparison_bites,
    map_form,
    same_render,
    templates_use_the_helper,
    with_destination,
    with_null_entry,
)
import helm_lake_metrics  # noqa: E402

VALUES = ROOT / "tests" / "helm" / "values-multi.yaml"
KUBERNETES_VERSIONS = ["1.30.0", "1.37.0"]
# The chart's rule (templates/_helpers.tpl, millpond.secretNamePattern).
SECRET_NAME = re.compile(r"(^|_)(SECRET|PASSWORD|PASSWD|TOKEN|KEY|CREDENTIALS?)(_|$)")
FILE_NAME = re.compile(r"_(LOCATION|FILE|PATH)$")
LAKE_CREDENTIALS = re.compile(r"^(DUCKLAKE_RDS_PASSWORD|DUCKDB_S3_|HOGLAKE_S3_(ACCESS|SECRET)_KEY)")
SEND_DEADLINE_S = 420  # ingest's MILLPOND_WRITER_SEND_DEADLINE_S default
Docs = list[dict[str, Any]]


def kind(docs: Docs, k: str) -> Docs:
    return [d for d in docs if d["kind"] == k]


def containers(sts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in sts["spec"]["template"]["spec"]["containers"]}


def env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def env_value(container: dict[str, Any], name: str) -> str | None:
    return env(container).get(name, {}).get("value")


def mebibytes(quantity: str) -> int:
    units = {"Mi": 1, "Gi": 1024}
    return int(quantity[:-2]) * units[quantity[-2:]]


def pipeline_sts(docs: Docs, values: dict[str, Any]):
    by_name = {d["metadata"]["name"]: d for d in kind(docs, "StatefulSet")}
    for p in entries(values):
        yield p, by_name.get(f"{RELEASE}-{p['name']}")


# Checks on the rendered objects: each returns its problems (empty = pass).


def one_statefulset_per_pipeline(docs: Docs, values: dict[str, Any]) -> list[str]:
    want = sorted(f"{RELEASE}-{p['name']}" for p in entries(values))
    problems = []
    for k in ("StatefulSet", "Service", "PodDisruptionBudget"):
        got = sorted(d["metadata"]["name"] for d in kind(docs, k))
        if got != want:
            problems.append(f"{k}s {got}, want {want}")
    services = {d["metadata"]["name"]: d for d in kind(docs, "Service")}
    for sts in kind(docs, "StatefulSet"):
        name, spec = sts["metadata"]["name"], sts["spec"]
        labels = spec["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
            problems.append(f"{name}: selector does not match the pod labels")
        svc = services.get(spec["serviceName"], {}).get("spec", {})
        if svc.get("clusterIP") != "None" or svc.get("selector") != spec["selector"]["matchLabels"]:
            problems.append(f"{name}: serviceName is not a headless Service selecting its pods")
    return problems


def two_containers_per_pod(docs: Docs, values: dict[str, Any]) -> list[str]:
    return [
        f"{s['metadata']['name']}: containers {list(containers(s))}"
        for s in kind(docs, "StatefulSet")
        if list(containers(s)) != ["ingest", "writer"]
    ]


def replica_count_is_replicas(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for p, sts in pipeline_sts(docs, values):
        if sts is None:
            problems.append(f"{p['name']}: no StatefulSet")
            continue
        rc = env_value(containers(sts)["ingest"], "REPLICA_COUNT")
        if not (rc == str(p["replicas"]) == str(sts["spec"]["replicas"])):
            problems.append(f"{p['name']}: REPLICA_COUNT {rc}, replicas {sts['spec']['replicas']}, values {p['replicas']}")
    return problems


def pod_name_from_downward_api(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for sts in kind(docs, "StatefulSet"):
        for c in containers(sts).values():
            # The hoglake writer holds no leases and reads no POD_NAME.
            if c["name"] == "writer" and env_value(c, "MILLPOND_DESTINATION") == "hoglake":
                if "POD_NAME" in env(c):
                    problems.append(f"{sts['metadata']['name']}/writer: POD_NAME set on the hoglake writer, which does not read it")
                continue
            ref = env(c).get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {})
            if ref.get("fieldPath") != "metadata.name":
                problems.append(f"{sts['metadata']['name']}/{c['name']}: POD_NAME is not the pod's name")
    return problems


def pod_uid_from_downward_api(docs: Docs, values: dict[str, Any]) -> list[str]:
    """The DuckLake writer's lease owner includes the pod's UID, so a
    replacement pod with the same name never shares its leases."""
    problems = []
    for sts in kind(docs, "StatefulSet"):
        c = containers(sts)["writer"]
        if env_value(c, "MILLPOND_DESTINATION") == "hoglake":
            continue
        ref = env(c).get("POD_UID", {}).get("valueFrom", {}).get("fieldRef", {})
        if ref.get("fieldPath") != "metadata.uid":
            problems.append(f"{sts['metadata']['name']}/writer: POD_UID is not the pod's UID")
    return problems


def one_scrape_per_pod(docs: Docs, values: dict[str, Any]) -> list[str]:
    """Prometheus scrapes ingest's port, which appends the writer's series
    read from the writer's own HTTP port in the pod."""
    problems = []
    for sts in kind(docs, "StatefulSet"):
        name, cs = sts["metadata"]["name"], containers(sts)
        port = {p["name"]: p["containerPort"] for c in cs.values() for p in c.get("ports", [])}
        notes = sts["spec"]["template"]["metadata"].get("annotations", {})
        if notes.get("prometheus.io/scrape") != "true" or notes.get("prometheus.io/port") != str(port.get("metrics")):
            problems.append(f"{name}: scrape annotations {notes} do not point at ingest's port {port.get('metrics')}")
        url = env_value(cs["ingest"], "MILLPOND_WRITER_METRICS_URL") or ""
        if url != f"http://127.0.0.1:{port.get('writer-metrics')}/metrics":
            problems.append(f"{name}: ingest appends {url!r}, not the writer's port {port.get('writer-metrics')}")
    return problems


def selectors_pick_only_pipeline_pods(docs: Docs, values: dict[str, Any]) -> list[str]:
    """A Service or PDB selects its pipeline's StatefulSet pods, never a
    maintenance or exporter pod."""
    problems = []
    pods = []
    for cj in kind(docs, "CronJob"):
        pods.append((cj["metadata"]["name"], cj["spec"]["jobTemplate"]["spec"]["template"]["metadata"].get("labels", {})))
    for d in kind(docs, "Deployment"):
        pods.append((d["metadata"]["name"], d["spec"]["template"]["metadata"].get("labels", {})))
    for obj in kind(docs, "Service") + kind(docs, "PodDisruptionBudget"):
        spec = obj["spec"]
        selector = spec.get("selector", {})
        selector = selector.get("matchLabels", selector) if obj["kind"] == "PodDisruptionBudget" else selector
        for name, labels in pods:
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                problems.append(f"{obj['kind']} {obj['metadata']['name']} selects the pods of {name}")
    return problems


def writer_on_loopback(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for sts in kind(docs, "StatefulSet"):
        name, cs = sts["metadata"]["name"], containers(sts)
        listen = env_value(cs["writer"], "MILLPOND_WRITER_ADDR") or ""
        if not listen.startswith("127.0.0.1:"):
            problems.append(f"{name}: writer listens on {listen!r}")
        if env_value(cs["ingest"], "MILLPOND_WRITER_ADDR") != listen:
            problems.append(f"{name}: ingest sends to {env_value(cs['ingest'], 'MILLPOND_WRITER_ADDR')!r}, writer on {listen!r}")
        flight = int(listen.rpartition(":")[2] or 0)
        if any(p["containerPort"] == flight for c in cs.values() for p in c.get("ports", [])):
            problems.append(f"{name}: the Flight port is declared as a container port")
    return problems


def destination_wiring(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for p, sts in pipeline_sts(docs, values):
        if sts is None:
            continue
        cs, dest = containers(sts), p["destination"]
        table_var = "DUCKLAKE_TABLE" if dest == "ducklake" else "HOGLAKE_TABLE"
        repo = values["images"]["writer"][dest]["repository"]
        if not cs["writer"]["image"].startswith(repo + ":"):
            problems.append(f"{p['name']}: writer image {cs['writer']['image']}, want {repo}")
        for c in cs.values():
            if env_value(c, "MILLPOND_DESTINATION") != dest or env_value(c, table_var) != p["table"]:
                problems.append(f"{p['name']}/{c['name']}: destination or {table_var} differs from values")
        if env_value(cs["ingest"], "KAFKA_TOPIC") != p["topic"]:
            problems.append(f"{p['name']}: KAFKA_TOPIC differs from values")
    return problems


def writer_spool_on_a_bounded_volume(docs: Docs, values: dict[str, Any]) -> list[str]:
    """A DuckLake writer's /tmp (its files waiting for their upload) is an
    emptyDir of the set size, or of 2 x FLUSH_SIZE + 128Mi."""
    problems = []
    for p, sts in pipeline_sts(docs, values):
        if sts is None or p["destination"] != "ducklake":
            continue
        pod = sts["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m["name"] for m in containers(sts)["writer"].get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        empty = volumes.get(mounts.get("/tmp", ""), {}).get("emptyDir")
        if empty is None:
            problems.append(f"{p['name']}: the writer's /tmp is no emptyDir")
        else:
            flush = int(env_value(containers(sts)["ingest"], "FLUSH_SIZE"))
            want = values.get("writer", {}).get("spoolSizeLimit") or derived_mi(2, flush, 128)
            if empty.get("sizeLimit") != want:
                problems.append(f"{p['name']}: /tmp sizeLimit {empty.get('sizeLimit')!r}, want {want!r}")
    return problems


def probes(docs: Docs, values: dict[str, Any]) -> list[str]:
    want = {
        "ingest": {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"},
        "writer": {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"},
    }
    port_env = {"ingest": "MILLPOND_HTTP_PORT", "writer": "MILLPOND_WRITER_HTTP_PORT"}
    problems = []
    for sts in kind(docs, "StatefulSet"):
        for cname, c in containers(sts).items():
            where = f"{sts['metadata']['name']}/{cname}"
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for probe, path in want.get(cname, {}).items():
                get = c.get(probe, {}).get("httpGet", {})
                port = ports.get(get.get("port"), get.get("port"))
                if get.get("path") != path or str(port) != env_value(c, port_env[cname]):
                    problems.append(f"{where}: {probe} is not {path} on the {port_env[cname]} port")
        start = containers(sts)["ingest"].get("startupProbe", {})
        deadline = int(env_value(containers(sts)["ingest"], "MILLPOND_WRITER_SEND_DEADLINE_S") or SEND_DEADLINE_S)
        budget = start.get("periodSeconds", 10) * start.get("failureThreshold", 3)
        if budget < deadline + 90:
            problems.append(f"{sts['metadata']['name']}: ingest startup budget {budget}s < send deadline {deadline}s + 90s")
    return problems


def termination_grace(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for sts in kind(docs, "StatefulSet"):
        pod = sts["spec"]["template"]["spec"]
        grace = int(env_value(containers(sts)["writer"], "MILLPOND_WRITER_SHUTDOWN_GRACE_S") or 60)
        if pod.get("terminationGracePeriodSeconds", 30) <= grace:
            problems.append(f"{sts['metadata']['name']}: terminationGracePeriodSeconds {pod.get('terminationGracePeriodSeconds')} <= writer grace {grace}")
    return problems


def workloads(docs: Docs) -> Docs:
    """StatefulSets, Deployments and the CronJobs' pod specs, as objects with spec.template."""
    out = kind(docs, "StatefulSet") + kind(docs, "Deployment")
    for cj in kind(docs, "CronJob"):
        out.append({"metadata": cj["metadata"], "spec": {"template": cj["spec"]["jobTemplate"]["spec"]["template"]}})
    return out


def no_inline_secrets(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for sts in workloads(docs):
        for c in containers(sts).values():
            for name, e in env(c).items():
                where = f"{sts['metadata']['name']}/{c['name']} {name}"
                if name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
                    problems.append(f"{where}: AWS_* keys shadow the IRSA role")
                if SECRET_NAME.search(name) and not FILE_NAME.search(name):
                    if "value" in e or "secretKeyRef" not in e.get("valueFrom", {}):
                        problems.append(f"{where}: a credential not from a secretKeyRef")
    return problems


def maintenance_per_ducklake_pipeline(docs: Docs, values: dict[str, Any]) -> list[str]:
    """One CronJob per DuckLake pipeline, running millpond-lake from the DuckLake
    writer image against that pipeline's table with the writer's lake settings."""
    problems = []
    jobs = {cj["metadata"]["name"]: cj for cj in kind(docs, "CronJob")}
    ducklake = [p for p in entries(values) if p["destination"] == "ducklake"]
    if len(jobs) != len(ducklake):
        problems.append(f"{len(jobs)} CronJobs for {len(ducklake)} DuckLake pipelines")
    by_table = {}
    for cj in jobs.values():
        c = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        by_table[env_value(c, "DUCKLAKE_TABLE")] = (cj, c)
    for p in ducklake:
        found = by_table.get(p["table"])
        if not found:
            problems.append(f"{p['name']}: no CronJob for table {p['table']}")
            continue
        cj, c = found
        if cj["spec"].get("concurrencyPolicy") != "Forbid":
            problems.append(f"{cj['metadata']['name']}: runs may overlap")
        if "millpond-writer-ducklake" not in c["image"] or c.get("command") != ["/usr/local/bin/millpond-lake"]:
            problems.append(f"{cj['metadata']['name']}: not millpond-lake from the DuckLake writer image")
        if "--yes" not in c.get("args", []):
            problems.append(f"{cj['metadata']['name']}: destructive commands need --yes without a terminal")
        sts = next(s for s in kind(docs, "StatefulSet") if env_value(containers(s)["writer"], "DUCKLAKE_TABLE") == p["table"])
        writer = env(containers(sts)["writer"])
        for name in ("DUCKLAKE_RDS_HOST", "DUCKLAKE_DATA_PATH", "DUCKDB_S3_SECRET_ACCESS_KEY"):
            if writer.get(name) != env(c).get(name):
                problems.append(f"{cj['metadata']['name']}: {name} differs from the writer's")
    return problems


SCHEDULES = [
    {"name": "hourly", "schedule": "7 * * * *", "chain": ["flush-inlined", "compact-to-tier-1", "cleanup-all-safe"]},
    {"name": "nightly", "schedule": "17 3 * * *", "args": ["expire-snapshots", "--older-than", "7d", "--yes"]},
    {"name": "retention", "schedule": "37 4 * * *", "chain": ["drop-partitions", "expire-7d", "cleanup-all-safe"]},
]


def with_schedules(values: dict[str, Any]) -> dict[str, Any]:
    """values with maintenance.schedules: a list of schedules, each with its own command chain."""
    v = copy.deepcopy(values)
    v.setdefault("maintenance", {}).update(
        enabled=True, schedules=copy.deepcopy(SCHEDULES), reportPushUrl=REPORT_URL, retention=RETENTION
    )
    return v


# The retention recipes' default, passed to every maintenance run.
RETENTION = "90d"

# A run's report, one Pushgateway group per pipeline and schedule.
REPORT_URL = "http://pushgateway:9091/metrics/job/millpond-lake/pipeline/{pipeline}/schedule/{schedule}"


def maintenance_schedules(docs: Docs, values: dict[str, Any]) -> list[str]:
    """With maintenance.schedules, each DuckLake pipeline gets one CronJob per
    schedule: its cron line, and its chain run as `millpond-lake --yes run ...`
    (or its args), with the writer's lake settings."""
    problems = []
    ducklake = [p for p in values["pipelines"] if p["destination"] == "ducklake"]
    jobs = kind(docs, "CronJob")
    if len(jobs) != len(ducklake) * len(SCHEDULES):
        problems.append(f"{len(jobs)} CronJobs for {len(ducklake)} DuckLake pipelines x {len(SCHEDULES)} schedules")
    for p in ducklake:
        for sched in SCHEDULES:
            want = ["--yes", "run", *sched["chain"]] if "chain" in sched else sched["args"]
            found = [
                cj
                for cj in jobs
                if cj["metadata"]["name"].endswith(f"-maintain-{sched['name']}")
                and env_value(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0], "DUCKLAKE_TABLE") == p["table"]
            ]
            if len(found) != 1:
                problems.append(f"{p['name']}: {len(found)} CronJobs for schedule {sched['name']}")
                continue
            cj = found[0]
            c = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            if cj["spec"]["schedule"] != sched["schedule"]:
                problems.append(f"{cj['metadata']['name']}: schedule {cj['spec']['schedule']!r}, want {sched['schedule']!r}")
            if c.get("args") != want:
                problems.append(f"{cj['metadata']['name']}: args {c.get('args')}, want {want}")
            if cj["spec"].get("concurrencyPolicy") != "Forbid":
                problems.append(f"{cj['metadata']['name']}: runs may overlap")
            report = REPORT_URL.replace("{pipeline}", p["name"]).replace("{schedule}", f"maintain-{sched['name']}")
            if env_value(c, "MILLPOND_LAKE_REPORT_PUSH_URL") != report:
                problems.append(f"{cj['metadata']['name']}: report URL {env_value(c, 'MILLPOND_LAKE_REPORT_PUSH_URL')!r}, want {report!r}")
            if env_value(c, "MILLPOND_LAKE_RETENTION") != RETENTION:
                problems.append(f"{cj['metadata']['name']}: retention {env_value(c, 'MILLPOND_LAKE_RETENTION')!r}, want {RETENTION!r}")
    return problems


def break_schedules(docs: Docs) -> None:
    c = kind(docs, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    c["args"] = ["maintain", "--yes"]


def credentials_isolated(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for sts in kind(docs, "StatefulSet"):
        cs = containers(sts)
        problems += [f"{sts['metadata']['name']}/ingest has {n}" for n in env(cs["ingest"]) if LAKE_CREDENTIALS.match(n)]
        problems += [f"{sts['metadata']['name']}/writer has {n}" for n in env(cs["writer"]) if n.startswith("KAFKA_")]
    return problems


def derived_mi(factor: int, flush: int, base_mi: int) -> str:
    return f"{-(-factor * flush // 2**20) + base_mi}Mi"


def memory_follows_flush_size(docs: Docs, values: dict[str, Any]) -> list[str]:
    """values.yaml, "Memory": 2 x FLUSH_SIZE + 100Mi for ingest (3 x with
    MILLPOND_SORT_BY), + 200Mi for the writer (+ 1280Mi into a partitioned
    DuckLake table), limit = request, unless the values set it."""
    problems = []
    for p, sts in pipeline_sts(docs, values):
        if sts is None:
            continue
        cs = containers(sts)
        flush = int(env_value(cs["ingest"], "FLUSH_SIZE"))
        sorted_ = "MILLPOND_SORT_BY" in env(cs["ingest"])
        partitioned = "DUCKLAKE_PARTITION_BY" in env(cs["writer"]) and p["destination"] == "ducklake"
        derived = {"ingest": derived_mi(3 if sorted_ else 2, flush, 100),
                   "writer": derived_mi(2, flush, 1280 if partitioned else 200)}
        for cname, c in cs.items():
            res = c.get("resources", {})
            limit, request = res.get("limits", {}).get("memory"), res.get("requests", {}).get("memory")
            explicit = p.get("resources", {}).get(cname, {}).get("memory")
            want = explicit or derived[cname]
            if limit != want or request != limit:
                problems.append(f"{p['name']}/{cname}: memory request {request} limit {limit}, want both {want}")
            if not explicit and mebibytes(limit or "0Mi") * 2**20 < 2 * flush:
                problems.append(f"{p['name']}/{cname}: limit below two flushes")
    return problems


def partitions_annotated(docs: Docs, values: dict[str, Any]) -> list[str]:
    """An entry's `partitions` (the original's key) is on its StatefulSet,
    and only there: ingest reads the count from the broker."""
    problems = []
    for p, sts in pipeline_sts(docs, values):
        if sts is None:
            continue
        got = sts["metadata"].get("annotations", {}).get("millpond/partitions")
        want = str(p["partitions"]) if "partitions" in p else None
        if got != want:
            problems.append(f"{p['name']}: millpond/partitions {got!r}, want {want!r}")
    return problems


def schemas_validate(docs: Docs, values: dict[str, Any]) -> list[str]:
    problems = []
    for version in KUBERNETES_VERSIONS:
        for d in docs:
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except Exception as err:  # noqa: BLE001 - every refusal is a finding
                first = str(err).splitlines()[0]
                problems.append(f"{version} {d.get('kind')}/{d.get('metadata', {}).get('name')}: {first}")
    return problems


RENDERED_CHECKS: list[Callable[[Docs, dict[str, Any]], list[str]]] = [
    one_statefulset_per_pipeline,
    two_containers_per_pod,
    replica_count_is_replicas,
    pod_name_from_downward_api,
    pod_uid_from_downward_api,
    one_scrape_per_pod,
    selectors_pick_only_pipeline_pods,
    writer_on_loopback,
    destination_wiring,
    writer_spool_on_a_bounded_volume,
    probes,
    termination_grace,
    no_inline_secrets,
    credentials_isolated,
    memory_follows_flush_size,
    partitions_annotated,
    schemas_validate,
    maintenance_per_ducklake_pipeline,
]


# Breakages, one per rendered check: each must make its check fail.


def first_sts(docs: Docs) -> dict[str, Any]:
    return kind(docs, "StatefulSet")[0]


def set_env(c: dict[str, Any], name: str, entry: dict[str, Any]) -> None:
    c["env"] = [e for e in c.get("env", []) if e["name"] != name] + [{"name": name, **entry}]


def break_count(docs: Docs) -> None:
    set_env(containers(first_sts(docs))["ingest"], "REPLICA_COUNT", {"value": "99"})


def break_probe(docs: Docs) -> None:
    del containers(first_sts(docs))["ingest"]["startupProbe"]


def break_grace(docs: Docs) -> None:
    first_sts(docs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30


def break_memory(docs: Docs) -> None:
    containers(first_sts(docs))["ingest"]["resources"]["limits"]["memory"] = "128Mi"


def break_schema(docs: Docs) -> None:
    containers(first_sts(docs))["writer"]["livenessProbe"]["periodSecond"] = 5


BREAKS: dict[str, Callable[[Docs], None]] = {
    "one_statefulset_per_pipeline": lambda d: d.remove(first_sts(d)),
    "two_containers_per_pod": lambda d: first_sts(d)["spec"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "busybox"}
    ),
    "replica_count_is_replicas": break_count,
    "pod_name_from_downward_api": lambda d: set_env(containers(first_sts(d))["writer"], "POD_NAME", {"value": "millpond-0"}),
    "pod_uid_from_downward_api": lambda d: set_env(containers(first_sts(d))["writer"], "POD_UID", {"value": "x"}),
    "one_scrape_per_pod": lambda d: set_env(
        containers(first_sts(d))["ingest"], "MILLPOND_WRITER_METRICS_URL", {"value": "http://127.0.0.1:8000/metrics"}
    ),
    "selectors_pick_only_pipeline_pods": lambda d: kind(d, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["metadata"].update(
        labels=dict(kind(d, "Service")[0]["spec"]["selector"])
    ),
    "writer_on_loopback": lambda d: set_env(containers(first_sts(d))["writer"], "MILLPOND_WRITER_ADDR", {"value": "0.0.0.0:50051"}),
    "destination_wiring": lambda d: containers(first_sts(d))["writer"].update(image="registry.test/millpond-writer-hoglake:1"),
    "probes": break_probe,
    "writer_spool_on_a_bounded_volume": lambda d: first_sts(d)["spec"]["template"]["spec"].pop("volumes"),
    "termination_grace": break_grace,
    "no_inline_secrets": lambda d: set_env(containers(first_sts(d))["writer"], "DUCKLAKE_RDS_PASSWORD", {"value": "hunter2"}),
    "credentials_isolated": lambda d: set_env(
        containers(first_sts(d))["ingest"], "DUCKDB_S3_SECRET_ACCESS_KEY", {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    ),
    "memory_follows_flush_size": break_memory,
    "partitions_annotated": lambda d: first_sts(d)["metadata"].update(annotations={"millpond/partitions": "1"}),
    "schemas_validate": break_schema,
    "maintenance_per_ducklake_pipeline": lambda d: set_env(
        kind(d, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0],
        "DUCKLAKE_DATA_PATH",
        {"value": "s3://elsewhere/"},
    ),
}

# Values the chart itself must refuse at render, with the words it must say.
REFUSED_VALUES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("inline password", lambda v: v["ducklake"]["env"].update(DUCKLAKE_RDS_PASSWORD="hunter2"), "holds a credential"),
    ("inline S3 key", lambda v: v["pipelines"][2]["hoglake"].update(HOGLAKE_S3_SECRET_KEY="abc"), "holds a credential"),
    ("REPLICA_COUNT in env", lambda v: v["pipelines"][0]["ingestEnv"].update(REPLICA_COUNT="3"), "set by the chart"),
    ("AWS keys", lambda v: v["writer"]["env"].update(AWS_SECRET_ACCESS_KEY={"secretKeyRef": {"name": "a", "key": "b"}}), "IRSA"),
    ("unknown destination", lambda v: v["pipelines"][0].update(destination="s3"), "ducklake or hoglake"),
    ("duplicate pipeline", lambda v: v["pipelines"][1].update(name="events"), "used twice"),
    ("grace too short", lambda v: v["shutdown"].update(terminationGracePeriodSeconds=60), "must exceed"),
    ("embedded DuckLake", lambda v: v["ducklake"]["env"].pop("DUCKLAKE_RDS_HOST"), "DUCKLAKE_RDS_HOST"),
    ("fractional replicas", lambda v: v["pipelines"][0].update(replicas=1.5), "whole number"),
    (
        "maintenance schedule named twice",
        lambda v: v["maintenance"].update(schedules=[*SCHEDULES, SCHEDULES[0]]),
        "is used twice",
    ),
    (
        "maintenance schedule with chain and args",
        lambda v: v["maintenance"].update(schedules=[{**SCHEDULES[0], "args": ["fsck"]}]),
        "exactly one of chain",
    ),
    (
        "maintenance schedule without a cron line",
        lambda v: v["maintenance"].update(schedules=[{"name": "x", "chain": ["fsck"]}]),
        "schedule is required",
    ),
    ("replicas as words", lambda v: v["pipelines"][0].update(replicas="eight"), "pipelines[events]: replicas must be a whole number"),
    ("zero partitions", lambda v: v["pipelines"][0].update(partitions=0), "pipelines[events]: partitions must be a whole number, 1 or more"),
    ("replicas over partitions", lambda v: v["pipelines"][0].update(partitions=4), "pipelines[events]: replicas (8) is more than partitions (4)"),
    ("pipelines neither list nor map", lambda v: v.update(pipelines="events"), "pipelines: a list of entries or a map of name: entry"),
    ("list entry not a map", lambda v: v["pipelines"].insert(0, "events"), "pipelines[0]: an entry is a map"),
    # The original's map form: messages name the entry as pipelines.<key>.
    ("map entry with a name too", lambda v: map_form(v)["events"].update(name="events"), "pipelines.events: has a name"),
    ("map entry not a map", lambda v: map_form(v).update(events="events_json"), "pipelines.events: an entry of the map form is a map"),
    ("map entry without a topic", lambda v: map_form(v)["events"].pop("topic"), "pipelines.events: topic is required"),
    ("map key not a DNS label", lambda v: map_form(v).update(Events=map_form(v).pop("events")), 'pipelines.Events: name "Events" must be lowercase'),
    ("map entry, replicas over partitions", lambda v: map_form(v)["events"].update(partitions=2), "pipelines.events: replicas (8) is more than partitions (2)"),
    ("map entry, inline password", lambda v: map_form(v)["events"]["ducklake"].update(DUCKLAKE_RDS_PASSWORD="x"), "pipelines.events writer: DUCKLAKE_RDS_PASSWORD holds a credential"),
]


def render(values: dict[str, Any]) -> Docs:
    text = ht.template(values, RELEASE, NAMESPACE)
    return [d for d in yaml.safe_load_all(text) if d]


def main() -> int:
    print(ht.versions(), flush=True)
    values = ht.load_values([VALUES])
    results: list[tuple[str, str | None]] = []

    def check(name: str, fn: Callable[[], list[str]]) -> None:
        try:
            problems = fn()
        except Exception as err:  # noqa: BLE001 - any error is a failed check, with its trace
            problems = [f"{type(err).__name__}: {err}\n{traceback.format_exc()}"]
        results.append((name, "; ".join(problems) or None))
        print(("FAIL " if problems else "PASS ") + name + (": " + "; ".join(problems) if problems else ""), flush=True)

    check("lint: chart defaults", lambda: ht.lint({}))
    check("lint: values-multi", lambda: ht.lint(values))
    check("lint: catches a broken template", lint_catches_broken_template)
    docs = render(values)
    ducklake_pipelines = sum(p["destination"] == "ducklake" for p in entries(values))
    want = 3 * len(entries(values)) + 1 + (ducklake_pipelines if values.get("maintenance", {}).get("enabled") else 0)
    check("render: objects", lambda: [] if len(docs) == want else [f"{len(docs)} objects, want {want}"])
    check("render: chart defaults make no objects", lambda: [f"{len(render({}))} objects"] if render({}) else [])
    for fn in RENDERED_CHECKS:
        check(fn.__name__, lambda fn=fn: fn(docs, values))
        check(f"{fn.__name__} fails on a broken render", lambda fn=fn: bites(fn, docs, values))
    sched_values = with_schedules(values)
    sched_docs = render(sched_values)
    check("maintenance_schedules", lambda: maintenance_schedules(sched_docs, sched_values))
    check("maintenance_schedules fails on a broken render", lambda: bites_with(maintenance_schedules, break_schedules, sched_docs, sched_values))
    check("maintenance_schedules renders valid objects", lambda: schemas_validate(sched_docs, sched_values))
    for label, mutate, words in REFUSED_VALUES:
        check(f"refused: {label}", lambda mutate=mutate, words=words: refused(values, mutate, words))
    original = ht.load_values([ht.ORIGINAL_VALUES])
    check("lint: original-values (map form)", lambda: ht.lint(original))
    original_docs = render(original)
    check("original-values: objects", lambda: [] if len(original_docs) == 3 * len(entries(original)) + 1 else [f"{len(original_docs)} objects"])
    for fn in RENDERED_CHECKS:
        if fn is maintenance_per_ducklake_pipeline:
            continue  # the original's file enables no maintenance
        check(f"original-values: {fn.__name__}", lambda fn=fn: fn(original_docs, original))
    check("forms: values-multi as a map renders as the list", lambda: same_render(values, as_map(values)))
    check("forms: original-values as a list renders as the map", lambda: same_render(original, as_list(original)))
    check("forms: destination left out is ducklake", lambda: same_render(original, with_destination(original)))
    check("forms: a null map entry is no pipeline", lambda: same_render(original, with_null_entry(original)))
    check("forms: the comparison sees a difference", forms_comparison_bites)
    check("forms: templates read pipelines through millpond.pipelines", templates_use_the_helper)
    for values_file, output in ht.EXAMPLES.items():
        check(f"{output.relative_to(ROOT)} is the render of {values_file.name}", lambda v=values_file, o=output: example_is_current(v, o))
    for name, fn in helm_lake_metrics.checks(render, values, [schemas_validate, no_inline_secrets]):
        check(name, fn)
    check("lint: lake metrics on", lambda: ht.lint(helm_lake_metrics.enabled(values)))

    failed = [name for name, error in results if error]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def bites(fn: Callable[[Docs, dict[str, Any]], list[str]], docs: Docs, values: dict[str, Any]) -> list[str]:
    broken = copy.deepcopy(docs)
    BREAKS[fn.__name__](broken)
    return [] if fn(broken, values) else ["passed on a broken render"]


def bites_with(
    fn: Callable[[Docs, dict[str, Any]], list[str]], breaker: Callable[[Docs], None], docs: Docs, values: dict[str, Any]
) -> list[str]:
    broken = copy.deepcopy(docs)
    breaker(broken)
    return [] if fn(broken, values) else ["passed on a broken render"]


def refused(values: dict[str, Any], mutate: Callable[[dict[str, Any]], None], words: str) -> list[str]:
    bad = copy.deepcopy(values)
    mutate(bad)
    try:
        render(bad)
    except Exception as err:  # noqa: BLE001 - the render error is what we want
        return [] if words in str(err) else [f"refused, but without {words!r}: {err}"]
    return ["rendered"]


def lint_catches_broken_template() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "millpond"
        shutil.copytree(ht.CHART, chart)
        (chart / "templates" / "broken.yaml").write_text("kind: {{ if }}\n")
        found = ht.lint({}, chart)
    return [] if any("broken.yaml" in f for f in found) else [f"lint found {found}"]


def example_is_current(values_file: Path, output: Path) -> list[str]:
    if output.read_text() != ht.example(values_file):
        return ["stale: run scripts/helm_template.py --write-example"]
    return []




if __name__ == "__main__":
    sys.exit(main())
