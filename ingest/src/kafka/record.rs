//! One consumed Kafka record, as every stage after the poll sees it.
use millpond_proto::LastRecord;

/// One consumed Kafka record.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<&'a [u8]>,
    /// `None` is a tombstone.
    pub payload: Option<&'a [u8]>,
}

impl<'a> Record<'a> {
    /// The record of a consumed Kafka message.
    pub fn of(m: &'a impl rdkafka::message::Message) -> Self {
        Record {
            partition: m.partition(),
            offset: m.offset(),
            timestamp_ms: m.timestamp().to_millis(),
            key: m.key(),
            payload: m.payload(),
        }
    }

    /// What a flush's range remembers of its last record: the timestamp
    /// and a checksum of the key and value (CRC-32 of each), enough to
    /// tell this topic from another one created under its name.
    pub fn last_record(&self) -> LastRecord {
        let crc = |b: Option<&[u8]>| u64::from(crc32fast::hash(b.unwrap_or_default()));
        LastRecord {
            timestamp_ms: self.timestamp_ms,
            checksum: crc(self.key) << 32 | crc(self.payload),
        }
    }
}
