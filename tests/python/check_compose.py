#!/usr/bin/env python3
"""Check docker-compose.yml, the SSL stack laid over it, and deploy/k8s/millpond.yaml against the code.

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
* The scan itself is checked: every variable the configuration reference
  lists (shared/src/config/variables.toml) is one of the binaries reads.
* Each stack is checked as Compose runs it: docker-compose.yml alone, and
  with docker-compose.ssl.yml laid over it (merged as Compose merges files).
  Kafka as ingest reaches it: every bootstrap address is a listener some
  broker service advertises, spoken in that listener's protocol
  (KAFKA_CONSUMER_SECURITY_PROTOCOL against KAFKA_LISTENER_SECURITY_PROTOCOL_MAP).
  A broker with an SSL listener names the keystore and password files the
  apache/kafka image requires, and every file ingest's KAFKA_CONSUMER_*_LOCATION
  names comes from a bind mount; files under .compose-ssl/ must be ones
  scripts/make-ssl-certs.sh makes (it is run into a scratch directory).

Prints one line per check and exits non-zero with the failures.

    python tests/python/check_compose.py [--compose FILE ...] [--k8s FILE]
    python tests/python/check_compose.py --compose A --compose B --certs DIR --print-ingest-env

With --print-ingest-env it prints, as JSON, the KAFKA_CONSUMER_* variables of
the merged stack's ingest service, each path inside the container replaced
by the host file mounted there (.compose-ssl/ read as DIR), and checks nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_env_reads import Reads, ScanError, binary_reads  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# Image target -> (cargo packages of its binaries, features: None = defaults).
IMAGES = {
    "ingest": (("millpond-ingest",), None),
    "writer-ducklake": (("millpond-writer", "millpond-lake"), None),
    "writer-hoglake": (("millpond-writer",), set()),
}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
# The stacks checked by default: each a list of files laid over each other.
STACKS = [["docker-compose.yml"], ["docker-compose.yml", "docker-compose.ssl.yml"]]
# Where scripts/make-ssl-certs.sh writes by default (the SSL stack mounts it).
CERTS = ".compose-ssl"
# The files the apache/kafka image reads from /etc/kafka/secrets when a
# listener is SSL (its configure script refuses to start without them).
KAFKA_SECRETS = "/etc/kafka/secrets"
KAFKA_SSL_FILES = ("KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_KEY_CREDENTIALS")
# Sequences Compose merges across files (volumes by their target); any
# other value of a later file replaces the earlier one.
MERGED_LISTS = {"ports", "expose", "dns", "dns_search", "tmpfs", "extra_hosts", "volumes", "devices"}


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


def volume(entry) -> tuple[str, str]:
    """(source, target) of a short (`src:dst[:mode]`) or long volume entry."""
    if isinstance(entry, dict):
        return str(entry.get("source", "")), str(entry.get("target", ""))
    parts = str(entry).split(":")
    return (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])


def merge(base, over, key: str = ""):
    """`over` laid over `base` as Compose lays a later file over an earlier one."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            if k == "environment":
                out[k] = {**environment({k: base.get(k)}), **environment({k: v})}
            else:
                out[k] = merge(base[k], v, k) if k in base else v
        return out
    if key in MERGED_LISTS and isinstance(base, list) and isinstance(over, list):
        if key in ("volumes", "devices"):
            targets = {volume(v)[1] for v in over}
            return [v for v in base if volume(v)[1] not in targets] + over
        return base + [v for v in over if v not in base]
    return over


def load_stack(paths: list[Path]) -> dict:
    doc: dict = {}
    for path in paths:
        doc = merge(doc, yaml.safe_load(path.read_text()))
    return doc


def host_file(service: dict, container_path: str, certs: Path | None) -> Path | None:
    """The host file a bind mount of `service` puts at `container_path`, with
    .compose-ssl/ read as `certs`; None when no bind mount provides it."""
    for entry in service.get("volumes") or []:
        source, target = volume(entry)
        if not source.startswith((".", "/")):
            continue  # a named volume
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            host = (REPO / source).resolve() / container_path[len(target):].lstrip("/")
            if certs is not None:
                try:
                    host = certs / host.relative_to((REPO / CERTS).resolve())
                except ValueError:
                    pass
            return host
    return None


def listeners(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Advertised listener name -> (host:port, security protocol)."""
    protocols = dict(p.split(":", 1) for p in env.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if ":" in p)
    out = {}
    for item in filter(None, env.get("KAFKA_ADVERTISED_LISTENERS", "").split(",")):
        name, _, address = item.partition("://")
        out[name] = (address, protocols.get(name, name))
    return out


def check_kafka(r: Report, name: str, services: dict[str, dict], certs: Path | None) -> None:
    """Ingest against the broker services of the same stack."""
    env = environment(services[name])
    advertised = {}
    for broker, s in services.items():
        benv = environment(s)
        for listener, (address, protocol) in listeners(benv).items():
            advertised[address] = (broker, listener, protocol)
        if any(p == "SSL" or p.endswith("_SSL") for _, p in listeners(benv).values()):
            for var in KAFKA_SSL_FILES:
                value = benv.get(var, "")
                found = host_file(s, f"{KAFKA_SECRETS}/{value}", certs) if value else None
                r.check(found is not None and found.is_file(),
                        f"{broker}: {var} ({value or 'unset'}) is a file mounted in {KAFKA_SECRETS}"
                        + (f" ({found})" if found else ""))
    protocol = env.get("KAFKA_CONSUMER_SECURITY_PROTOCOL", "PLAINTEXT").upper()
    for address in filter(None, env.get("KAFKA_BOOTSTRAP_SERVERS", "").split(",")):
        target = advertised.get(address.strip())
        r.check(target is not None, f"{name}: bootstrap {address} is a listener a broker service advertises")
        if target:
            r.check(target[2].upper() == protocol,
                    f"{name}: speaks {protocol} to {target[0]}'s {target[1]} listener ({target[2]})")
    for var, value in sorted(env.items()):
        if var.startswith("KAFKA_CONSUMER_") and var.endswith("_LOCATION"):
            found = host_file(services[name], value, certs)
            r.check(found is not None and found.is_file(),
                    f"{name}: {var} ({value}) is a file a bind mount provides" + (f" ({found})" if found else ""))


def image_reads(packages: tuple[str, ...], features: set[str] | None) -> Reads:
    """What the binaries of an image's `packages` read, together."""
    out = Reads()
    for package in packages:
        rd = binary_reads(REPO, package, features)
        for mine, theirs in ((out.names, rd.names), (out.prefixes, rd.prefixes), (out.reported, rd.reported)):
            for name, where in theirs.items():
                mine.setdefault(name, set()).update(where)
    return out


def check_env(r: Report, where: str, image: str, env: dict[str, str], reads: dict[str, Reads]) -> None:
    package = " or ".join(IMAGES[image][0])
    unread = sorted(v for v in env if not reads[image].reads(v))
    r.check(not unread, f"{where}: every variable set is read by {package} ({image})"
            + (f"; not read: {', '.join(unread)}" if unread else f" ({len(env)} set)"))


def check_compose(r: Report, paths: list[Path], reads: dict[str, Reads], certs: Path | None) -> None:
    doc = load_stack(paths)
    path = Path(" + ".join(p.name for p in paths))
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
            check_kafka(r, name, services, certs)


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
    """Every variable the configuration reference lists (shared/src/config/variables.toml)."""
    data = tomllib.loads((REPO / "shared/src/config/variables.toml").read_text())
    return {n for v in data["variable"] for n in v["names"]}


def ingest_env(paths: list[Path], certs: Path) -> dict[str, str]:
    """KAFKA_CONSUMER_* of the stack's ingest, container paths as host files."""
    services = load_stack(paths)["services"]
    (name,) = [n for n, s in services.items() if (s.get("build") or {}).get("target") == "ingest"]
    out = {}
    for var, value in environment(services[name]).items():
        if var.startswith("KAFKA_CONSUMER_"):
            found = host_file(services[name], value, certs) if value.startswith("/") else None
            out[var] = str(found) if found else value
    return out


def make_certs(into: Path) -> None:
    subprocess.run(["bash", str(REPO / "scripts/make-ssl-certs.sh"), str(into)], check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compose", type=Path, action="append",
                        help="a compose file; repeat to lay files over each other (default: each stack of STACKS)")
    parser.add_argument("--k8s", type=Path, default=REPO / "deploy/k8s/millpond.yaml")
    parser.add_argument("--certs", type=Path, help="what scripts/make-ssl-certs.sh made (default: made afresh)")
    parser.add_argument("--print-ingest-env", action="store_true")
    args = parser.parse_args()
    stacks = [args.compose] if args.compose else [[REPO / f for f in stack] for stack in STACKS]
    with tempfile.TemporaryDirectory() as scratch:
        certs = args.certs
        if certs is None:
            certs = Path(scratch) / "certs"
            make_certs(certs)
        if args.print_ingest_env:
            print(json.dumps(ingest_env(stacks[0], certs.resolve())))
            return 0
        r = Report()
        try:
            reads = {image: image_reads(packages, features) for image, (packages, features) in IMAGES.items()}
        except ScanError as e:
            r.check(False, f"scan of the Rust sources: {e}")
            return 1
        for image, rd in reads.items():
            print(f"scan: {image} reads {len(rd.names)} variables, prefixes {sorted(rd.prefixes) or 'none'}")
        missed = sorted(n for n in documented() if not any(rd.reads(n) for rd in reads.values()))
        r.check(not missed, f"every variable the configuration reference lists ({len(documented())}) is found read by the scan"
                + (f"; not found: {', '.join(missed)}" if missed else ""))
        for stack in stacks:
            check_compose(r, stack, reads, certs.resolve())
        check_k8s(r, args.k8s, reads)
    print(f"compose check: {len(r.failures)} failed")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
