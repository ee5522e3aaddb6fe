//! Which topic the lake recorded. A topic deleted and created again under
//! the same name, or moved to another cluster, starts its offsets anew: the
//! lake's recorded offsets then point into a different log, and resuming
//! after them would silently skip the new topic's first records. Each
//! recorded range keeps its last record's timestamp and checksum; at
//! startup the record Kafka holds at that offset must be the same one.
use std::time::Duration;

use millpond_proto::{LastRecord, OffsetRange};

use super::reread::reread;
use super::Consumer;

/// How long reading one recorded record back may take.
const READ_DEADLINE: Duration = Duration::from_secs(30);

/// What Kafka holds at a recorded range's last offset, compared with what
/// the lake recorded there.
#[derive(Debug, PartialEq, Eq)]
pub enum Identity {
    /// The same record: the same topic.
    Same,
    /// The lake did not record the record (a range from an older writer,
    /// or a hand-made flush), or Kafka no longer holds it (compacted away,
    /// or the offset is a transaction marker): nothing to compare.
    Unknown,
    /// Another record at the same offset: another topic.
    Different {
        recorded: LastRecord,
        found: LastRecord,
    },
}

impl Identity {
    /// Whether offsets the lake recorded stand for Kafka's records there:
    /// the same record at their end, or none Kafka still holds there of a
    /// range that kept its record (recorded from Kafka's records, then
    /// compacted away). A range that kept no record proves nothing (a file
    /// replayed under the topic, a flush made by hand); another record
    /// disproves. One rule for startup and for an overlap while running.
    pub fn stands(&self, range: &OffsetRange) -> bool {
        match self {
            Identity::Same => true,
            Identity::Different { .. } => false,
            Identity::Unknown => range.last_record().is_some(),
        }
    }
}

/// Compares the record `reader` (a consumer of its own, see
/// `build_reread_consumer`) finds at `range.last` with the one the lake
/// recorded. Call it only when Kafka holds the offset (between the
/// partition's low and high watermarks).
pub fn compare(reader: &Consumer, range: &OffsetRange) -> anyhow::Result<Identity> {
    let Some(recorded) = range.last_record() else {
        return Ok(Identity::Unknown);
    };
    let at = OffsetRange::new(&range.topic, range.partition, range.last, range.last);
    let mut found = None;
    reread(reader, &[at], READ_DEADLINE, |records| {
        if let Some(r) = records.iter().find(|r| r.offset == range.last) {
            found = Some(r.last_record());
        }
    })?;
    Ok(match found {
        None => Identity::Unknown,
        Some(f) if f == recorded => Identity::Same,
        Some(found) => Identity::Different { recorded, found },
    })
}

/// [`compare`] with a reader made on first use: most startups compare
/// nothing (a new lake, or every recorded offset gone from Kafka).
pub fn lazily(
    mut make: impl FnMut() -> anyhow::Result<Consumer>,
) -> impl FnMut(&OffsetRange) -> anyhow::Result<Identity> {
    let mut reader: Option<Consumer> = None;
    move |range| {
        if reader.is_none() {
            reader = Some(make()?);
        }
        compare(reader.as_ref().expect("just made"), range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_offsets_stand_only_on_their_record() {
        let bare = OffsetRange::new("events", 0, 100, 119);
        let kept = bare.clone().with_last_record(Some(LastRecord {
            timestamp_ms: None,
            checksum: 1,
        }));
        let other = Identity::Different {
            recorded: LastRecord {
                timestamp_ms: None,
                checksum: 1,
            },
            found: LastRecord {
                timestamp_ms: None,
                checksum: 2,
            },
        };
        assert!(Identity::Same.stands(&kept));
        assert!(Identity::Unknown.stands(&kept), "compacted away");
        assert!(!Identity::Unknown.stands(&bare), "a range that kept none");
        assert!(!other.stands(&kept));
    }
}
