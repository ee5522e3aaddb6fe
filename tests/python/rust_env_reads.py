"""The environment variables a Millpond binary reads, scanned from its Rust sources.

The config modules are the source of truth. For one binary (its package, the
cargo features of its image) this walks the crate's module tree from
src/lib.rs and src/main.rs, and the trees of the workspace crates it depends
on, following `mod x;` declarations and dropping items whose #[cfg(...)] is
false (tests, other features). In what is left, a variable is read when its
name is passed to a call on an EnvReader or Env value (`r.optional("X")`,
`r.string_or("X", ..)`, `r.env().get("HOME")`) or to any function or closure
that is handed the reader (`CommonConfig::parse(&mut r, "X", ..)`,
`non_empty(r, "X")`), as a string literal or through a `const`/`let` bound
to literals; `env.with_prefix("P")` reads the prefix P. Names given to
`r.errors.push(..)` only report a variable: the scan fails when one of them
is never read, which catches a read pattern the scan does not know.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")
READER_TYPES = {"EnvReader", "Env"}
ITEM_KEYWORDS = {"fn", "pub", "mod", "use", "struct", "enum", "impl", "const", "static", "type",
                 "trait", "let", "extern", "async", "unsafe", "macro_rules"}


class ScanError(Exception):
    pass


@dataclass
class Tok:
    kind: str  # ident, str, punct, num, char, lifetime
    value: str
    line: int


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_str>b?r\#*")
  | (?P<str>b?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^'\\\n])')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?)
  | (?P<punct>::|->|=>|==|!=|<=|>=|&&|\|\||[{}()\[\];:,.&*!=<>+\-/%^|@\#?$~])
""", re.X | re.S)


def tokenize(text: str, where: str) -> list[Tok]:
    toks: list[Tok] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ScanError(f"{where}:{line}: cannot tokenize {text[pos:pos + 20]!r}")
        kind, value = m.lastgroup, m.group()
        end = m.end()
        if kind == "block_comment":
            depth, end = 1, pos + 2
            while depth:
                nxt = min((i for i in (text.find("/*", end), text.find("*/", end)) if i >= 0), default=-1)
                if nxt < 0:
                    raise ScanError(f"{where}:{line}: unterminated block comment")
                depth += 1 if text.startswith("/*", nxt) else -1
                end = nxt + 2
        elif kind == "raw_str":
            hashes = value.count("#")
            close = text.find('"' + "#" * hashes, end)
            if close < 0:
                raise ScanError(f"{where}:{line}: unterminated raw string")
            toks.append(Tok("str", text[end:close], line))
            end = close + 1 + hashes
        elif kind == "str":
            toks.append(Tok("str", value[value.index('"') + 1:-1], line))
        elif kind not in ("ws", "line_comment"):
            toks.append(Tok(kind, value, line))
        line += text.count("\n", pos, end)
        pos = end
    return toks


# ------------------------------------------------------------------ cfg


def _cfg_true(toks: list[Tok], i: int, features: set[str], where: str) -> tuple[bool, int]:
    """Evaluates the predicate at toks[i]; returns (value, index after it)."""
    name = toks[i].value
    if toks[i].kind != "ident":
        raise ScanError(f"{where}:{toks[i].line}: cannot read cfg predicate at {name!r}")
    if i + 1 < len(toks) and toks[i + 1].value == "(" and name in ("all", "any", "not"):
        values, j = [], i + 2
        while toks[j].value != ")":
            v, j = _cfg_true(toks, j, features, where)
            values.append(v)
            if toks[j].value == ",":
                j += 1
        result = {"all": all(values), "any": any(values), "not": not values[0] if values else True}[name]
        return result, j + 1
    if i + 2 < len(toks) and toks[i + 1].value == "=" and toks[i + 2].kind == "str":
        value = toks[i + 2].value
        known = {
            "feature": value in features,
            "target_os": value == "linux",
            "target_family": value == "unix",
            "target_env": value == "gnu",  # the images are Debian's glibc
        }
        if name not in known:
            raise ScanError(f"{where}:{toks[i].line}: unknown cfg key {name}")
        return known[name], i + 3
    known = {"test": False, "unix": True, "windows": False, "debug_assertions": False, "doc": False}
    if name not in known:
        raise ScanError(f"{where}:{toks[i].line}: unknown cfg {name}")
    return known[name], i + 1


def _item_end(toks: list[Tok], i: int) -> int:
    """Index just past the item or element starting at toks[i]."""
    item = toks[i].value in ITEM_KEYWORDS
    depth = 0
    j = i
    while j < len(toks):
        v = toks[j].value
        if v in "([{" and toks[j].kind == "punct":
            depth += 1
        elif v in ")]}" and toks[j].kind == "punct":
            if depth == 0:
                return j  # the enclosing block ends
            depth -= 1
            if depth == 0 and v == "}":
                return j + 1 + (j + 1 < len(toks) and toks[j + 1].value in (";", ","))
        elif depth == 0 and (v == ";" or (v == "," and not item)):
            return j + 1
        j += 1
    return j


def strip_cfg(toks: list[Tok], features: set[str], where: str) -> list[Tok]:
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        if toks[i].value == "#" and i + 2 < len(toks) and toks[i + 1].value == "[" and toks[i + 2].value == "cfg":
            value, j = _cfg_true(toks, i + 4, features, where)  # past `# [ cfg (`
            if toks[j].value != ")" or toks[j + 1].value != "]":
                raise ScanError(f"{where}:{toks[i].line}: cannot read #[cfg(...)]")
            j += 2
            if value:
                i = j
                continue
            while toks[j].value == "#" and toks[j + 1].value == "[":  # further attributes
                depth, j = 0, j + 1
                while True:
                    depth += {"[": 1, "]": -1}.get(toks[j].value, 0)
                    j += 1
                    if depth == 0:
                        break
            i = _item_end(toks, j)
            continue
        out.append(toks[i])
        i += 1
    return out


# ------------------------------------------------------------------ crates


def _is_root(path: Path) -> bool:
    return path.name in ("mod.rs", "lib.rs", "main.rs")


def module_files(root: Path, features: set[str]) -> dict[Path, list[Tok]]:
    """Every file of the module tree under `root` (src/lib.rs or src/main.rs)."""
    files: dict[Path, list[Tok]] = {}
    todo = [root]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        toks = strip_cfg(tokenize(path.read_text(), str(path)), features, str(path))
        files[path] = toks
        base = path.parent if _is_root(path) else path.parent / path.stem
        inline: list[tuple[str, int]] = []  # inline `mod x { }` blocks: (name, depth)
        depth = 0
        for k, t in enumerate(toks):
            if t.value == "#" and k + 2 < len(toks) and toks[k + 2].value == "path":
                raise ScanError(f"{path}:{t.line}: #[path] modules are not followed by this scan")
            if t.value == "{":
                depth += 1
            elif t.value == "}":
                depth -= 1
                while inline and inline[-1][1] > depth:
                    inline.pop()
            if t.value == "mod" and k + 2 < len(toks) and toks[k + 1].kind == "ident":
                name, nxt = toks[k + 1].value, toks[k + 2].value
                here = base.joinpath(*[n for n, _ in inline])
                if nxt == ";":
                    candidates = [here / f"{name}.rs", here / name / "mod.rs"]
                    found = [c for c in candidates if c.exists()]
                    if not found:
                        raise ScanError(f"{path}:{t.line}: mod {name}: none of {candidates} exists")
                    todo.append(found[0])
                elif nxt == "{":
                    inline.append((name, depth + 1))
    return files


@dataclass
class Crate:
    name: str
    dir: Path
    default_features: set[str]
    deps: list[str] = field(default_factory=list)


def workspace(repo: Path) -> dict[str, Crate]:
    members = tomllib.loads((repo / "Cargo.toml").read_text())["workspace"]["members"]
    crates = {}
    for member in members:
        manifest = tomllib.loads((repo / member / "Cargo.toml").read_text())
        name = manifest["package"]["name"]
        deps = [d for d in manifest.get("dependencies", {}) if d.startswith("millpond-")]
        defaults = set(manifest.get("features", {}).get("default", []))
        crates[name] = Crate(name, repo / member, defaults, deps)
    return crates


# ------------------------------------------------------------------ reads


@dataclass
class Reads:
    names: dict[str, set[str]] = field(default_factory=dict)  # variable -> "file:line" where read
    prefixes: dict[str, set[str]] = field(default_factory=dict)
    reported: dict[str, set[str]] = field(default_factory=dict)  # errors.push names

    def add(self, table: dict[str, set[str]], name: str, where: str) -> None:
        table.setdefault(name, set()).add(where)

    def reads(self, var: str) -> bool:
        return var in self.names or any(var.startswith(p) for p in self.prefixes)


def _close(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at toks[i]."""
    pair = {"(": ")", "[": "]", "{": "}"}[toks[i].value]
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].value == toks[i].value:
            depth += 1
        elif toks[j].value == pair:
            depth -= 1
            if depth == 0:
                return j
    raise ScanError(f"unbalanced {toks[i].value} at line {toks[i].line}")


def _open(toks: list[Tok], j: int) -> int:
    """Index of the bracket opening the one at toks[j]."""
    pair = {")": "(", "]": "[", "}": "{"}[toks[j].value]
    depth = 0
    for i in range(j, -1, -1):
        if toks[i].value == toks[j].value:
            depth += 1
        elif toks[i].value == pair:
            depth -= 1
            if depth == 0:
                return i
    raise ScanError(f"unbalanced {toks[j].value} at line {toks[j].line}")


def _args(toks: list[Tok], open_i: int) -> list[list[Tok]]:
    close = _close(toks, open_i)
    args, cur, depth = [], [], 0
    for t in toks[open_i + 1:close]:
        if t.value in "([{" and t.kind == "punct":
            depth += 1
        elif t.value in ")]}" and t.kind == "punct":
            depth -= 1
        if depth == 0 and t.value == ",":
            args.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        args.append(cur)
    return args


def _statement_end(toks: list[Tok], i: int) -> int:
    """Index of the `;` ending the statement that toks[i] is in (or of the block's end)."""
    depth = 0
    for j in range(i, len(toks)):
        v = toks[j].value
        if v in "([{" and toks[j].kind == "punct":
            depth += 1
        elif v in ")]}" and toks[j].kind == "punct":
            depth -= 1
            if depth < 0:
                return j
        elif v == ";" and depth == 0:
            return j
    return len(toks)


def _callee(toks: list[Tok], paren: int) -> int | None:
    """Index of the name called by the `(` at toks[paren], past a turbofish; None for macros and others."""
    k = paren - 1
    if k > 0 and toks[k].value == ">":
        depth = 0
        while k > 0:
            depth += {">": 1, "<": -1}.get(toks[k].value, 0)
            if depth == 0:
                break
            k -= 1
        k -= 1
        if toks[k].value != "::":
            return None
        k -= 1
    return k if k >= 0 and toks[k].kind == "ident" else None


def _chain(toks: list[Tok], name_i: int) -> list[str]:
    """For a method call `a.b().c(`, the receiver path back to its root: [c's receiver ..., root]."""
    path = []
    j = name_i - 1  # the '.'
    while j > 0 and toks[j].value == ".":
        k = j - 1
        if toks[k].value == ")":
            k = _open(toks, k) - 1
        if k < 0 or toks[k].kind != "ident":
            return path + ["?"]
        path.append(toks[k].value)
        j = k - 1
    return path


def scan_file(path: Path, toks: list[Tok], reads: Reads) -> None:
    rel = str(path)
    readers: set[str] = set()
    consts: dict[str, set[str]] = {}
    for i, t in enumerate(toks):
        # `r: &mut EnvReader`, `env: &Env`, `|r: &EnvReader<'_>|`
        if t.kind == "ident" and i + 2 < len(toks) and toks[i + 1].value == ":":
            j = i + 2
            while j + 1 < len(toks) and (toks[j].value in ("&", "mut", "::") or toks[j].kind == "lifetime"
                                         or (toks[j].kind == "ident" and toks[j + 1].value == "::")):
                j += 1
            if toks[j].value in READER_TYPES:
                readers.add(t.value)
        # `let mut r = EnvReader::new(..)`, `let env = Env::from_process()`
        if t.value == "let":
            j = i + 1 + (toks[i + 1].value == "mut")
            if toks[j + 1].value == "=" and toks[j + 2].value in READER_TYPES:
                readers.add(toks[j].value)
        # `const URL: &str = "X";` and `let var = if .. { "A" } else { "B" };`
        if t.value in ("const", "let") and i + 2 < len(toks):
            j = i + 1 + (toks[i + 1].value == "mut")
            name = toks[j].value
            eq = next((k for k in range(j, len(toks)) if toks[k].value in ("=", ";")), None)
            if eq is not None and toks[eq].value == "=":
                end = _statement_end(toks, eq + 1)
                lits = {x.value for x in toks[eq + 1:end] if x.kind == "str" and ENV_NAME.match(x.value)}
                if lits:
                    consts.setdefault(name, set()).update(lits)

    def names_in(arg: list[Tok]) -> set[str]:
        if len(arg) == 1 and arg[0].kind == "str" and ENV_NAME.match(arg[0].value):
            return {arg[0].value}
        if len(arg) == 1 and arg[0].kind == "ident":
            return consts.get(arg[0].value, set())
        return set()

    def is_reader(arg: list[Tok]) -> bool:
        vals = [a.value for a in arg]
        while vals and vals[0] in ("&", "mut", "*"):
            vals.pop(0)
        return len(vals) == 1 and vals[0] in readers

    for i, t in enumerate(toks):
        if t.value != "(" or t.kind != "punct":
            continue
        c = _callee(toks, i)
        if c is None:
            continue
        callee = toks[c].value
        args = _args(toks, i)
        where = f"{rel}:{t.line}"
        if c >= 1 and toks[c - 1].value == ".":
            path = _chain(toks, c)
            if not path or path[-1] not in readers:
                continue
            if path == ["errors", path[-1]]:
                if callee == "push" and args:
                    for name in names_in(args[0]):
                        reads.add(reads.reported, name, where)
                continue
            # Calls on the reader itself, or on `r.env()`; not on what a read returned.
            if path[:-1] not in ([], ["env"]):
                continue
            table = reads.prefixes if callee == "with_prefix" else reads.names
            for arg in args:
                for name in names_in(arg):
                    reads.add(table, name, where)
        elif any(is_reader(a) for a in args) or (
                callee in ("var", "var_os") and c >= 2 and toks[c - 1].value == "::" and toks[c - 2].value == "env"):
            for arg in args:
                for name in names_in(arg):
                    reads.add(reads.names, name, where)


def binary_reads(repo: Path, package: str, features: set[str] | None = None) -> Reads:
    """What `package`'s main binary reads, built with `features` (None: its defaults)."""
    crates = workspace(repo)
    reads = Reads()
    seen: set[str] = set()
    todo = [(package, features)]
    while todo:
        name, feats = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        crate = crates[name]
        feats = crate.default_features if feats is None else feats
        roots = [crate.dir / "src/lib.rs"] + ([crate.dir / "src/main.rs"] if name == package else [])
        for root in roots:
            if root.exists():
                for path, toks in module_files(root, feats).items():
                    scan_file(path.relative_to(repo), toks, reads)
        todo += [(d, None) for d in crate.deps]
    unread = sorted(set(reads.reported) - set(reads.names))
    if unread:
        where = {n: sorted(reads.reported[n]) for n in unread}
        raise ScanError(f"{package}: errors name variables the scan finds no read of: {where} "
                        "(a read pattern this scan does not know, or a variable nobody reads)")
    if not reads.names:
        raise ScanError(f"{package}: no variable read found")
    return reads
