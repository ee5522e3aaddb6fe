#!/usr/bin/env python3
"""Check docker-compose.yml (and deploy/k8s/millpond.yaml, the chart rendered) against the code.

* The compose file parses (PyYAML) and hangs together: every service named by
  depends_on or network_mode exists; a `service_healthy` dependency has a
  healthcheck; each long-running service has a restart policy and a
  healthcheck (its own, or its image's HEALTHCHECK); builds name an existing
  Dockerfile and target; ingest shares a writer's network namespace.
* Every environment variable set on a Millpond service (a build of one of
  the Dockerfile's image targets) or on a Millpond container of the
  StatefulSet is one that image's binary reads. The names come from the Rust
  sources (tests/python/rust_env_reads.py), for the cargo features of the
  image, plus the KAFKA_CONSUMER_* passthrough prefix.
* The scan itself is checked: every variable the README's configuration
  tables name is one of the binaries reads.

Prints one line per check and exits non-zero with the failures.

    python tests/python/check_compose.py [--compose FILE] [--k8s FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_env_reads import Reads, ScanError, binary_reads  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# Image target -> (cargo package of its binary, features: None = defaults).
IMAGES = {
    "ingest": ("millpond-ingest", None),
    "writer-ducklake": ("millpond-writer", None),
    "writer-hoglake": ("millpond-writer", set()),
}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


class Report:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(("PASS " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)


def dockerfile_targets(path: Path) -> dict[str, bool]:
    """Stage name -> whether it (or a stage it builds on) has a HEALTHCHECK."""
    stages: dict[str, bool] = {}
    current = None
    for line in path.read_text().splitlines():
        m = re.match(r"\s*FROM\s+(\S+)\s+AS\s+(\S+)", line, re.I)
        if m:
            current = m.group(2)
            stages[current] = stages.get(m.group(1), False)
        elif current and re.match(r"\s*HEALTHCHECK\s+(?!NONE)", line, re.I):
            stages[current] = True
    return stages


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def depends(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {k: (v or {}).get("condition", "service_started") for k, v in deps.items()}


def check_env(r: Report, where: str, image: str, env: dict[str, str], reads: dict[str, Reads]) -> None:
    package, _ = IMAGES[image]
    unread = sorted(v for v in env if not reads[image].reads(v))
    r.check(not unread, f"{where}: every variable set is read by {package} ({image})"
            + (f"; not read: {', '.join(unread)}" if unread else f" ({len(env)} set)"))


def check_compose(r: Report, path: Path, reads: dict[str, Reads]) -> None:
    doc = yaml.safe_load(path.read_text())
    r.check(isinstance(doc, dict) and isinstance(doc.get("services"), dict), f"{path.name} parses, with services")
    services: dict[str, dict] = doc["services"]
    one_shot = {d for s in services.values() for d, c in depends(s).items() if c == "service_completed_successfully"}
    image_of: dict[str, str] = {}
    for name, s in services.items():
        build = s.get("build")
        if isinstance(build, dict):
            dockerfile = REPO / build.get("context", ".") / build.get("dockerfile", "Dockerfile")
            targets = dockerfile_targets(dockerfile) if dockerfile.exists() else {}
            r.check(build.get("target") in targets, f"{name}: builds target {build.get('target')} of {dockerfile.relative_to(REPO)}")
            if build.get("target") in IMAGES:
                image_of[name] = build["target"]
    r.check(bool(image_of), f"{path.name} runs Millpond services: {image_of}")

    def has_healthcheck(name: str) -> bool:
        s = services[name]
        if "healthcheck" in s:
            return not s["healthcheck"].get("disable", False)
        build = s.get("build")
        if isinstance(build, dict):
            dockerfile = REPO / build.get("context", ".") / build.get("dockerfile", "Dockerfile")
            return dockerfile_targets(dockerfile).get(build.get("target"), False)
        return False

    for name, s in services.items():
        for dep, cond in depends(s).items():
            r.check(dep in services and cond in CONDITIONS, f"{name}: depends on {dep} ({cond})")
            if cond == "service_healthy" and dep in services:
                r.check(has_healthcheck(dep), f"{name}: waits for {dep} to be healthy, and {dep} has a healthcheck")
        mode = s.get("network_mode", "")
        if mode.startswith("service:"):
            r.check(mode.removeprefix("service:") in services, f"{name}: network_mode {mode} names a service")
        if name in one_shot:
            r.check(s.get("restart", "no") in ("no", "on-failure"), f"{name}: one-shot, restart {s.get('restart', 'no')}")
        else:
            r.check(s.get("restart") in ("always", "unless-stopped", "on-failure"), f"{name}: restart policy {s.get('restart')}")
            r.check(has_healthcheck(name), f"{name}: has a healthcheck")
    for name, image in image_of.items():
        check_env(r, f"{path.name} {name}", image, environment(services[name]), reads)
        if image == "ingest":
            writer = services[name].get("network_mode", "").removeprefix("service:")
            r.check(image_of.get(writer, "").startswith("writer-"),
                    f"{name}: shares the network namespace of a writer (network_mode: service:{writer})")


def check_k8s(r: Report, path: Path, reads: dict[str, Reads]) -> None:
    checked = 0
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") != "StatefulSet":
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            m = re.search(r"millpond-(ingest|writer-ducklake|writer-hoglake)(?::|$)", c.get("image", ""))
            if m:
                env = {e["name"]: str(e.get("value", "")) for e in c.get("env", [])}
                check_env(r, f"{path.name} {doc['metadata']['name']}/{c['name']}", m.group(1), env, reads)
                checked += 1
    r.check(checked > 0, f"{path.name}: millpond containers found and checked ({checked})")


def documented() -> set[str]:
    """Full variable names in the first column of the README's configuration tables."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= {n for n in re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split("|")[1])}
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compose", type=Path, default=REPO / "docker-compose.yml")
    parser.add_argument("--k8s", type=Path, default=REPO / "deploy/k8s/millpond.yaml")
    args = parser.parse_args()
    r = Report()
    try:
        reads = {image: binary_reads(REPO, package, features) for image, (package, features) in IMAGES.items()}
    except ScanError as e:
        r.check(False, f"scan of the Rust sources: {e}")
        return 1
    for image, rd in reads.items():
        print(f"scan: {image} reads {len(rd.names)} variables, prefixes {sorted(rd.prefixes) or 'none'}")
    missed = sorted(n for n in documented() if not any(rd.reads(n) for rd in reads.values()))
    r.check(not missed, f"every variable the README documents ({len(documented())}) is found read by the scan"
            + (f"; not found: {', '.join(missed)}" if missed else ""))
    check_compose(r, args.compose, reads)
    check_k8s(r, args.k8s, reads)
    print(f"compose check: {len(r.failures)} failed")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
