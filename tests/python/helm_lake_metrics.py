"""The chart's lake-state metrics (templates/lake-metrics.yaml), checked by
check_helm_chart.py: off by default; when on, an exporter Deployment (with
Prometheus scrape annotations) and a push CronJob per chosen DuckLake
pipeline, running `millpond-lake metrics` from the DuckLake writer image
with the writer's lake settings. Each check on the render also runs against
a broken copy and must fail there; values the chart must refuse are refused
with the words given.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Docs = list[dict[str, Any]]
Check = Callable[[Docs, dict[str, Any]], list[str]]

PUSH_URL = "http://pushgateway:9091/metrics/job/millpond_lake/pipeline/{pipeline}"
LAKE_SETTINGS = ("DUCKLAKE_RDS_HOST", "DUCKLAKE_RDS_PASSWORD", "DUCKLAKE_DATA_PATH", "DUCKDB_S3_SECRET_ACCESS_KEY")


def enabled(values: dict[str, Any], **over: Any) -> dict[str, Any]:
    """`values` with both ways on (every DuckLake pipeline unless `pipelines`)."""
    v = copy.deepcopy(values)
    v["lakeMetrics"] = {
        "exporter": {"enabled": True, "port": 9102, "intervalSeconds": 30},
        "push": {"enabled": True, "url": PUSH_URL},
        **over,
    }
    return v


def lake_metrics(docs: Docs, k: str) -> Docs:
    return [d for d in docs if d["kind"] == k and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "lake-metrics"]


def pod(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["jobTemplate"]["spec"]["template"] if d["kind"] == "CronJob" else d["spec"]["template"]


def container(d: dict[str, Any]) -> dict[str, Any]:
    return pod(d)["spec"]["containers"][0]


def env(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def chosen(values: dict[str, Any]) -> list[dict[str, Any]]:
    names = values["lakeMetrics"].get("pipelines") or []
    return [p for p in values["pipelines"] if p["destination"] == "ducklake" and (not names or p["name"] in names)]


def writer_env(docs: Docs, table: str) -> dict[str, dict[str, Any]]:
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        for c in sts["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "writer" and env(c).get("DUCKLAKE_TABLE", {}).get("value") == table:
                return env(c)
    return {}


def same_lake(d: dict[str, Any], docs: Docs, table: str) -> list[str]:
    """Runs millpond-lake from the DuckLake writer image on the writer's catalog."""
    c, name = container(d), d["metadata"]["name"]
    problems = []
    if "millpond-writer-ducklake" not in c["image"] or c.get("command") != ["/usr/local/bin/millpond-lake"]:
        problems.append(f"{name}: not millpond-lake from the DuckLake writer image")
    if env(c).get("DUCKLAKE_TABLE", {}).get("value") != table:
        problems.append(f"{name}: DUCKLAKE_TABLE is not {table}")
    writer = writer_env(docs, table)
    for var in LAKE_SETTINGS:
        if writer.get(var) != env(c).get(var):
            problems.append(f"{name}: {var} differs from the writer's")
    return problems


def by_table(ds: Docs) -> dict[str, dict[str, Any]]:
    return {env(container(d)).get("DUCKLAKE_TABLE", {}).get("value"): d for d in ds}


def exporter_per_pipeline(docs: Docs, values: dict[str, Any]) -> list[str]:
    """One Deployment per chosen pipeline, serving `millpond-lake metrics` on the
    scraped port, probed on /healthz and /readyz there."""
    deployments, want = lake_metrics(docs, "Deployment"), chosen(values)
    problems = [] if len(deployments) == len(want) else [f"{len(deployments)} exporters for {len(want)} pipelines"]
    found = by_table(deployments)
    port = str(values["lakeMetrics"]["exporter"]["port"])
    for p in want:
        d = found.get(p["table"])
        if d is None:
            problems.append(f"{p['name']}: no exporter")
            continue
        name, c, e = d["metadata"]["name"], container(d), env(container(d))
        problems += same_lake(d, docs, p["table"])
        if c.get("args") != ["metrics"] or d["spec"].get("replicas") != 1:
            problems.append(f"{name}: not one replica of `metrics`")
        notes = pod(d)["metadata"].get("annotations", {})
        declared = {str(x["containerPort"]) for x in c.get("ports", [])}
        served = e.get("DUCKLAKE_METRICS_PORT", {}).get("value")
        if notes.get("prometheus.io/scrape") != "true" or notes.get("prometheus.io/path") != "/metrics":
            problems.append(f"{name}: no scrape annotations for /metrics")
        if not (notes.get("prometheus.io/port") == served == port and declared == {port}):
            problems.append(f"{name}: scraped port {notes.get('prometheus.io/port')}, served {served}, declared {declared}, values {port}")
        interval = str(values["lakeMetrics"]["exporter"]["intervalSeconds"])
        if e.get("DUCKLAKE_METRICS_INTERVAL_S", {}).get("value") != interval:
            problems.append(f"{name}: DUCKLAKE_METRICS_INTERVAL_S is not {interval}")
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = c.get(probe, {}).get("httpGet", {})
            if get.get("path") != path or get.get("port") not in ("metrics", int(port)):
                problems.append(f"{name}: {probe} is not {path} on the metrics port")
    return problems


def push_per_pipeline(docs: Docs, values: dict[str, Any]) -> list[str]:
    """One CronJob per chosen pipeline running `metrics --once`, pushing to the
    URL with {pipeline} filled in, never two runs at once."""
    jobs, want = lake_metrics(docs, "CronJob"), chosen(values)
    problems = [] if len(jobs) == len(want) else [f"{len(jobs)} push CronJobs for {len(want)} pipelines"]
    found = by_table(jobs)
    for p in want:
        cj = found.get(p["table"])
        if cj is None:
            problems.append(f"{p['name']}: no push CronJob")
            continue
        name, c = cj["metadata"]["name"], container(cj)
        problems += same_lake(cj, docs, p["table"])
        if c.get("args") != ["metrics", "--once"]:
            problems.append(f"{name}: args {c.get('args')}")
        url = env(c).get("DUCKLAKE_METRICS_PUSH_URL", {}).get("value")
        if url != values["lakeMetrics"]["push"]["url"].replace("{pipeline}", p["name"]):
            problems.append(f"{name}: pushes to {url!r}")
        if cj["spec"].get("concurrencyPolicy") != "Forbid":
            problems.append(f"{name}: runs may overlap")
    return problems


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pods_apart(docs: Docs, values: dict[str, Any]) -> list[str]:
    """No pipeline's StatefulSet, Service or PDB selects a lake-metrics pod, and
    the exporter's selector picks its own pods and not the push jobs'."""
    selectors = []
    for d in docs:
        if d["kind"] == "StatefulSet":
            selectors.append((d, d["spec"]["selector"]["matchLabels"]))
        elif d["kind"] == "Service":
            selectors.append((d, d["spec"].get("selector", {})))
        elif d["kind"] == "PodDisruptionBudget":
            selectors.append((d, d["spec"]["selector"]["matchLabels"]))
    problems = []
    ours = lake_metrics(docs, "Deployment") + lake_metrics(docs, "CronJob")
    for d in ours:
        labels = pod(d)["metadata"].get("labels", {})
        for owner, sel in selectors:
            if sel and matches(sel, labels):
                problems.append(f"{owner['kind']}/{owner['metadata']['name']} selects the pods of {d['metadata']['name']}")
    for dep in lake_metrics(docs, "Deployment"):
        sel = dep["spec"]["selector"]["matchLabels"]
        if not matches(sel, pod(dep)["metadata"].get("labels", {})):
            problems.append(f"{dep['metadata']['name']}: selector does not match its pods")
        for cj in lake_metrics(docs, "CronJob"):
            if matches(sel, pod(cj)["metadata"].get("labels", {})):
                problems.append(f"{dep['metadata']['name']} selects the pods of {cj['metadata']['name']}")
    return problems


def break_scrape(docs: Docs) -> None:
    pod(lake_metrics(docs, "Deployment")[0])["metadata"]["annotations"]["prometheus.io/port"] = "8000"


def break_push(docs: Docs) -> None:
    c = container(lake_metrics(docs, "CronJob")[0])
    c["env"] = [e for e in c["env"] if e["name"] != "DUCKLAKE_METRICS_PUSH_URL"]


def break_apart(docs: Docs) -> None:
    sts = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"].endswith("-events"))
    pod(lake_metrics(docs, "Deployment")[0])["metadata"]["labels"].update(sts["spec"]["selector"]["matchLabels"])


CHECKS: list[tuple[Check, Callable[[Docs], None]]] = [
    (exporter_per_pipeline, break_scrape),
    (push_per_pipeline, break_push),
    (pods_apart, break_apart),
]

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("push without a URL", {"push": {"enabled": True, "url": ""}}, "lakeMetrics.push.url is required"),
    ("a hoglake pipeline", {"pipelines": ["logs"]}, '"logs" is not a DuckLake pipeline'),
    ("an unknown pipeline", {"pipelines": ["nope"]}, '"nope" is not a DuckLake pipeline'),
]


def checks(
    render: Callable[[dict[str, Any]], Docs],
    values: dict[str, Any],
    shared: list[Check],
) -> list[tuple[str, Callable[[], list[str]]]]:
    """(name, check) pairs for check_helm_chart.py; `shared` are its checks
    that apply to any render (schemas, secrets), run on this one too."""
    on = enabled(values)
    docs = render(on)
    out: list[tuple[str, Callable[[], list[str]]]] = []

    def off() -> list[str]:
        got = lake_metrics(render(values), "Deployment") + lake_metrics(render(values), "CronJob")
        return [f"{len(got)} lake-metrics objects with lakeMetrics unset"] if got else []

    out.append(("lake metrics: off by default", off))
    for fn, brk in CHECKS:
        out.append((f"lake metrics: {fn.__name__}", lambda fn=fn: fn(docs, on)))
        out.append((f"lake metrics: {fn.__name__} fails on a broken render", lambda fn=fn, brk=brk: bites(fn, brk, docs, on)))
    for fn in shared:
        out.append((f"lake metrics: {fn.__name__}", lambda fn=fn: fn(docs, on)))
    one = enabled(values, pipelines=["sessions"])
    out.append(("lake metrics: only the pipelines named", lambda: exporter_per_pipeline(render(one), one) + push_per_pipeline(render(one), one)))
    for label, over, words in REFUSED:
        bad = enabled(values, **over)
        out.append((f"lake metrics refused: {label}", lambda bad=bad, words=words: refused(render, bad, words)))
    return out


def bites(fn: Check, brk: Callable[[Docs], None], docs: Docs, values: dict[str, Any]) -> list[str]:
    broken = copy.deepcopy(docs)
    brk(broken)
    return [] if fn(broken, values) else ["passed on a broken render"]


def refused(render: Callable[[dict[str, Any]], Docs], values: dict[str, Any], words: str) -> list[str]:
    try:
        render(values)
    except Exception as err:  # noqa: BLE001 - the render error is what we want
        return [] if words in str(err) else [f"refused, but without {words!r}: {err}"]
    return ["rendered"]
