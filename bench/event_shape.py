#!/usr/bin/env python3
"""The statistics that say what a file of benchmark events looks like.

  bench/event_shape.py FILE [FILE ...]    one column of figures per file

FILE holds one message value per line, as `bench/gen_events.py --out` writes
them (an empty line is a tombstone or an empty value). The figures are the
shape every benchmark figure depends on: message size, the share of each
poison kind, how many distinct keys the top level and `properties` carry, and
how skewed event names and team ids are. tests/python/check_gen_events.py
checks the generator's output against them; run this on two generators'
files (same --count) to compare their workloads.
"""
from __future__ import annotations

import json
import sys
from collections import Counter

INT64_MAX = 2**63 - 1


def classify(line: bytes) -> tuple[str, object]:
    """The message's kind as bench/gen_events.py names it, and the parsed value.
    Tombstones and empty values both read back as 'empty'."""
    if not line:
        return "empty", None
    try:
        value = json.loads(line)
    except ValueError:
        return "invalid_json", None
    if isinstance(value, list):
        return "json_array", value
    if not isinstance(value, dict):
        return "json_scalar", value
    if any(isinstance(v, int) and not isinstance(v, bool) and v > INT64_MAX for v in value.values()):
        return "bigint", value
    return "valid", value


def shape(lines) -> dict:
    """Figures of an iterable of message values (bytes, without newlines)."""
    kinds: Counter = Counter()
    events: Counter = Counter()
    teams: Counter = Counter()
    top_keys: set = set()
    property_keys: Counter = Counter()
    sizes, property_counts, nested, nulls, chains, objects = [], [], 0, 0, 0, 0
    for line in lines:
        kind, value = classify(line)
        kinds[kind] += 1
        if line:
            sizes.append(len(line))
        if not isinstance(value, dict):
            continue
        objects += 1
        events[value.get("event")] += 1
        teams[value.get("team_id")] += 1
        top_keys.update(value)
        nested += any(isinstance(v, (dict, list)) for v in value.values())
        nulls += any(v is None for v in value.values())
        chains += bool(value.get("elements_chain"))
        props = value.get("properties")
        if isinstance(props, str):
            keys = json.loads(props)
            property_keys.update(keys.keys())
            property_counts.append(len(keys))
    total = sum(kinds.values())
    ranked = [n for _, n in events.most_common()]
    team_ranked = [n for _, n in teams.most_common()]
    per_object = max(objects, 1)
    return {
        "messages": total,
        "mean value bytes": round(sum(sizes) / max(len(sizes), 1), 1),
        "JSON objects %": round(100 * objects / max(total, 1), 2),
        **{f"{k} %": round(100 * kinds[k] / max(total, 1), 2)
           for k in ("bigint", "invalid_json", "json_array", "json_scalar", "empty")},
        "distinct top-level keys": len(top_keys),
        "distinct properties keys": len(property_keys),
        "properties keys in < 1 % of events": sum(1 for n in property_keys.values() if n < objects / 100),
        "mean properties keys": round(sum(property_counts) / max(len(property_counts), 1), 1),
        "distinct events": len(events),
        "top event %": round(100 * ranked[0] / per_object, 1) if ranked else 0,
        "top 5 events %": round(100 * sum(ranked[:5]) / per_object, 1),
        "distinct teams": len(teams),
        "top team %": round(100 * team_ranked[0] / per_object, 1) if team_ranked else 0,
        "top 10 teams %": round(100 * sum(team_ranked[:10]) / per_object, 1),
        "objects with a nested value %": round(100 * nested / per_object, 2),
        "objects with a null value %": round(100 * nulls / per_object, 2),
        "objects with an elements_chain %": round(100 * chains / per_object, 2),
    }


def read_lines(path: str):
    with open(path, "rb") as f:
        for line in f:
            yield line.rstrip(b"\n")


def main(paths: list[str]) -> int:
    if not paths:
        sys.exit(__doc__)
    columns = [shape(read_lines(p)) for p in paths]
    width = max(len(k) for k in columns[0])
    print(f"{'':{width}}  " + "  ".join(f"{p[-24:]:>24}" for p in paths))
    for key in columns[0]:
        print(f"{key:{width}}  " + "  ".join(f"{c[key]:>24}" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
