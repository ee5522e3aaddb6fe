#!/usr/bin/env python3
"""Every command the docs show is one the repository has, spelled as it takes it.

Reads the ```sh blocks of README.md and docs/**/*.md (the blocks a reader
runs; output samples go in ```text blocks) and checks each command in them:

* `scripts/...`, `tests/...`, `deploy/...` and other repository paths exist;
* a script's `--flags` appear in the script itself (its usage text or its
  argument parsing);
* a Millpond binary (`millpond-lake`, `millpond-replay`, ...) exists, and
  its subcommand and `--flags` appear in its `--help` (the subcommand's own
  `--help` for a subcommand), run from --bin-dir;
* `cargo ... -p P`, `--bin B` and `--features crate/feature` name a package,
  binary and feature of the workspace.

So a renamed script, flag, subcommand or package fails the check.

    python tests/python/check_doc_commands.py --bin-dir target/release
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(sh|bash)\s*\n(.*?)^```", re.M | re.S)
# Tokens that look like a path in the repository.
REPO_PATH = re.compile(r"^(\./)?(scripts|tests|deploy|docs|bench|writer|ingest|lake|shared|hoglake|proto)/[\w./-]+$")
SEPARATORS = {"&&", "||", ";", "|"}


def docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def commands(text: str) -> list[tuple[int, list[str]]]:
    """Each shell command of the ```sh blocks: its line and its words."""
    out = []
    for block in BLOCK.finditer(text):
        first_line = text[: block.start(2)].count("\n") + 1
        body = block.group(2).replace("\\\n", " ")
        for offset, line in enumerate(body.splitlines()):
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                words = line.split()
            current: list[str] = []
            for w in words + [";"]:
                if w in SEPARATORS:
                    if current:
                        out.append((first_line + offset, current))
                    current = []
                else:
                    current.append(w)
    return out


def workspace() -> tuple[dict[str, dict], set[str]]:
    """Package name -> its manifest, and every [[bin]] name."""
    root = tomllib.loads((REPO / "Cargo.toml").read_text())
    packages, bins = {}, set()
    for member in root["workspace"]["members"]:
        for path in REPO.glob(f"{member}/Cargo.toml"):
            manifest = tomllib.loads(path.read_text())
            packages[manifest["package"]["name"]] = manifest
            bins |= {b["name"] for b in manifest.get("bin", [])}
            if (path.parent / "src/main.rs").exists():
                bins.add(manifest["package"]["name"])
    return packages, bins


class Checker:
    def __init__(self, bin_dir: Path | None) -> None:
        self.bin_dir = bin_dir
        self.packages, self.bins = workspace()
        self.helps: dict[tuple[str, ...], str | None] = {}
        self.failures: list[str] = []
        self.checked = 0

    def fail(self, where: str, why: str) -> None:
        self.failures.append(f"{where}: {why}")

    def help(self, argv: tuple[str, ...]) -> str | None:
        if argv not in self.helps:
            if self.bin_dir is None:
                self.helps[argv] = None
            else:
                exe = self.bin_dir / argv[0]
                run = subprocess.run([str(exe), *argv[1:], "--help"], capture_output=True, text=True)
                self.helps[argv] = run.stdout + run.stderr if run.returncode == 0 else None
        return self.helps[argv]

    def check(self, where: str, words: list[str]) -> None:
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if not words:
            return
        self.checked += 1
        for w in words:
            path = w.split("=", 1)[-1]
            if REPO_PATH.match(path) and "*" not in path and "<" not in path:
                if not (REPO / path).exists():
                    self.fail(where, f"{path} does not exist")
        head = words[0]
        if head in ("bash", "sh", ".", "source") and len(words) > 1:
            words, head = words[1:], words[1]
        name = Path(head).name
        if head.startswith(("scripts/", "./scripts/")) and (REPO / head).exists():
            text = (REPO / head).read_text()
            for flag in flags(words[1:]):
                if flag not in text:
                    self.fail(where, f"{head} has no {flag}")
        elif name in self.bins and name.startswith("millpond-"):
            self.check_binary(where, name, words[1:])
        elif head == "cargo":
            self.check_cargo(where, words[1:])

    def check_binary(self, where: str, name: str, args: list[str]) -> None:
        top = self.help((name,))
        if top is None:
            if self.bin_dir is not None:
                self.fail(where, f"{name} --help did not run from {self.bin_dir}")
            return
        argv: tuple[str, ...] = (name,)
        commands = set(re.findall(r"^  ([a-z][\w-]*)\s", top.split("Commands:", 1)[1], re.M)) if "Commands:" in top else set()
        positional = positionals(args, top)
        if commands and positional:
            if positional[0] not in commands:
                self.fail(where, f"{name} has no subcommand {positional[0]}")
                return
            argv = (name, positional[0])
        text = self.help(argv) or ""
        for flag in flags(args):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                self.fail(where, f"`{' '.join(argv)}` has no {flag} (its --help)")

    def check_cargo(self, where: str, args: list[str]) -> None:
        for i, a in enumerate(args[:-1]):
            value = args[i + 1]
            if a in ("-p", "--package") and value not in self.packages:
                self.fail(where, f"no workspace package {value}")
            if a == "--bin" and value not in self.bins:
                self.fail(where, f"no binary {value}")
            if a in ("-F", "--features"):
                for feature in value.split(","):
                    crate, _, feat = feature.rpartition("/")
                    features = self.packages.get(crate, {}).get("features", {}) if crate else \
                        {f for p in self.packages.values() for f in p.get("features", {})}
                    if feat not in features:
                        self.fail(where, f"no feature {feature}")


def positionals(args: list[str], help_text: str) -> list[str]:
    """The words that are not options, nor the value of an option that takes one."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a.startswith("-"):
            skip = "=" not in a and re.search(rf"{re.escape(a)} <", help_text) is not None
        else:
            out.append(a)
    return out


def flags(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if re.match(r"^--[a-z][\w-]*", w)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, help="where the Millpond binaries are (their --help is read)")
    args = parser.parse_args()
    checker = Checker(args.bin_dir)
    for doc in docs():
        for line, words in commands(doc.read_text()):
            checker.check(f"{doc.relative_to(REPO)}:{line}", words)
    for f in checker.failures:
        print(f"FAIL {f}")
    print(f"checked {checker.checked} commands in {len(docs())} pages")
    print(f"doc commands check: {len(checker.failures)} failed")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
