"""DoPut one flush into a Millpond writer with pyarrow.flight, the way an
operator replaying data by hand would, and print the writer's JSON ack.

With STREAMED=1 in the environment the flush goes as ingest streams it: a
head descriptor saying "trailer", the rows in batches of 1,000, then the
whole descriptor as the stream's last message (write_metadata)."""
import json
import os
import sys

import pyarrow as pa
import pyarrow.flight as flight

addr, flush_id, partition, first, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
table = pa.table({
    "id": pa.array(range(first, first + n), pa.int64()),
    "name": pa.array([f"py-{i}" for i in range(first, first + n)]),
    "score": pa.array([i / 2 for i in range(n)], pa.float64()),
})
last = first + n - 1
descriptor = {
    "flush_id": flush_id,
    "trigger": "size",
    "ranges": [{"topic": "events", "partition": partition, "first": first, "last": last}],
}
if len(sys.argv) > 6:
    # One more offset after the rows, which was not a JSON object.
    descriptor["ranges"][0]["last"] = last + 1
    descriptor["dead_letters"] = [{
        "topic": "events", "partition": partition, "offset": last + 1,
        "timestamp_ms": 1700000000000, "key": None,
        "reason": "invalid_json", "original": sys.argv[6],
    }]
cmd = json.dumps(descriptor)
client = flight.connect(f"grpc://{addr}")
if os.environ.get("STREAMED") == "1":
    head = json.dumps({"flush_id": flush_id, "trailer": True})
    writer, reader = client.do_put(flight.FlightDescriptor.for_command(head.encode()), table.schema)
    writer.write_table(table, max_chunksize=1000)
    writer.write_metadata(pa.py_buffer(cmd.encode()))
else:
    writer, reader = client.do_put(flight.FlightDescriptor.for_command(cmd.encode()), table.schema)
    # One un-split batch, larger than gRPC's default 4 MiB message limit when n is big.
    writer.write_table(table, max_chunksize=n)
writer.done_writing()
ack = reader.read()
writer.close()
print(ack.to_pybytes().decode())
