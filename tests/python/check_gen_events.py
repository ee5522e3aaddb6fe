"""Checks the benchmark's workload generator, bench/gen_events.py: the same
arguments give the same bytes (and a shorter run is a prefix of a longer
one), its summary agrees with what it wrote, and the events have the shape
every benchmark figure is quoted for (bench/event_shape.py's figures within
the ranges below).

Usage: check_gen_events.py (no arguments; runs the generator with the
Python running this). Prints one line per check and "N passed, M failed";
exits 1 when any check failed.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import event_shape  # noqa: E402

COUNT = 30_000  # past 25,000: one new column appears
POISON_RATE = 0.02
INT64_MAX = 2**63 - 1
results: list[bool] = []


def check(name: str, ok: bool, detail: object = "") -> None:
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + str(detail)}", flush=True)


def generate(work: Path, name: str, count: int, seed: int, poison_rate: float) -> tuple[bytes, dict]:
    out, stats = work / f"{name}.jsonl", work / f"{name}.json"
    run = subprocess.run([sys.executable, str(BENCH / "gen_events.py"), "--count", str(count), "--seed", str(seed),
                          "--poison-rate", str(poison_rate), "--out", str(out), "--stats-out", str(stats)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"gen_events.py exited {run.returncode}: {run.stderr}")
    return out.read_bytes(), json.loads(stats.read_text())


def within(name: str, value: float, low: float, high: float) -> None:
    check(f"{name} is {value}, within [{low:g}, {high:g}]", low <= value <= high, value)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="check-gen-events-") as tmp:
        work = Path(tmp)
        data, stats = generate(work, "a", COUNT, 42, POISON_RATE)
        again, _ = generate(work, "b", COUNT, 42, POISON_RATE)
        shorter, _ = generate(work, "c", 5_000, 42, POISON_RATE)
        other, _ = generate(work, "d", 5_000, 43, POISON_RATE)

    check("the same arguments give the same bytes", data == again, f"{len(data)} vs {len(again)} bytes")
    check("a shorter run is a prefix of a longer one", data.startswith(shorter))
    check("another seed gives other events", other != shorter)

    lines = data.split(b"\n")
    check("one line per message, so no value holds a newline", lines[-1] == b"" and len(lines) - 1 == COUNT,
          len(lines) - 1)
    lines = lines[:-1]
    parsed = [event_shape.classify(line) for line in lines]
    objects = [value for kind, value in parsed if kind in ("valid", "bigint")]

    # The summary the scripts check the lakes against.
    kinds = stats["kinds"]
    check("the summary's kinds add up to --count", sum(kinds.values()) == COUNT, kinds)
    check("json_objects == the JSON objects written", stats["json_objects"] == len(objects),
          (stats["json_objects"], len(objects)))
    check("team_id_sum == the sum over the objects written",
          stats["team_id_sum"] == sum(o["team_id"] for o in objects))
    keys = list(dict.fromkeys(k for o in objects for k in o))
    check("top_level_keys == the objects' keys, in first-seen order", stats["top_level_keys"] == keys)
    check("value_bytes == the bytes written", stats["value_bytes"] == sum(len(line) for line in lines))
    check("empty lines == tombstones + empty values",
          sum(1 for line in lines if not line) == kinds["tombstone"] + kinds["empty"])
    for kind in ("bigint", "invalid_json", "json_array", "json_scalar"):
        found = sum(1 for k, _ in parsed if k == kind)
        check(f"{kind}: as many read back as the summary says", found == kinds[kind], (found, kinds[kind]))

    # What a pipeline relies on to land every object.
    types: dict[str, set] = {}
    for o in objects:
        for k, v in o.items():
            if v is not None:
                types.setdefault(k, set()).add(type(v).__name__)
    mixed = {k: t for k, t in types.items() if len(t) > 1}
    check("each top-level key keeps one JSON type", not mixed, mixed)
    check("uuid, event and team_id are never null",
          all(o.get("uuid") and o.get("event") and isinstance(o.get("team_id"), int) for o in objects))
    check("uuids are distinct", len({o["uuid"] for o in objects}) == len(objects))
    bigs = [o["big_id"] for o in objects if "big_id" in o]
    check("every big_id lies in (2^63, 2^64)", bigs and all(INT64_MAX < b < 2**64 for b in bigs), bigs[:3])
    check("a new column arrives at the 25,000th event", "late_column_1" in keys, keys[-5:])

    # The shape the benchmark figures are quoted for.
    s = event_shape.shape(lines)
    print("shape: " + json.dumps(s))
    expected_share = round(100 * POISON_RATE / 6, 3)
    within("mean value bytes", s["mean value bytes"], 1150, 1400)
    for kind in ("bigint", "invalid_json", "json_array", "json_scalar"):
        within(f"{kind} %", s[f"{kind} %"], 0.6 * expected_share, 1.4 * expected_share)
    within("empty % (tombstones and empty values)", s["empty %"], 1.2 * expected_share, 2.8 * expected_share)
    within("distinct top-level keys", s["distinct top-level keys"], 22, 40)
    within("distinct properties keys", s["distinct properties keys"], 2500, 5000)
    within("share of properties keys in < 1 % of events",
           round(s["properties keys in < 1 % of events"] / s["distinct properties keys"], 3), 0.95, 1.0)
    within("mean properties keys", s["mean properties keys"], 18, 23)
    within("distinct events", s["distinct events"], 50, 50)
    within("top event %", s["top event %"], 20, 32)
    within("top 5 events %", s["top 5 events %"], 50, 63)
    within("distinct teams", s["distinct teams"], 150, 200)
    within("top team %", s["top team %"], 20, 32)
    within("objects with a nested value %", s["objects with a nested value %"], 4, 10)
    within("objects with a null value %", s["objects with a null value %"], 1.5, 5)
    within("objects with an elements_chain %", s["objects with an elements_chain %"], 8, 20)

    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
