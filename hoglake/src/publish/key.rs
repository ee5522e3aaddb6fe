//! The idempotency key of a flush.
use millpond_proto::OffsetRange;

/// Namespace of the v5 keys (a fixed random UUID; changing it changes every key).
const KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6b1f_3c3e_8a52_4d0e_9a51_2f7d_c0de_1a7e);

/// The idempotency key of a flush: a UUIDv5 over the table incarnation and
/// the complete, sorted offset ranges. The same offsets into the same
/// incarnation give the same key (a replay is recognised); a recreated table
/// gives a new key, so it can never be answered from its predecessor's
/// receipt.
pub fn idempotency_key(table_uuid: &str, ranges: &[OffsetRange]) -> uuid::Uuid {
    // Only the coordinates name a flush: the last record's fingerprint
    // (timestamp, checksum) a range may carry is not part of the key.
    let mut sorted: Vec<(&str, i32, i64, i64)> = ranges
        .iter()
        .map(|r| (r.topic.as_str(), r.partition, r.first, r.last))
        .collect();
    sorted.sort();
    sorted.dedup();
    let mut name = format!("millpond-hoglake/v1\ntable_uuid={table_uuid}\n");
    for (topic, partition, first, last) in sorted {
        // Kafka topic names are [a-zA-Z0-9._-]; the tab cannot occur in one.
        name.push_str(&format!("{topic}\t{partition}\t{first}\t{last}\n"));
    }
    uuid::Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes())
}
