"""Scenario checks of the emulator's POST /v1/catalogs/{c}/commit/mutations/prepared.

The writer fences Kafka partitions with per-partition offsets tables: each
flush appends a row-file to its partitions' offsets tables and sends, in the
same request, an EMPTY delete group for each of them, so the server's
read-set rule refuses the flush if any of those tables changed since
``read_snapshot``. pyhoglake 1.3.11 has no client for this route, so the
requests are raw HTTP; every check reads the state back through the API.

Run by check_hoglake_emulator.py (``MUTATION_CHECKS`` take its Scenario;
``check_default_capabilities`` starts emulators of its own).
"""

from __future__ import annotations

import copy
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pyarrow as pa
import pyhoglake
from pyhoglake import ops

from hoglake_check_support import arrow_rows, check, expect_raises
from hoglake_emulator_harness import EmulatorProcess

if TYPE_CHECKING:
    from check_hoglake_emulator import Scenario

ROUTE = "/catalogs/ops/commit/mutations/prepared"
NS = "analytics"


def mutate(s: Scenario, body: dict[str, Any]) -> httpx.Response:
    """POST the body to the mutation route."""
    return s.emu.api("POST", ROUTE, json=body)


def fence(table: pyhoglake.Table, expected_uuid: str | None = None) -> dict[str, Any]:
    """An empty delete group on ``table``, guarded by its uuid."""
    return {"namespace": NS, "table": table.name, "expected_table_uuid": expected_uuid or table.table_uuid, "files": []}


def flush(s: Scenario, appended: list[pyhoglake.Table], fenced: list[pyhoglake.Table], read_snapshot: int,
          key: str | None = None, first_id: int = 0) -> dict[str, Any]:  # fmt: skip
    """A writer flush: one prepared file per appended table, an empty delete group per fenced table."""
    appends = [s.prepare(table, first_id + 10 * i)["appends"][0] for i, table in enumerate(appended)]
    return {
        "idempotency_key": key or str(uuid.uuid4()),
        "read_snapshot": read_snapshot,
        "appends": appends,
        "deletes": [fence(t) for t in fenced],
    }


def snapshot_changes(s: Scenario, snapshot_id: int) -> list[tuple[str, int]]:
    """The (kind, object_id) change rows of one snapshot, from GET …/snapshots."""
    page = s.emu.api("GET", "/catalogs/ops/snapshots", params={"after": snapshot_id - 1, "limit": 1}).json()
    snap = page["snapshots"][0]
    check(snap["snapshot_id"] == snapshot_id, f"snapshot listing returned {snap['snapshot_id']}, wanted {snapshot_id}")
    return [(c["kind"], c["object_id"]) for c in snap["changes"]]


def file_counts(s: Scenario, *names: str) -> dict[str, int]:
    """How many files each table has at head."""
    return {name: len(s.paths(name)) for name in names}


def expect_status(resp: httpx.Response, status: int, error: str | None, what: str) -> dict[str, Any]:
    """The response must have ``status`` and ``error``; returns its body."""
    body = resp.json() if resp.content else {}
    check(resp.status_code == status, f"{what}: answered {resp.status_code} {resp.text}, expected {status}")
    check(body.get("error") == error, f"{what}: error {body.get('error')!r}, expected {error!r}")
    return body


# -- the scenarios ---------------------------------------------------------------------------


def scenario_mutation_empty_group_commits(s: Scenario) -> None:
    """Appends plus an empty delete group publish as ONE snapshot; a request of only empty groups still commits."""
    data, offsets = s.table("m_data"), s.table("m_offsets")
    head = s.head()
    body = flush(s, [data, offsets], [offsets], head)
    resp = mutate(s, body)
    check(resp.status_code == 200, f"flush with an empty group answered {resp.status_code} {resp.text}")
    result = resp.json()
    check(result["snapshot_id"] == head + 1 and s.head() == head + 1, f"flush landed at {result}, head {s.head()}")
    check(file_counts(s, "m_data", "m_offsets") == {"m_data": 1, "m_offsets": 1}, "the flush's files are not at head")
    receipt = s.receipt(body["idempotency_key"])
    check(receipt.status_code == 200 and receipt.json()["snapshot_id"] == head + 1, f"receipt {receipt.text}")
    changes = snapshot_changes(s, head + 1)
    kinds = sorted(kind for kind, _ in changes)
    check(kinds == ["data_appended", "data_appended", "table_deleted_from"], f"change rows {changes}")
    probe = {"idempotency_key": str(uuid.uuid4()), "read_snapshot": head + 1, "deletes": [fence(offsets)]}
    resp = mutate(s, probe)
    check(resp.status_code == 200 and resp.json()["snapshot_id"] == head + 2, f"empty-groups-only: {resp.status_code} {resp.text}")
    fenced_id = next(oid for kind, oid in changes if kind == "table_deleted_from")
    check(snapshot_changes(s, head + 2) == [("table_deleted_from", fenced_id)], "empty-groups-only change rows")
    check(file_counts(s, "m_data", "m_offsets") == {"m_data": 1, "m_offsets": 1}, "an empty group registered files")


def scenario_mutation_stale_group_conflicts(s: Scenario) -> None:
    """A fenced table changed after read_snapshot -> 409 commit_conflict, nothing written to any table of the request."""
    data, offsets = s.table("f_data"), s.table("f_offsets")
    read = s.head()
    offsets.commit_prepared(s.prepare(offsets, 900))  # a second owner's flush appends to the offsets table
    head = s.head()
    body = flush(s, [data, offsets], [offsets], read)
    resp = mutate(s, body)
    expect_status(resp, 409, "commit_conflict", "stale empty group")
    check(s.head() == head, "the refused flush allocated a snapshot")
    check(file_counts(s, "f_data", "f_offsets") == {"f_data": 0, "f_offsets": 1}, "the refused flush wrote files")
    check(s.receipt(body["idempotency_key"]).status_code == 404, "a refused flush stored a receipt")
    # The other owner's empty group alone (no appends) fences just the same.
    read = s.head()
    other = mutate(s, {"idempotency_key": str(uuid.uuid4()), "read_snapshot": read, "deletes": [fence(offsets)]})
    check(other.status_code == 200, f"other owner's empty group: {other.status_code} {other.text}")
    again = flush(s, [data], [offsets], read)
    expect_status(mutate(s, again), 409, "commit_conflict", "group staled by another empty group")
    # Re-read: the same key with a fresh read_snapshot publishes (no receipt was stored).
    rebuilt = flush(s, [data, offsets], [offsets], s.head(), key=body["idempotency_key"])
    resp = mutate(s, rebuilt)
    check(resp.status_code == 200, f"re-read flush under the same key: {resp.status_code} {resp.text}")
    check(file_counts(s, "f_data", "f_offsets") == {"f_data": 1, "f_offsets": 2}, "re-read flush did not land once")


def scenario_mutation_append_only_tables(s: Scenario) -> None:
    """A table the request only appends to keeps the DDL-only rule: a concurrent insert there does not conflict."""
    data, offsets = s.table("a_data"), s.table("a_offsets")
    read = s.head()
    data.commit_prepared(s.prepare(data, 800))  # someone else appends to the data table only
    resp = mutate(s, flush(s, [data, offsets], [offsets], read))
    check(resp.status_code == 200, f"append-only table changed by others: {resp.status_code} {resp.text}")
    check(file_counts(s, "a_data", "a_offsets") == {"a_data": 2, "a_offsets": 1}, "files after the flush")
    read = s.head()
    s.namespace.table("a_data").alter([ops.add_column("late", pa.string())])
    head = s.head()
    body = expect_status(mutate(s, flush(s, [data], [offsets], read)), 409, "ddl_since_read_snapshot", "DDL on appended table")
    check(body.get("tables") == [f"{NS}.a_data"] and body.get("retry") == "re-prepare", f"ddl refusal body {body}")
    check(body.get("read_snapshot") == read, f"ddl refusal read_snapshot {body.get('read_snapshot')}")
    s.namespace.table("a_offsets").alter([ops.add_column("late", pa.string())])
    fresh_data = s.namespace.table("a_data")
    body = expect_status(mutate(s, flush(s, [fresh_data], [offsets], read)), 409, "ddl_since_read_snapshot", "DDL on fenced table")
    check(body.get("tables") == [f"{NS}.a_data", f"{NS}.a_offsets"], f"ddl refusal tables {body.get('tables')}")
    check(s.head() == head + 1 and file_counts(s, "a_data") == {"a_data": 2}, "a DDL-refused flush wrote something")
    offsets.commit_prepared(s.prepare(s.namespace.table("a_offsets"), 600))  # DDL on a_data AND an insert on the fence
    mixed = expect_status(mutate(s, flush(s, [fresh_data], [offsets], read)), 409, "commit_conflict", "DDL plus insert")
    check("tables" not in mixed and "retry" not in mixed, f"a row-content conflict carries re-prepare fields: {mixed}")


def scenario_mutation_refusals(s: Scenario) -> None:
    """Route rules: 422 without deletes/key/read_snapshot/guards, 501 for real vectors, 400 off-shape; none writes."""
    data, offsets = s.table("r_data"), s.table("r_offsets")
    head = s.head()
    base = flush(s, [data], [offsets], head)

    def variant(change: Any) -> dict[str, Any]:
        body = copy.deepcopy(base)
        body["idempotency_key"] = str(uuid.uuid4())
        change(body)
        return body

    vector = {"data_file_id": 1, "path": "s3://lake/ops/data/dv.puffin", "delete_count": 1, "file_size_bytes": 40}
    cases: list[tuple[str, int, str, dict[str, Any]]] = [
        ("deletes missing", 422, "validation", variant(lambda b: b.pop("deletes"))),
        ("deletes empty", 422, "validation", variant(lambda b: b.update(deletes=[]))),
        ("key missing", 422, "validation", variant(lambda b: b.pop("idempotency_key"))),
        ("read_snapshot missing", 422, "validation", variant(lambda b: b.pop("read_snapshot"))),
        ("unguarded delete group", 422, "validation", variant(lambda b: b["deletes"][0].pop("expected_table_uuid"))),
        ("unguarded append", 422, "validation", variant(lambda b: b["appends"][0].pop("expected_table_uuid"))),
        ("unknown fenced table", 422, "validation", variant(lambda b: b["deletes"][0].update(table="nope"))),
        ("read_snapshot past head", 422, "validation", variant(lambda b: b.update(read_snapshot=head + 9))),
        ("non-empty files (a vector)", 501, "not_implemented", variant(lambda b: b["deletes"][0]["files"].append(vector))),
        ("unknown field in a group", 400, "bad_request", variant(lambda b: b["deletes"][0].update(extra=1))),
        ("vector missing delete_count", 400, "bad_request",
         variant(lambda b: b["deletes"][0]["files"].append({k: v for k, v in vector.items() if k != "delete_count"}))),
    ]  # fmt: skip
    for label, status, error, body in cases:
        expect_status(mutate(s, body), status, error, label)
        if "idempotency_key" in body:
            check(s.receipt(body["idempotency_key"]).status_code == 404, f"{label}: stored a receipt")
    plain = s.emu.api("POST", "/catalogs/ops/commit/prepared", json=variant(lambda b: None))
    expect_status(plain, 422, "validation", "empty delete group on /commit/prepared")
    check(s.head() == head and file_counts(s, "r_data", "r_offsets") == {"r_data": 0, "r_offsets": 0}, "a refusal wrote")


def scenario_mutation_replay(s: Scenario) -> None:
    """Exact (and reordered) replays answer the receipt even after a conflicting change; another payload is 422."""
    data, offsets, offsets2 = s.table("p_data"), s.table("p_offsets"), s.table("p_offsets2")
    body = flush(s, [data, offsets, offsets2], [offsets, offsets2], s.head())
    first = mutate(s, body)
    check(first.status_code == 200, f"first flush {first.status_code} {first.text}")
    landed = first.json()
    offsets.commit_prepared(s.prepare(offsets, 700))  # now the groups are stale for a NEW request
    head = s.head()
    replay = mutate(s, body)
    check(replay.status_code == 200 and replay.json() == landed, f"exact replay: {replay.status_code} {replay.text}")
    reordered = copy.deepcopy(body)
    reordered["appends"].reverse()
    reordered["deletes"].reverse()
    again = mutate(s, reordered)
    check(again.status_code == 200 and again.json() == landed, f"reordered replay: {again.status_code} {again.text}")
    check(s.head() == head and file_counts(s, "p_data") == {"p_data": 1}, "a replay published again")
    for label, change in (
        ("one group fewer", lambda b: b["deletes"].pop()),
        ("another read_snapshot", lambda b: b.update(read_snapshot=b["read_snapshot"] - 1)),
        ("another group uuid", lambda b: b["deletes"][0].update(expected_table_uuid=str(uuid.uuid4()))),
    ):
        changed = copy.deepcopy(body)
        change(changed)
        err = expect_status(mutate(s, changed), 422, "validation", f"{label} under a used key")
        check("idempotency_key reused" in err.get("detail", ""), f"{label}: detail {err.get('detail')!r}")
    # A lost response (fault injection on this route): the replay answers the same snapshot, rows land once.
    lost = flush(s, [data], [offsets2], s.head())
    s.emu.add_fault({"method": "POST", "path": r"/commit/mutations/prepared$", "action": "drop_response_after_commit"})
    expect_raises(httpx.TransportError, lambda: mutate(s, lost), "a flush whose response is dropped")
    check(s.emu.faults()[-1]["fired"] == 1, "the fault on the mutation route did not fire")
    replay = mutate(s, lost)
    check(replay.status_code == 200 and replay.json()["snapshot_id"] == head + 1, f"replay after a lost response {replay.text}")
    check(s.head() == head + 1 and file_counts(s, "p_data") == {"p_data": 2}, "lost-response flush not applied exactly once")


def scenario_mutation_table_recreated(s: Scenario) -> None:
    """A delete group pinned to a dropped incarnation -> 409 table_recreated, zero writes to any table."""
    data, offsets = s.table("t_data"), s.table("t_offsets")
    old_uuid = offsets.table_uuid
    s.namespace.table("t_offsets").drop()
    s.table("t_offsets")
    head = s.head()
    body = flush(s, [data], [], head)
    body["deletes"] = [fence(offsets, expected_uuid=old_uuid)]
    err = expect_status(mutate(s, body), 409, "table_recreated", "group pinned to the old incarnation")
    check(err.get("tables") == [f"{NS}.t_offsets"] and err.get("retry") == "re-prepare", f"table_recreated body {err}")
    check(s.head() == head and file_counts(s, "t_data") == {"t_data": 0}, "table_recreated wrote something")
    check(s.receipt(body["idempotency_key"]).status_code == 404, "table_recreated stored a receipt")


def scenario_mutation_partitioned_offsets(s: Scenario) -> None:
    """An offsets table partitioned by two identity fields: flushes through the route, head row read by partition."""
    schema = pa.schema([pa.field("partition", pa.int64()), pa.field("shard", pa.int64()), pa.field("offset", pa.int64())])
    table = s.table("o_offsets", schema)
    table.alter([ops.set_partition_spec([ops.partition_field(1, "identity"), ops.partition_field(2, "identity")])])
    table = s.namespace.table("o_offsets")
    landed: dict[tuple[str | None, ...], list[int]] = {}
    for part, shard, offset in [(42, -3, 10), (42, None, 11), (7, -3, 12), (-3, 42, 13), (42, -3, 14)]:
        values = (str(part), None if shard is None else str(shard))
        rows = arrow_rows(table, [{"partition": part, "shard": shard, "offset": offset}])
        payload = table.prepare_append_tables([(rows, values)], idempotency_key=str(uuid.uuid4()))
        body = {"idempotency_key": payload["idempotency_key"], "read_snapshot": s.head(),
                "appends": payload["appends"], "deletes": [fence(table)]}  # fmt: skip
        resp = mutate(s, body)
        check(resp.status_code == 200, f"partitioned flush {values}: {resp.status_code} {resp.text}")
        landed.setdefault(values, []).append(resp.json()["snapshot_id"])
    head = s.head()

    def listing(partition: str, **extra: Any) -> list[dict[str, Any]]:
        params = {"snapshot": head, "partition": partition, **extra}
        resp = s.emu.api("GET", f"/catalogs/ops/namespaces/{NS}/tables/o_offsets/files", params=params)
        check(resp.status_code == 200, f"files?partition={partition}: {resp.status_code} {resp.text}")
        return resp.json()

    newest = listing("0:42", sort="begin_snapshot", order="desc", limit=1)
    check(len(newest) == 1 and newest[0]["begin_snapshot"] == landed[("42", "-3")][-1], f"head row of partition 42: {newest}")
    check(newest[0]["partition_values"] == ["42", "-3"], f"head row values {newest[0]['partition_values']}")
    check(len(listing("0:42")) == 3, "partition 0:42 should list three files")
    only = listing("0:-3")
    check([f["partition_values"] for f in only] == [["-3", "42"]], f"partition 0:-3 lists {only}")
    check(sorted(f["begin_snapshot"] for f in listing("1:-3")) == sorted(landed[("42", "-3")] + landed[("7", "-3")]),
          "partition 1:-3 listing")  # fmt: skip
    check(listing("0:4") == [] and listing("1:42")[0]["partition_values"] == ["-3", "42"], "values compared as whole strings")


def check_default_capabilities() -> None:
    """The default emulator advertises idempotent-mutation-v1; --capabilities replaces the list."""
    for args, want in (((), "idempotent-mutation-v1"), (("--capabilities", "atomic-table-creation-v1"), None)):
        with EmulatorProcess(*args) as emu:
            created = emu.api("POST", "/catalogs", json={"name": "caps", "data_path": "s3://caps/"}).json()
            listed = emu.api("GET", "/catalogs/caps").json()["capabilities"]
            check(created["capabilities"] == listed, f"create and get disagree: {created['capabilities']} {listed}")
            if want is None:
                check(listed == ["atomic-table-creation-v1"], f"--capabilities ignored: {listed}")
            else:
                check(want in listed and "idempotent-append-v1" in listed, f"default capabilities {listed}")


MUTATION_CHECKS = [
    scenario_mutation_empty_group_commits,
    scenario_mutation_stale_group_conflicts,
    scenario_mutation_append_only_tables,
    scenario_mutation_refusals,
    scenario_mutation_replay,
    scenario_mutation_table_recreated,
    scenario_mutation_partitioned_offsets,
]
