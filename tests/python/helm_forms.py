#!/usr/bin/env python3
"""The two forms of the chart's `pipelines` (a list of entries with a name,
or the original's map keyed by name), for tests/python/check_helm_chart.py:
the Python model of what the chart reads, conversions between the forms,
and the checks that both render the same objects."""

from __future__ import annotations

import copy
from typing import Any

import yaml

import helm_template as ht

RELEASE, NAMESPACE = "millpond", "lake"

# What an entry of either form gets when it leaves a key out (the chart's
# millpond.pipelineDefaults).
PIPELINE_DEFAULTS = {"destination": "ducklake"}


def entries(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipelines of either form as list entries with the defaults, as the
    chart reads them (millpond.pipelines): a map's key is the name, a null
    map entry is no pipeline."""
    pipes = values.get("pipelines") or []
    if isinstance(pipes, dict):
        pipes = [{"name": k, **v} for k, v in sorted(pipes.items()) if v is not None]
    return [{**PIPELINE_DEFAULTS, **p} for p in pipes]


def as_map(values: dict[str, Any]) -> dict[str, Any]:
    """The same values with `pipelines` in the original's map form."""
    out = copy.deepcopy(values)
    out["pipelines"] = {p["name"]: {k: v for k, v in p.items() if k != "name"} for p in out["pipelines"]}
    return out


def as_list(values: dict[str, Any]) -> dict[str, Any]:
    """The same values with `pipelines` in the chart's list form, entries as written."""
    out = copy.deepcopy(values)
    out["pipelines"] = [{"name": k, **v} for k, v in out["pipelines"].items() if v is not None]
    return out


def map_form(values: dict[str, Any]) -> dict[str, Any]:
    """Turns values' `pipelines` into the map form in place (once); returns the map."""
    if isinstance(values["pipelines"], list):
        values["pipelines"] = as_map(values)["pipelines"]
    return values["pipelines"]


# The two forms of `pipelines`. Templates that still range over
# .Values.pipelines themselves see only the list form; while any does, the
# forms are compared without the objects it makes (maintenance off).
NOT_ON_THE_HELPER: set[str] = set()


def same_render(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Both values render the same objects, each byte for byte (the map
    form comes in key order, the list in its own, so not in one order)."""
    if NOT_ON_THE_HELPER:
        a, b = copy.deepcopy(a), copy.deepcopy(b)
        for v in (a, b):
            v.setdefault("maintenance", {})["enabled"] = False

    def objects(values: dict[str, Any]) -> dict[tuple[str, str], str]:
        out = {}
        for _, doc in ht.manifests(ht.render_files(values, RELEASE, NAMESPACE)):
            body = yaml.safe_load(doc)
            out[(body["kind"], body["metadata"]["name"])] = doc
        return out

    left, right = objects(a), objects(b)
    problems = [f"{k}/{n} only in the first" for k, n in sorted(left.keys() - right.keys())]
    problems += [f"{k}/{n} only in the second" for k, n in sorted(right.keys() - left.keys())]
    for key in sorted(left.keys() & right.keys()):
        if left[key] != right[key]:
            diff = next(f"{x!r} vs {y!r}" for x, y in zip(left[key].splitlines() + [""], right[key].splitlines() + [""]) if x != y)
            problems.append(f"{key[0]}/{key[1]} differs: {diff}")
    return problems if left else ["nothing rendered"]


def with_destination(values: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(values)
    for p in out["pipelines"].values():
        p["destination"] = "ducklake"
    return out


def with_null_entry(values: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(values)
    out["pipelines"]["removed"] = None
    return out


def forms_comparison_bites() -> list[str]:
    """same_render finds one changed key of one entry of the map form."""
    original = ht.load_values([ht.ORIGINAL_VALUES])
    changed = copy.deepcopy(original)
    next(iter(changed["pipelines"].values()))["replicas"] += 1
    return [] if same_render(original, changed) else ["a changed replicas rendered the same"]


def templates_use_the_helper() -> list[str]:
    problems = []
    for t in sorted((ht.CHART / "templates").iterdir()):
        if t.name == "_helpers.tpl":
            continue
        direct = ".Values.pipelines" in t.read_text()
        if direct and t.name not in NOT_ON_THE_HELPER:
            problems.append(f"{t.name} ranges over .Values.pipelines: use millpond.pipelines, which reads both forms")
        if not direct and t.name in NOT_ON_THE_HELPER:
            problems.append(f"{t.name} uses millpond.pipelines now: drop it from NOT_ON_THE_HELPER so the forms are compared with it")
    return problems
