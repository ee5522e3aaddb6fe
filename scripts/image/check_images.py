#!/usr/bin/env python3
"""Check deploy/docker/Dockerfile without a container engine.

Reads the Dockerfile and runs its RUN steps in order, each the script it names
with the same arguments, on this machine: the build stages' /stage/<image>
trees land under a scratch root, the apt steps only simulate
(MILLPOND_IMAGE_DRY_RUN=1). A step that fails fails the check. Then, for each
image (ingest, writer-ducklake, writer-hoglake), the tree its final stage
copies to / must hold exactly the files the image needs, every ELF file must
find its shared libraries in the tree or in a package the runtime stage
installs (or debian-slim has, with dependencies), so must the HEALTHCHECK
script's tools, and the stage's ENTRYPOINT, USER, ENV and HEALTHCHECK must
fit the tree. Last, the staged ingest and DuckLake writer run
with their image's ENV against a local mock broker, their HEALTHCHECK command
must pass (and fail on a port nobody serves), and the sample events must be
written. Prints each image's staged size.

Run through scripts/check-images.sh.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy/docker/Dockerfile"
STAGE = "/stage"
IMAGES = ("ingest", "writer-ducklake", "writer-hoglake")
# The binaries each image ships, besides the HEALTHCHECK script.
BINARIES = {
    "ingest": ["millpond-ingest", "millpond-replay"],
    "writer-ducklake": ["millpond-writer", "millpond-lake"],
    "writer-hoglake": ["millpond-writer"],
}
HEALTHCHECK = "millpond-healthcheck"
# Which process an image runs: the HEALTHCHECK argument and its port variable.
ROLE = {"ingest": "ingest", "writer-ducklake": "writer", "writer-hoglake": "writer"}
CONFIG_SOURCES = {"ingest": "ingest/src/config/mod.rs", "writer": "writer/src/config.rs"}
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}
KNOWN = {"FROM", "RUN", "ENV", "COPY", "WORKDIR", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT"}


class CheckFailed(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ Dockerfile


@dataclass
class Run:
    line: int
    text: str
    script: str  # relative to the repository
    args: list[str]


@dataclass
class Stage:
    name: str
    base: str
    line: int
    parent: Stage | None = None
    runs: list[Run] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[int, str | None, list[str], str]] = field(default_factory=list)
    user: str | None = None
    healthcheck: list[str] | None = None
    entrypoint: list[str] | None = None
    # From the dry run of its install-packages.sh steps.
    packages: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)

    def chain(self) -> list[Stage]:
        out, s = [], self
        while s is not None:
            out.append(s)
            s = s.parent
        return out[::-1]

    def effective(self, attr: str):
        value = None
        for s in self.chain():
            if getattr(s, attr) is not None:
                value = getattr(s, attr)
        return value

    def effective_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for s in self.chain():
            env.update(s.env)
        return env


def logical_lines(text: str):
    """(first line number, instruction) with continuations joined."""
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf.append(line[:-1].strip())
            continue
        buf.append(stripped)
        yield start, " ".join(buf)
        buf = []
    if buf:
        raise CheckFailed(f"Dockerfile:{start}: continuation runs past the end of the file")


def exec_form(where: str, text: str) -> list[str]:
    try:
        argv = json.loads(text)
    except json.JSONDecodeError:
        argv = None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise CheckFailed(f"{where}: use the exec form [\"cmd\", \"arg\"], got {text!r}")
    return argv


def parse_run(where: str, line: int, rest: str) -> Run:
    words = shlex.split(rest)
    binds: dict[str, str] = {}
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if flag.startswith("--mount="):
            opts = dict(o.split("=", 1) for o in flag[len("--mount="):].split(",") if "=" in o)
            if opts.get("type") == "bind":
                binds[opts.get("target", "")] = opts.get("source", ".")
    if len(words) < 2 or words[0] != "bash":
        raise CheckFailed(f"{where}: a RUN step must be `bash <script> <args>`, got {rest!r}")
    bad = [w for w in words if w in ("&&", "||", ";", "|", ">", "<") or "$" in w]
    if bad:
        raise CheckFailed(f"{where}: one script per RUN step, with literal arguments (found {bad})")
    script = words[1]
    for target, source in binds.items():
        if target and script.startswith(target.rstrip("/") + "/"):
            script = source.rstrip("/") + "/" + script[len(target.rstrip("/")) + 1:]
    if script.startswith("/") or not script.startswith("scripts/"):
        raise CheckFailed(f"{where}: {words[1]} is not a script of the repository's scripts/")
    if not (REPO / script).is_file():
        raise CheckFailed(f"{where}: {script} does not exist")
    return Run(line, rest, script, words[2:])


def parse_dockerfile(path: Path) -> list[Stage]:
    stages: list[Stage] = []
    by_name: dict[str, Stage] = {}
    for line, text in logical_lines(path.read_text()):
        where = f"{path.relative_to(REPO)}:{line}"
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        if keyword not in KNOWN:
            raise CheckFailed(f"{where}: {keyword} is an instruction this check does not model; teach scripts/image/check_images.py")
        if keyword == "FROM":
            words = rest.split()
            if len(words) != 3 or words[1].upper() != "AS":
                raise CheckFailed(f"{where}: name every stage: FROM <image> AS <name>")
            stage = Stage(words[2], words[0], line, parent=by_name.get(words[0]))
            stages.append(stage)
            by_name[stage.name] = stage
            continue
        if not stages:
            raise CheckFailed(f"{where}: {keyword} before FROM")
        stage = stages[-1]
        if keyword == "RUN":
            stage.runs.append(parse_run(where, line, rest))
        elif keyword == "ENV":
            for word in shlex.split(rest):
                if "=" not in word:
                    raise CheckFailed(f"{where}: write ENV as NAME=value")
                k, v = word.split("=", 1)
                stage.env[k] = v
        elif keyword == "COPY":
            words = shlex.split(rest)
            src_stage = None
            while words and words[0].startswith("--"):
                flag = words.pop(0)
                if flag.startswith("--from="):
                    src_stage = flag[len("--from="):]
            stage.copies.append((line, src_stage, words[:-1], words[-1]))
        elif keyword == "USER":
            stage.user = rest.strip()
        elif keyword == "HEALTHCHECK":
            _, cmd, argv = rest.partition("CMD ")
            if not cmd:
                raise CheckFailed(f"{where}: HEALTHCHECK needs CMD [...]")
            stage.healthcheck = exec_form(where, argv.strip())
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = exec_form(where, rest.strip())
    return stages


# ------------------------------------------------------------------ steps


def map_arg(where: str, arg: str, root: Path) -> str:
    if arg == STAGE or arg.startswith(STAGE + "/"):
        return str(root) + arg
    if arg.startswith("/"):
        raise CheckFailed(f"{where}: cannot map {arg} into the scratch root (only {STAGE}/...)")
    return arg


def run_steps(stages: list[Stage], root: Path) -> list[tuple[str, float]]:
    env = dict(os.environ, MILLPOND_IMAGE_DRY_RUN="1")
    timings = []
    for stage in stages:
        if stage.env and stage.runs:
            log(f"check-images: {stage.name}: not applying ENV {' '.join(stage.env)} (container paths); "
                "the steps use this machine's scripts/env.sh")
        for run in stage.runs:
            where = f"Dockerfile:{run.line} ({stage.name})"
            argv = ["bash", str(REPO / run.script)] + [map_arg(where, a, root) for a in run.args]
            log(f"==> {where}: bash {run.script} {' '.join(run.args)}")
            t = time.monotonic()
            proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
            if proc.stdout:
                sys.stderr.write(proc.stdout)
            if proc.returncode != 0:
                raise CheckFailed(f"{where}: `bash {run.script} {' '.join(run.args)}` failed (exit {proc.returncode})")
            timings.append((f"{stage.name}: {Path(run.script).name} {' '.join(run.args)}", time.monotonic() - t))
            if run.script.endswith("install-packages.sh"):
                for out in proc.stdout.splitlines():
                    kind, _, value = out.partition(" ")
                    if kind == "package":
                        stage.packages.append(value)
                    elif kind == "user":
                        stage.users.append(value.split()[0])
    return timings


# ------------------------------------------------------------------ packages


def installed_packages() -> dict[str, dict[str, str]]:
    fmt = "${db:Status-Abbrev}\t${Package}\t${Essential}\t${Priority}\t${Pre-Depends}\t${Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", f"-f={fmt}"], capture_output=True, text=True, check=True).stdout
    pkgs = {}
    for line in out.splitlines():
        status, name, essential, priority, pre, dep, provides = line.split("\t")
        if status.startswith("ii"):
            pkgs[name] = {"essential": essential, "priority": priority, "depends": f"{pre},{dep}", "provides": provides}
    return pkgs


def closure(seed: set[str], pkgs: dict[str, dict[str, str]]) -> set[str]:
    """Packages `seed` brings along (first installed alternative of each dependency)."""
    provider: dict[str, str] = {}
    for name, p in pkgs.items():
        for prov in p["provides"].split(","):
            m = re.match(r"\s*([a-z0-9][a-z0-9+.-]*)", prov)
            if m:
                provider.setdefault(m.group(1), name)
    seen: set[str] = set()
    todo = list(seed)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in pkgs.get(name, {}).get("depends", "").split(","):
            for alt in group.split("|"):
                m = re.match(r"\s*([a-z0-9][a-z0-9+.-]*)", alt)
                if not m:
                    continue
                dep = m.group(1)
                dep = dep if dep in pkgs else provider.get(dep, "")
                if dep:
                    todo.append(dep)
                    break
    return seen


def slim_base(pkgs: dict[str, dict[str, str]]) -> set[str]:
    """What debian:<release>-slim holds: the essential and required packages and apt."""
    return {n for n, p in pkgs.items() if p["essential"] == "yes" or p["priority"] == "required"} | {"apt"}


def owner(path: str) -> str | None:
    real = os.path.realpath(path)
    for candidate in dict.fromkeys([path, real, "/usr" + path, path.removeprefix("/usr"), "/usr" + real, real.removeprefix("/usr")]):
        proc = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if ": /" in line and not line.startswith("diversion"):
                return line.split(": /")[0].split(":")[0].split(",")[0].strip()
    return None


def host_release() -> str:
    info = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().split("\n") if "=" in line)
    return info.get("VERSION_CODENAME", "").strip('"')


# ------------------------------------------------------------------ tree checks


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_machine(path: Path) -> int:
    with path.open("rb") as f:
        head = f.read(20)
    return int.from_bytes(head[18:20], "little")


def ldd(path: Path, env: dict[str, str]) -> list[tuple[str, str | None]]:
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise CheckFailed(f"ldd {path} failed: {out.stderr.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            name, _, target = line.partition("=>")
            target = target.strip()
            libs.append((name.strip(), None if target.startswith("not found") else target.split(" (")[0]))
    return libs


def extension_footer(path: Path) -> dict[str, str]:
    """DuckDB's metadata footer: 8 fields of 32 bytes, last field first, then a 256-byte signature."""
    with path.open("rb") as f:
        f.seek(-512, os.SEEK_END)
        meta = f.read(256)
    fields = [meta[i * 32:(i + 1) * 32].rstrip(b"\0").decode(errors="replace") for i in range(8)][::-1]
    return {"magic": fields[0], "platform": fields[1], "duckdb_version": fields[2], "extension_version": fields[3], "abi": fields[4]}


def duckdb_platform() -> str:
    return {"x86_64": "linux_amd64", "aarch64": "linux_arm64"}[platform.machine()]


def extension_names() -> list[str]:
    names = []
    for line in (REPO / "writer/duckdb-extensions.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])
    return names


def expected_files(image: str) -> set[str]:
    files = {f"usr/local/bin/{b}" for b in BINARIES[image] + [HEALTHCHECK]}
    if image == "writer-ducklake":
        ver = os.environ["MILLPOND_DUCKDB_VERSION"]
        files.add("usr/local/lib/libduckdb.so")
        files |= {f"opt/duckdb-extensions/v{ver}/{duckdb_platform()}/{n}.duckdb_extension" for n in extension_names()}
    return files


def image_env(target: Stage, tree: Path, errors: list[str]) -> dict[str, str]:
    """The target's ENV with its absolute paths moved into the staged tree."""
    mapped = {}
    for name, value in target.effective_env().items():
        parts = []
        for part in value.split(":"):
            if part.startswith("/"):
                if not (tree / part.lstrip("/")).exists():
                    errors.append(f"{target.name}: ENV {name}={value}: {part} is not in the image's tree")
                part = str(tree / part.lstrip("/"))
            parts.append(part)
        mapped[name] = ":".join(parts)
    return mapped


def port_defaults() -> dict[str, tuple[str, str]]:
    """role -> (port variable, default) as the binaries' config reads them."""
    out = {}
    for role, rel in CONFIG_SOURCES.items():
        text = (REPO / rel).read_text()
        m = re.search(r'CommonConfig::parse\(\s*&mut\s+\w+,\s*"(\w+)",\s*(\d+)', text)
        if not m:
            raise CheckFailed(f"{rel}: no CommonConfig::parse(&mut r, \"<PORT VAR>\", <default>, ...) call found")
        out[role] = (m.group(1), m.group(2))
    return out


def healthcheck_defaults() -> dict[str, tuple[str, str]]:
    text = (REPO / "scripts/image/millpond-healthcheck").read_text()
    return {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"(\w+)\)\s*port=\$\{(\w+):-(\d+)\}", text)}


def check_tree(image: str, target: Stage, tree: Path, pkgs, base: set[str]) -> tuple[list[str], dict[str, str]]:
    errors: list[str] = []
    files = {str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() or p.is_symlink()}
    want = expected_files(image)
    for f in sorted(want - files):
        errors.append(f"{image}: missing /{f}")
    for f in sorted(files - want):
        errors.append(f"{image}: /{f} is not something the image needs")
    if image != "writer-ducklake":
        for f in sorted(files):
            if "duckdb" in f.lower():
                errors.append(f"{image}: /{f} is DuckDB's, and this image has no DuckDB")

    env = image_env(target, tree, errors)
    # USER: not root, and made by the runtime stage's install-packages.sh.
    user = target.effective("user")
    users = {u for s in target.chain() for u in s.users}
    if user in (None, "root", "0") or (user or "").startswith("0:"):
        errors.append(f"{image}: runs as root (USER {user})")
    elif user.split(":")[0] not in users:
        errors.append(f"{image}: USER {user} is not created by its stages (they create {sorted(users) or 'nobody'})")
    # ENTRYPOINT and HEALTHCHECK name files of the tree.
    entry = target.effective("entrypoint")
    if not entry or entry[0].lstrip("/") not in {f"usr/local/bin/{b}" for b in BINARIES[image]}:
        errors.append(f"{image}: ENTRYPOINT {entry} is not one of the image's binaries")
    hc = target.effective("healthcheck")
    if not hc:
        errors.append(f"{image}: no HEALTHCHECK")
    else:
        if hc[0] not in (HEALTHCHECK, f"/usr/local/bin/{HEALTHCHECK}"):
            errors.append(f"{image}: HEALTHCHECK runs {hc[0]}, not {HEALTHCHECK}")
        if hc[1:] != [ROLE[image]]:
            errors.append(f"{image}: HEALTHCHECK argument {hc[1:]} should be [{ROLE[image]!r}]")

    packages = {p for s in target.chain() for p in s.packages}
    allowed = closure(packages | base, pkgs)
    # The HEALTHCHECK script's interpreter and the tool it execs come from
    # packages the image has.
    script = (REPO / "scripts/image" / HEALTHCHECK).read_text()
    tools = [script.split("\n", 1)[0].removeprefix("#!").split()[0]]
    tools += re.findall(r"^\s*exec\s+(\S+)", script, re.M)
    for tool in tools:
        path = tool if tool.startswith("/") else shutil.which(tool)
        pkg = owner(path) if path else None
        if pkg not in allowed:
            errors.append(f"{image}: {HEALTHCHECK} runs {tool} (package {pkg}), which the runtime stage does not install")
    # ELF files: this machine's architecture; every library in the tree or
    # in a package the image has.
    ldd_env = dict(os.environ)
    ldd_env.pop("LD_LIBRARY_PATH", None)
    ldd_env.update({k: v for k, v in env.items() if k == "LD_LIBRARY_PATH"})
    machine = ELF_MACHINE[platform.machine()]
    for f in sorted(files):
        path = tree / f
        if path.is_symlink() or not is_elf(path):
            continue
        if elf_machine(path) != machine:
            errors.append(f"{image}: /{f} is not built for {platform.machine()}")
        for name, resolved in ldd(path, ldd_env):
            if "duckdb" in name.lower() and image != "writer-ducklake":
                errors.append(f"{image}: /{f} links {name}")
            if resolved is None:
                errors.append(f"{image}: /{f} needs {name}, which the image lacks")
            elif not resolved.startswith(str(tree) + "/"):
                if "duckdb" in name.lower():
                    errors.append(f"{image}: /{f} finds {name} outside the image ({resolved})")
                    continue
                pkg = owner(resolved)
                if pkg is None:
                    errors.append(f"{image}: /{f} needs {resolved}, which no Debian package provides here")
                elif pkg not in allowed:
                    errors.append(f"{image}: /{f} needs {name} from the package {pkg}, which the runtime stage does not install")

    if image == "writer-ducklake":
        ver = os.environ["MILLPOND_DUCKDB_VERSION"]
        lib = tree / "usr/local/lib/libduckdb.so"
        if lib.exists():
            duck = ctypes.CDLL(str(lib))
            duck.duckdb_library_version.restype = ctypes.c_char_p
            got = duck.duckdb_library_version().decode()
            if got != f"v{ver}":
                errors.append(f"{image}: /usr/local/lib/libduckdb.so is DuckDB {got}, want v{ver}")
        for f in sorted(x for x in files if x.endswith(".duckdb_extension")):
            meta = extension_footer(tree / f)
            if meta["magic"] != "4" or meta["platform"] != duckdb_platform() or (meta["abi"] == "CPP" and meta["duckdb_version"] != f"v{ver}"):
                errors.append(f"{image}: /{f} is for {meta['platform']} DuckDB {meta['duckdb_version']} ({meta['abi']}), want {duckdb_platform()} v{ver}")
    return errors, env


# ------------------------------------------------------------------ smoke run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(tree: Path, image_env: dict[str, str], home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {"PATH": f"{tree}/usr/local/bin:{os.environ['PATH']}", "HOME": str(home), "MILLPOND_LOG_FORMAT": "text"}
    env.update(image_env)
    env.update(extra)
    return env


def healthy(argv: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode == 0


def wait_for(what: str, proc: subprocess.Popen, logfile: Path, ok, timeout: float = 60) -> None:
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if ok():
            return
        if proc.poll() is not None:
            raise CheckFailed(f"{what}: the process exited ({proc.returncode}); log:\n{logfile.read_text()[-4000:]}")
        time.sleep(0.3)
    raise CheckFailed(f"{what}: not within {timeout:.0f} s; log:\n{logfile.read_text()[-4000:]}")


def stop(proc: subprocess.Popen, what: str, logfile: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise CheckFailed(f"{what} did not stop within 60 s of SIGTERM")
    if rc != 0:
        raise CheckFailed(f"{what} exited {rc} after SIGTERM; log:\n{logfile.read_text()[-4000:]}")


def written(port: int) -> float:
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith("millpond_records_written_total"))


def smoke(targets: dict[str, Stage], trees: dict[str, Path], envs: dict[str, dict[str, str]], work: Path) -> None:
    """The staged ingest and DuckLake writer, with their image's ENV and HEALTHCHECK."""
    events = 200
    broker_bin = Path(os.environ["CARGO_TARGET_DIR"]) / "release/millpond-mock-broker"
    if not broker_bin.exists():
        raise CheckFailed(f"{broker_bin} missing (build-binaries.sh ingest builds the workspace's binaries)")
    home = work / "home"
    home.mkdir(parents=True)
    procs: list[subprocess.Popen] = []
    try:
        broker = subprocess.Popen([str(broker_bin), "--topic", "events", "--partitions", "2", "--sample-events", str(events)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(broker)
        line = broker.stdout.readline().strip()
        if not line.startswith("BOOTSTRAP="):
            raise CheckFailed(f"millpond-mock-broker printed {line!r}")
        bootstrap = line.removeprefix("BOOTSTRAP=")

        w_http, w_flight, i_http = free_port(), free_port(), free_port()
        wtree, itree = trees["writer-ducklake"], trees["ingest"]
        wenv = process_env(wtree, envs["writer-ducklake"], home, {
            "DUCKLAKE_TABLE": "events", "MILLPOND_LAKE_DIR": str(work / "lake"), "POD_NAME": "millpond-0",
            "MILLPOND_WRITER_HTTP_PORT": str(w_http), "MILLPOND_WRITER_ADDR": f"127.0.0.1:{w_flight}",
        })
        ienv = process_env(itree, envs["ingest"], home, {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPIC": "events", "REPLICA_COUNT": "1",
            "POD_NAME": "millpond-0", "DUCKLAKE_TABLE": "events", "FLUSH_INTERVAL_MS": "1000",
            "MILLPOND_HTTP_PORT": str(i_http), "MILLPOND_WRITER_ADDR": f"127.0.0.1:{w_flight}",
        })
        wlog, ilog = work / "writer.log", work / "ingest.log"
        wentry = [str(wtree / targets["writer-ducklake"].effective("entrypoint")[0].lstrip("/"))]
        ientry = [str(itree / targets["ingest"].effective("entrypoint")[0].lstrip("/"))]
        whc = targets["writer-ducklake"].effective("healthcheck")
        ihc = targets["ingest"].effective("healthcheck")

        writer = subprocess.Popen(wentry, env=wenv, stdout=wlog.open("w"), stderr=subprocess.STDOUT)
        procs.append(writer)
        wait_for("writer-ducklake HEALTHCHECK", writer, wlog, lambda: healthy(whc, wenv))
        nobody = dict(wenv, MILLPOND_WRITER_HTTP_PORT=str(free_port()))
        if healthy(whc, nobody):
            raise CheckFailed("the writer HEALTHCHECK passes on a port nobody serves")
        log(f"check-images: writer-ducklake: HEALTHCHECK {whc} passes (port {w_http}), fails on a dead port")

        ingest = subprocess.Popen(ientry, env=ienv, stdout=ilog.open("w"), stderr=subprocess.STDOUT)
        procs.append(ingest)
        wait_for("ingest HEALTHCHECK", ingest, ilog, lambda: healthy(ihc, ienv))
        if healthy(ihc, dict(ienv, MILLPOND_HTTP_PORT=str(free_port()))):
            raise CheckFailed("the ingest HEALTHCHECK passes on a port nobody serves")
        log(f"check-images: ingest: HEALTHCHECK {ihc} passes (port {i_http}), fails on a dead port")
        wait_for(f"{events} sample events written by the staged writer", writer, wlog, lambda: written(w_http) >= events)
        stop(ingest, "the staged ingest", ilog)
        stop(writer, "the staged writer", wlog)
        log(f"check-images: staged ingest -> staged writer-ducklake wrote {events} events, both stopped cleanly")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ------------------------------------------------------------------ main


def check_dockerignore() -> list[str]:
    path = REPO / ".dockerignore"
    if not path.exists():
        return []
    errors = []
    for pattern in path.read_text().splitlines():
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#") or pattern.startswith("!"):
            continue
        spec = pattern.removeprefix("**/")
        tracked = subprocess.run(["git", "ls-files", "--", spec, f"**/{spec}", f"{spec}/**", f"**/{spec}/**"],
                                 cwd=REPO, capture_output=True, text=True).stdout.split()
        if tracked:
            errors.append(f".dockerignore: {pattern} excludes files the repository tracks: {tracked[:5]}")
    return errors


def du(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch root and print where it is")
    args = parser.parse_args()

    errors: list[str] = []
    stages = parse_dockerfile(DOCKERFILE)
    by_name = {s.name: s for s in stages}
    missing = [i for i in IMAGES if i not in by_name]
    if missing:
        raise CheckFailed(f"Dockerfile has no stage {missing}")
    errors += check_dockerignore()
    defaults, script_defaults = port_defaults(), healthcheck_defaults()
    for role, pair in defaults.items():
        if script_defaults.get(role) != pair:
            errors.append(f"millpond-healthcheck {role}: uses {script_defaults.get(role)}, the binary reads {pair}")

    release, image_release = host_release(), None
    for s in stages:
        m = re.match(r"debian:(\w+)", s.base)
        if m:
            image_release = m.group(1)
    if image_release and release != image_release:
        raise CheckFailed(f"this machine runs Debian {release or '?'}, the runtime image {image_release}: "
                          "the package checks need the same release")

    scratch = Path(tempfile.mkdtemp(prefix="millpond-images."))
    try:
        root = scratch / "root"
        timings = run_steps(stages, root)
        pkgs = installed_packages()
        base = slim_base(pkgs)
        trees, envs = {}, {}
        for image in IMAGES:
            target = by_name[image]
            copies = [c for c in target.copies if c[1] is not None]
            want_src = f"{STAGE}/{image}/"
            if len(copies) != 1 or copies[0][2] != [want_src] or copies[0][3] != "/":
                errors.append(f"{image}: expected exactly one COPY --from=<stage> {want_src} /, got {copies}")
                continue
            trees[image] = root / want_src.strip("/")
            if not trees[image].is_dir():
                errors.append(f"{image}: the build stages made no {want_src}")
                continue
            tree_errors, envs[image] = check_tree(image, target, trees[image], pkgs, base)
            errors += tree_errors
        if errors:
            raise CheckFailed("\n".join(errors))
        smoke(by_name, trees, envs, scratch / "smoke")
        log("check-images: step times: " + ", ".join(f"{n} {t:.0f}s" for n, t in timings))
        print("image             staged size   files")
        for image in IMAGES:
            n = sum(1 for p in trees[image].rglob("*") if p.is_file())
            print(f"{image:<17} {du(trees[image]) / 1e6:>8.1f} MB   {n}")
        print("check-images: OK")
    finally:
        if args.keep:
            log(f"check-images: scratch root kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as e:
        print(f"check-images: FAILED\n{e}", file=sys.stderr)
        sys.exit(1)
