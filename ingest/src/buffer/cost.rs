//! What a dead letter costs while a flush holds it and sends it: the struct,
//! each field's heap allocation as the allocator sizes it, and its encoded
//! form in the descriptor sent to the writer. Counted against FLUSH_SIZE
//! like a batch's Arrow buffers, so a flush of dead letters weighs what it
//! holds (`ingest/tests/it/dead_letter_cost.rs` measures it).
use std::ops::Range;

use millpond_proto::DeadLetter;
use prost::Message;

use crate::convert::LETTER_FLOOR;
use crate::kafka::Record;

/// glibc malloc: each chunk carries an 8-byte header and is rounded up to
/// 16 bytes, at least 32.
fn allocation(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        (capacity + 8).next_multiple_of(16).max(32)
    }
}

/// Bytes `l` costs held in a flush and encoded in its descriptor.
pub fn dead_letter(l: &DeadLetter) -> usize {
    let held = std::mem::size_of::<DeadLetter>()
        + allocation(l.topic.capacity())
        + allocation(l.reason.capacity())
        + allocation(l.column.capacity())
        + allocation(l.live_type.capacity())
        + allocation(l.original.capacity())
        + l.key.as_ref().map_or(0, |k| allocation(k.capacity()));
    // The descriptor's field 5: tag, length, message.
    let sent = l.encoded_len();
    held + sent + 1 + prost::length_delimiter_len(sent)
}

/// The most a record can cost once converted: its bytes, and for each key
/// (at most one per `:` in it) the least a dead letter costs, should its
/// values all become dead letters.
pub fn record_bound(r: &Record<'_>) -> usize {
    r.payload.map_or(0, |p| {
        p.len() + memchr::memchr_iter(b':', p).count() * LETTER_FLOOR
    })
}

/// `records` cut into consecutive parts whose bounds ([`record_bound`])
/// come to at most `budget` each (a record over it alone): a poll of
/// many-keyed records goes through the stages a part at a time, so the
/// flush can be cut between parts.
pub fn parts(records: &[Record<'_>], budget: usize) -> Vec<Range<usize>> {
    let mut parts = Vec::new();
    let (mut start, mut sum) = (0, 0usize);
    for (i, r) in records.iter().enumerate() {
        let cost = record_bound(r);
        if i > start && sum.saturating_add(cost) > budget {
            parts.push(start..i);
            (start, sum) = (i, 0);
        }
        sum = sum.saturating_add(cost);
    }
    if start < records.len() {
        parts.push(start..records.len());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(payload: &'static [u8]) -> Record<'static> {
        Record {
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            key: None,
            payload: Some(payload),
        }
    }

    #[test]
    fn parts_hold_at_most_the_budget_and_every_record_once() {
        let small = rec(br#"{"a":1}"#);
        let wide = rec(br#"{"a":1,"b":2,"c":3,"d":4}"#);
        let (s, w) = (record_bound(&small), record_bound(&wide));
        assert_eq!((s, w), (7 + LETTER_FLOOR, 25 + 4 * LETTER_FLOOR));
        let records = [small, small, wide, small, wide, wide];
        assert_eq!(parts(&records, 2 * s), [0..2, 2..3, 3..4, 4..5, 5..6]);
        assert_eq!(parts(&records, usize::MAX), vec![0..records.len()]);
        assert_eq!(parts(&records, 1), [0..1, 1..2, 2..3, 3..4, 4..5, 5..6]);
        assert!(parts(&[], 1).is_empty());
        let tombstone = Record {
            payload: None,
            ..small
        };
        assert_eq!(record_bound(&tombstone), 0);
    }
}
