//! FlushDescriptor / FlushAck / WriteError on the wire: protobuf, or JSON
//! for hand-driven clients (the same field names; bytes as UTF-8 text).
use bytes::Bytes;
use millpond_proto::{
    AckOutcome, DeadLetter, FlushAck, FlushDescriptor, FlushTrigger, OffsetRange, WriteError,
};
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::sink::letters::Letters;

/// How the client encoded its descriptor; the ack mirrors it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

/// A descriptor as received: its dead letters apart, already columns.
#[derive(Debug)]
pub struct Decoded {
    /// The descriptor without its dead letters.
    pub desc: FlushDescriptor,
    pub letters: Letters,
    pub encoding: Encoding,
}

/// `FlushDescriptor` with its dead letters left encoded: each a slice of
/// the received buffer, decoded one at a time into [`Letters`].
#[derive(Clone, PartialEq, prost::Message)]
struct WireDescriptor {
    #[prost(string, tag = "1")]
    flush_id: String,
    #[prost(enumeration = "FlushTrigger", tag = "2")]
    trigger: i32,
    #[prost(message, repeated, tag = "3")]
    ranges: Vec<OffsetRange>,
    #[prost(uint64, tag = "4")]
    expected_rows: u64,
    #[prost(bytes = "bytes", repeated, tag = "5")]
    dead_letters: Vec<Bytes>,
    #[prost(bool, tag = "6")]
    trailer: bool,
}

/// Parses `cmd`: JSON when it starts with `{`, protobuf otherwise.
pub fn decode_descriptor(cmd: Bytes) -> Result<Decoded, String> {
    if cmd.first() == Some(&b'{') {
        let d: JsonDescriptor =
            serde_json::from_slice(&cmd).map_err(|e| format!("descriptor JSON: {e}"))?;
        let mut desc = FlushDescriptor::from(d);
        let letters = Letters::of(&desc.dead_letters);
        desc.dead_letters = Vec::new();
        return Ok(Decoded {
            desc,
            letters,
            encoding: Encoding::Json,
        });
    }
    let w = WireDescriptor::decode(cmd).map_err(|e| format!("descriptor protobuf: {e}"))?;
    let letters =
        Letters::decode(w.dead_letters).map_err(|e| format!("descriptor dead letter: {e}"))?;
    Ok(Decoded {
        desc: FlushDescriptor {
            flush_id: w.flush_id,
            trigger: w.trigger,
            ranges: w.ranges,
            expected_rows: w.expected_rows,
            dead_letters: Vec::new(),
            trailer: w.trailer,
        },
        letters,
        encoding: Encoding::Protobuf,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    flush_id: String,
    #[serde(default)]
    trigger: String,
    #[serde(default)]
    ranges: Vec<JsonRange>,
    #[serde(default)]
    expected_rows: u64,
    #[serde(default)]
    dead_letters: Vec<JsonDeadLetter>,
    #[serde(default)]
    trailer: bool,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct JsonRange {
    topic: String,
    partition: i32,
    first: i64,
    last: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_timestamp_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_checksum: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDeadLetter {
    topic: String,
    partition: i32,
    offset: i64,
    timestamp_ms: Option<i64>,
    key: Option<String>,
    reason: String,
    #[serde(default)]
    column: String,
    #[serde(default)]
    live_type: String,
    original: String,
    #[serde(default)]
    value_level: bool,
}

impl From<JsonRange> for OffsetRange {
    fn from(r: JsonRange) -> Self {
        OffsetRange {
            last_timestamp_ms: r.last_timestamp_ms,
            last_checksum: r.last_checksum,
            ..OffsetRange::new(r.topic, r.partition, r.first, r.last)
        }
    }
}

impl From<&OffsetRange> for JsonRange {
    fn from(r: &OffsetRange) -> Self {
        JsonRange {
            topic: r.topic.clone(),
            partition: r.partition,
            first: r.first,
            last: r.last,
            last_timestamp_ms: r.last_timestamp_ms,
            last_checksum: r.last_checksum,
        }
    }
}

impl From<JsonDescriptor> for FlushDescriptor {
    fn from(d: JsonDescriptor) -> Self {
        let trigger = match d.trigger.as_str() {
            "size" => FlushTrigger::Size,
            "time" => FlushTrigger::Time,
            "shutdown" => FlushTrigger::Shutdown,
            _ => FlushTrigger::Unspecified,
        };
        FlushDescriptor {
            flush_id: d.flush_id,
            trigger: trigger as i32,
            ranges: d.ranges.into_iter().map(Into::into).collect(),
            expected_rows: d.expected_rows,
            dead_letters: d
                .dead_letters
                .into_iter()
                .map(|l| DeadLetter {
                    topic: l.topic,
                    partition: l.partition,
                    offset: l.offset,
                    timestamp_ms: l.timestamp_ms,
                    key: l.key.map(String::into_bytes),
                    reason: l.reason,
                    column: l.column,
                    live_type: l.live_type,
                    original: l.original.into_bytes(),
                    value_level: l.value_level,
                })
                .collect(),
            trailer: d.trailer,
        }
    }
}

#[derive(Serialize)]
struct JsonAck<'a> {
    flush_id: &'a str,
    rows_written: u64,
    dead_letters_written: u64,
    outcome: &'static str,
    sink: &'a str,
    table: &'a str,
    snapshot_id: i64,
    recorded: Vec<JsonRange>,
    recorded_by_another_flush: bool,
}

pub fn encode_ack(ack: &FlushAck, enc: Encoding) -> Bytes {
    match enc {
        Encoding::Protobuf => Bytes::from(ack.encode_to_vec()),
        Encoding::Json => {
            let outcome = match ack.outcome() {
                AckOutcome::AlreadyRecorded => "already_recorded",
                _ => "written",
            };
            let json = JsonAck {
                flush_id: &ack.flush_id,
                rows_written: ack.rows_written,
                dead_letters_written: ack.dead_letters_written,
                outcome,
                sink: &ack.sink,
                table: &ack.table,
                snapshot_id: ack.snapshot_id,
                recorded: ack.recorded.iter().map(Into::into).collect(),
                recorded_by_another_flush: ack.recorded_by_another_flush,
            };
            Bytes::from(serde_json::to_vec(&json).expect("plain structs serialize"))
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
        let r = decode_descriptor(Bytes::from_static(
            br#"{"flush_id":"f1","trigger":"size","ranges":[{"topic":"t","partition":2,"first":5,"last":9}]}"#,
        ))
        .unwrap();
        let d = r.desc;
        assert_eq!(r.encoding, Encoding::Json);
        assert_eq!(d.flush_id, "f1");
        assert_eq!(d.trigger(), FlushTrigger::Size);
        assert_eq!(d.ranges, vec![OffsetRange::new("t", 2, 5, 9)]);
        assert!(decode_descriptor(Bytes::from_static(br#"{"ranges":[]}"#))
            .unwrap_err()
            .contains("flush_id"));
        assert!(
            decode_descriptor(Bytes::from_static(br#"{"flush_id":"f","rangez":[]}"#))
                .unwrap_err()
                .contains("rangez"),
            "a misspelt field is an error, not silently ignored"
        );
    }

    #[test]
    fn json_descriptor_carries_dead_letters() {
        let r = decode_descriptor(Bytes::from_static(
            br#"{"flush_id":"f2","ranges":[{"topic":"t","partition":0,"first":0,"last":1}],
                "dead_letters":[{"topic":"t","partition":0,"offset":1,"timestamp_ms":null,
                "key":"k","reason":"invalid_json","original":"{oops"}]}"#,
        ))
        .unwrap();
        let want = DeadLetter {
            topic: "t".into(),
            offset: 1,
            key: Some(b"k".to_vec()),
            reason: "invalid_json".into(),
            original: b"{oops".to_vec(),
            ..Default::default()
        };
        assert_eq!(r.letters.rows("f2"), Letters::of([&want]).rows("f2"));
    }

    #[test]
    fn json_ack_names_every_field() {
        let ack = FlushAck {
            flush_id: "f".into(),
            rows_written: 3,
            dead_letters_written: 1,
            outcome: AckOutcome::Written as i32,
            sink: "ducklake".into(),
            table: "lake.main.events".into(),
            snapshot_id: 9,
            recorded: vec![OffsetRange::new("t", 0, 0, 3)],
            recorded_by_another_flush: true,
        };
        let v: serde_json::Value =
            serde_json::from_slice(&encode_ack(&ack, Encoding::Json)).unwrap();
        assert_eq!(v["dead_letters_written"], 1);
        assert_eq!(v["outcome"], "written");
        assert_eq!(v["recorded"][0]["last"], 3);
        assert_eq!(v["recorded_by_another_flush"], true);
    }

    #[test]
    fn protobuf_descriptor_round_trip() {
        let d = FlushDescriptor {
            flush_id: "x".into(),
            trigger: FlushTrigger::Time as i32,
            ranges: vec![OffsetRange::new("t", 0, 0, 1)],
            expected_rows: 2,
            dead_letters: vec![DeadLetter {
                topic: "t".into(),
                offset: 1,
                reason: "not_an_object".into(),
                original: b"[1]".to_vec(),
                ..Default::default()
            }],
            trailer: true,
        };
        let r = decode_descriptor(Bytes::from(d.encode_to_vec())).unwrap();
        assert_eq!(r.encoding, Encoding::Protobuf);
        assert_eq!(r.letters.rows("x"), Letters::of(&d.dead_letters).rows("x"));
        let without = FlushDescriptor {
            dead_letters: Vec::new(),
            ..d
        };
        assert_eq!(r.desc, without);
    }
}
