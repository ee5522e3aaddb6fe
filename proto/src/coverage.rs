//! How a flush's offset ranges relate to the ranges a lake recorded last
//! per partition: new, a resend of exactly what is recorded, or an overlap
//! that would duplicate or lose records. One rule for every destination
//! (the DuckLake offsets table and hoglake's offsets tables).
use crate::OffsetRange;

/// How the offsets of a flush relate to what the lake holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Coverage {
    /// No range was recorded before: write it.
    New,
    /// Every range is already recorded: acknowledge without writing.
    AlreadyRecorded,
    /// Some ranges overlap recorded ones without being covered: writing
    /// would duplicate rows and skipping would lose some.
    Overlap(String),
}

pub fn coverage(flush: &[OffsetRange], recorded: &[OffsetRange]) -> Coverage {
    let last_of = |r: &OffsetRange| {
        recorded
            .iter()
            .find(|x| x.topic == r.topic && x.partition == r.partition)
    };
    let mut covered = 0;
    for r in flush {
        match last_of(r) {
            // Only the very range recorded last, ending at the same record,
            // counts as a resend: anything else below the recorded offsets
            // is a different cut of the log (a recreated topic, a hand-made
            // replay) and must not be acknowledged as written. The sender
            // checks such offsets against Kafka's records.
            Some(x) if x.first == r.first && x.last == r.last => {
                if x.last_record() != r.last_record() {
                    return Coverage::Overlap(format!(
                        "partition {} range {}..={} is recorded, but ending at another record ({} recorded, {} sent)",
                        r.partition,
                        r.first,
                        r.last,
                        x.last_record().map_or("none".into(), |m| m.to_string()),
                        r.last_record().map_or("none".into(), |m| m.to_string()),
                    ));
                }
                covered += 1
            }
            Some(&OffsetRange { last, .. }) if last >= r.first => {
                return Coverage::Overlap(format!(
                    "partition {} range {}..={} overlaps recorded offsets up to {last}",
                    r.partition, r.first, r.last
                ))
            }
            _ => {}
        }
    }
    if covered == 0 || flush.is_empty() {
        Coverage::New
    } else if covered == flush.len() {
        Coverage::AlreadyRecorded
    } else {
        Coverage::Overlap(format!(
            "{covered} of {} partitions are already recorded",
            flush.len()
        ))
    }
}

#[cfg(test)]
#[path = "coverage_tests.rs"]
mod tests;
