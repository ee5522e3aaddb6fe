"""Pushes flushes to several writers at once over Arrow Flight, each writer
on its own partitions, and prints rows/s. Used by scripts/bench-fence.sh."""
import json
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

addrs = sys.argv[1].split(",")
flushes, rows, partitions = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
per_partition = rows // partitions


def table(start):
    return pa.table({
        "id": pa.array(range(start, start + rows), pa.int64()),
        "name": pa.array([f"row-{i}" for i in range(start, start + rows)]),
        "score": pa.array([i / 3 for i in range(rows)], pa.float64()),
    })


def push(w, addr, errors):
    try:
        client = flight.connect(f"grpc://{addr}")
        for f in range(flushes):
            first = f * per_partition
            ranges = [{"topic": "events", "partition": w * partitions + p,
                       "first": first, "last": first + per_partition - 1} for p in range(partitions)]
            cmd = json.dumps({"flush_id": f"w{w}-f{f}", "ranges": ranges, "expected_rows": rows})
            t = table((w * flushes + f) * rows)
            writer, reader = client.do_put(flight.FlightDescriptor.for_command(cmd.encode()), t.schema)
            writer.write_table(t)
            writer.done_writing()
            ack = json.loads(reader.read().to_pybytes())
            writer.close()
            assert ack["outcome"] == "written", ack
    except Exception as e:  # noqa: BLE001
        errors.append(f"writer {w}: {e}")


errors = []
threads = [threading.Thread(target=push, args=(w, a, errors)) for w, a in enumerate(addrs)]
start = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.monotonic() - start
if errors:
    sys.exit("; ".join(errors))
total = len(addrs) * flushes * rows
print(f"{len(addrs)} writers x {flushes} flushes x {rows} rows ({partitions} partitions each): "
      f"{wall:.2f} s, {total / wall:.0f} rows/s")
