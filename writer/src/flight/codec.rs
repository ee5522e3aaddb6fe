//! FlushDescriptor / FlushAck / WriteError on the wire.
use bytes::Bytes;
use millpond_proto::{
    AckOutcome, FlushAck, FlushDescriptor, FlushTrigger, OffsetRange, WriteError,
};
use prost::Message;
use serde_json::{json, Value};

/// How the client encoded its descriptor; the ack mirrors it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

/// Parses `cmd`: JSON when it starts with `{`, protobuf otherwise.
pub fn decode_descriptor(cmd: &[u8]) -> Result<(FlushDescriptor, Encoding), String> {
    if cmd.first() == Some(&b'{') {
        let v: Value = serde_json::from_slice(cmd).map_err(|e| format!("descriptor JSON: {e}"))?;
        return Ok((descriptor_from_json(&v)?, Encoding::Json));
    }
    FlushDescriptor::decode(cmd)
        .map(|d| (d, Encoding::Protobuf))
        .map_err(|e| format!("descriptor protobuf: {e}"))
}

fn descriptor_from_json(v: &Value) -> Result<FlushDescriptor, String> {
    let flush_id = v["flush_id"]
        .as_str()
        .ok_or("flush_id (string) is required")?
        .to_owned();
    let trigger = match v["trigger"].as_str().unwrap_or("") {
        "size" => FlushTrigger::Size,
        "time" => FlushTrigger::Time,
        "shutdown" => FlushTrigger::Shutdown,
        _ => FlushTrigger::Unspecified,
    };
    let mut ranges = Vec::new();
    for r in v["ranges"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let field = |k: &str| {
            r[k].as_i64()
                .ok_or(format!("ranges[].{k} (integer) is required"))
        };
        ranges.push(OffsetRange {
            topic: r["topic"]
                .as_str()
                .ok_or("ranges[].topic (string) is required")?
                .to_owned(),
            partition: field("partition")? as i32,
            first: field("first")?,
            last: field("last")?,
        });
    }
    Ok(FlushDescriptor {
        flush_id,
        trigger: trigger as i32,
        ranges,
        expected_rows: v["expected_rows"].as_u64().unwrap_or(0),
    })
}

fn ranges_json(ranges: &[OffsetRange]) -> Value {
    Value::Array(
        ranges
            .iter()
            .map(|r| json!({"topic": r.topic, "partition": r.partition, "first": r.first, "last": r.last}))
            .collect(),
    )
}

pub fn encode_ack(ack: &FlushAck, enc: Encoding) -> Bytes {
    match enc {
        Encoding::Protobuf => Bytes::from(ack.encode_to_vec()),
        Encoding::Json => {
            let outcome = match ack.outcome() {
                AckOutcome::AlreadyRecorded => "already_recorded",
                _ => "written",
            };
            Bytes::from(
                json!({
                    "flush_id": ack.flush_id,
                    "rows_written": ack.rows_written,
                    "outcome": outcome,
                    "sink": ack.sink,
                    "table": ack.table,
                    "snapshot_id": ack.snapshot_id,
                    "recorded": ranges_json(&ack.recorded),
                })
                .to_string(),
            )
        }
    }
}

pub fn encode_write_error(e: &WriteError) -> Bytes {
    Bytes::from(e.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_descriptor_round_trip() {
        let (d, enc) = decode_descriptor(
            br#"{"flush_id":"f1","trigger":"size","ranges":[{"topic":"t","partition":2,"first":5,"last":9}]}"#,
        )
        .unwrap();
        assert_eq!(enc, Encoding::Json);
        assert_eq!(d.flush_id, "f1");
        assert_eq!(d.trigger(), FlushTrigger::Size);
        assert_eq!(d.ranges, vec![OffsetRange::new("t", 2, 5, 9)]);
        assert!(decode_descriptor(br#"{"ranges":[]}"#)
            .unwrap_err()
            .contains("flush_id"));
    }

    #[test]
    fn protobuf_descriptor_round_trip() {
        let d = FlushDescriptor {
            flush_id: "x".into(),
            trigger: FlushTrigger::Time as i32,
            ranges: vec![OffsetRange::new("t", 0, 0, 1)],
            expected_rows: 2,
        };
        let (back, enc) = decode_descriptor(&d.encode_to_vec()).unwrap();
        assert_eq!((back, enc), (d, Encoding::Protobuf));
    }
}
