//! MILLPOND_TOPIC_EPOCH: which incarnation of the topic the lake's offsets
//! belong to. A topic deleted and created again (or moved to another
//! cluster) restarts its offsets; with a new epoch the lake records the new
//! topic's offsets under a name of their own, `<topic>#<epoch>`, so they
//! never meet the old topic's. Only the offsets' name changes: rows, dead
//! letters and Kafka keep the topic's own name. Kafka topic names cannot
//! hold `#`, so no topic's own name can take the epoch's.
use std::borrow::Cow;

use millpond_proto::{FlushDescriptor, OffsetRange};

/// The topic's name in Kafka and under which the lake records its offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LakeTopic {
    kafka: String,
    lake: String,
}

impl LakeTopic {
    pub fn new(topic: &str, epoch: Option<&str>) -> Self {
        LakeTopic {
            kafka: topic.to_owned(),
            lake: match epoch {
                Some(e) => format!("{topic}{}{e}", millpond_proto::EPOCH_SEPARATOR),
                None => topic.to_owned(),
            },
        }
    }

    /// The name the lake records `topic`'s offsets under.
    pub fn lake_name<'a>(&'a self, topic: &'a str) -> &'a str {
        if topic == self.kafka {
            &self.lake
        } else {
            topic
        }
    }

    /// `desc` as the lake records it.
    pub fn to_lake<'a>(&self, desc: &'a FlushDescriptor) -> Cow<'a, FlushDescriptor> {
        if self.kafka == self.lake || desc.ranges.iter().all(|r| r.topic != self.kafka) {
            return Cow::Borrowed(desc);
        }
        let mut d = desc.clone();
        for r in &mut d.ranges {
            if r.topic == self.kafka {
                r.topic.clone_from(&self.lake);
            }
        }
        Cow::Owned(d)
    }

    /// Ranges the lake recorded, named as in Kafka.
    pub fn from_lake(&self, mut ranges: Vec<OffsetRange>) -> Vec<OffsetRange> {
        for r in &mut ranges {
            if r.topic == self.lake {
                r.topic.clone_from(&self.kafka);
            }
        }
        ranges
    }
}

/// Why an epoch cannot be used, if it cannot: 1 to 64 of `[A-Za-z0-9._-]`.
pub fn invalid(epoch: &str) -> Option<&'static str> {
    let ok = !epoch.is_empty()
        && epoch.len() <= 64
        && epoch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    (!ok).then_some("must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lake_records_the_epochs_offsets_under_their_own_name() {
        let t = LakeTopic::new("events", Some("2"));
        let desc = FlushDescriptor {
            ranges: vec![OffsetRange::new("events", 0, 0, 9)],
            ..FlushDescriptor::default()
        };
        assert_eq!(t.to_lake(&desc).ranges[0].topic, "events#2");
        assert_eq!(t.lake_name("events"), "events#2");
        let back = t.from_lake(vec![OffsetRange::new("events#2", 0, 0, 9)]);
        assert_eq!(back[0].topic, "events");
        let none = LakeTopic::new("events", None);
        assert!(matches!(none.to_lake(&desc), Cow::Borrowed(_)));
        assert_eq!(none.lake_name("events"), "events");
    }

    #[test]
    fn epochs_are_short_plain_names() {
        assert_eq!(invalid("2"), None);
        assert_eq!(invalid("2026-12-02.b_1"), None);
        assert!(invalid("").is_some());
        assert!(invalid("a#b").is_some());
        assert!(invalid("a b").is_some());
        assert!(invalid(&"x".repeat(65)).is_some());
    }
}
