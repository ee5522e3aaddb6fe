//! Kafka offsets recorded in the lake, in the same transaction as the rows.
//!
//! `<schema>._millpond_offsets` holds one row per partition per flush. It is
//! an ordinary DuckLake table, so it survives snapshot expiry, and its rows
//! are small enough to be inlined into the catalog. Readers take the highest
//! range per partition; old rows are pruned now and then.
//!
//! `<schema>._millpond_last_records` keeps, in the same transaction, the
//! record at each range's last offset (timestamp and checksum, when the
//! sender said), so ingest can tell a recreated topic from the recorded
//! one. A table of its own: writers of an earlier release, still inserting
//! the offsets table's seven columns during a rolling update, are not
//! disturbed.
use std::collections::{HashMap, HashSet};

use duckdb::{params, Connection};
use millpond_proto::{LastRecord, OffsetRange};

#[cfg(test)]
use millpond_proto::coverage::{coverage, Coverage};

use super::sql::literal;

/// The in-transaction re-check's error: another writer won the race; the
/// retry finds the range recorded.
pub const RECORDED_MEANWHILE: &str =
    "millpond: offsets of this flush were recorded meanwhile by another writer";

pub struct OffsetsTable {
    /// Fully qualified: lake.<schema>._millpond_offsets
    pub name: String,
    /// The target table the offsets belong to (several tables may share a
    /// schema, each with its own pipeline).
    pub target: String,
    /// Fully qualified: lake.<schema>._millpond_last_records
    pub last_records: String,
}

impl OffsetsTable {
    pub fn create_sql(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (target_table VARCHAR, topic VARCHAR, kafka_partition INTEGER, \
             first_offset BIGINT, last_offset BIGINT, flush_id VARCHAR, recorded_at TIMESTAMP WITH TIME ZONE)",
            self.name
        )
    }

    pub fn create_last_records_sql(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (target_table VARCHAR, topic VARCHAR, kafka_partition INTEGER, \
             last_offset BIGINT, last_timestamp_ms BIGINT, last_checksum BIGINT, flush_id VARCHAR)",
            self.last_records
        )
    }

    /// The INSERTs for all ranges of a flush (offsets, then the last
    /// records the ranges remember), run inside the write transaction.
    pub fn insert_sql(&self, flush_id: &str, ranges: &[OffsetRange]) -> Option<String> {
        if ranges.is_empty() {
            return None;
        }
        let values: Vec<String> = ranges
            .iter()
            .map(|r| {
                format!(
                    "({}, {}, {}, {}, {}, {}, now())",
                    literal(&self.target),
                    literal(&r.topic),
                    r.partition,
                    r.first,
                    r.last,
                    literal(flush_id)
                )
            })
            .collect();
        let mut sql = format!("INSERT INTO {} VALUES {}", self.name, values.join(", "));
        let marks: Vec<String> = ranges
            .iter()
            .filter_map(|r| {
                let m = r.last_record()?;
                Some(format!(
                    "({}, {}, {}, {}, {}, {}, {})",
                    literal(&self.target),
                    literal(&r.topic),
                    r.partition,
                    r.last,
                    m.timestamp_ms
                        .map_or_else(|| "NULL".to_owned(), |t| t.to_string()),
                    // Stored as BIGINT: the checksum's 64 bits as they are.
                    m.checksum as i64,
                    literal(flush_id)
                ))
            })
            .collect();
        if !marks.is_empty() {
            sql.push_str(&format!(
                ";\nINSERT INTO {} VALUES {}",
                self.last_records,
                marks.join(", ")
            ));
        }
        Some(sql)
    }

    /// Inside the write transaction: fails the transaction when another
    /// writer recorded any of these partitions up to or past the flush's
    /// first offset since the check made before it began.
    pub fn recheck_sql(&self, ranges: &[OffsetRange]) -> Option<String> {
        if ranges.is_empty() {
            return None;
        }
        let conds: Vec<String> = ranges
            .iter()
            .map(|r| {
                format!(
                    "(topic = {} AND kafka_partition = {} AND last_offset >= {})",
                    literal(&r.topic),
                    r.partition,
                    r.first
                )
            })
            .collect();
        Some(format!(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM {} WHERE target_table = {} AND ({})) \
             THEN error('{RECORDED_MEANWHILE}') END",
            self.name,
            literal(&self.target),
            conds.join(" OR ")
        ))
    }

    /// Highest recorded range per partition of `topic`, with the record at
    /// its last offset when one was recorded for it.
    pub fn read(&self, conn: &Connection, topic: &str) -> duckdb::Result<Vec<OffsetRange>> {
        let sql = format!(
            "WITH top AS (SELECT kafka_partition, arg_max(first_offset, last_offset) AS first_offset, \
             max(last_offset) AS last_offset FROM {o} WHERE target_table = ? AND topic = ? GROUP BY kafka_partition), \
             marks AS (SELECT kafka_partition, last_offset, any_value(last_timestamp_ms) AS ts, \
             any_value(last_checksum) AS ck FROM {l} WHERE target_table = ? AND topic = ? \
             GROUP BY kafka_partition, last_offset) \
             SELECT top.kafka_partition, top.first_offset, top.last_offset, marks.ts, marks.ck FROM top \
             LEFT JOIN marks ON marks.kafka_partition = top.kafka_partition AND marks.last_offset = top.last_offset \
             ORDER BY top.kafka_partition",
            o = self.name,
            l = self.last_records,
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(params![self.target, topic, self.target, topic], |row| {
            let range = OffsetRange::new(topic, row.get(0)?, row.get(1)?, row.get(2)?);
            let checksum: Option<i64> = row.get(4)?;
            let timestamp_ms: Option<i64> = row.get(3)?;
            Ok(range.with_last_record(checksum.map(|c| LastRecord {
                timestamp_ms,
                checksum: c as u64,
            })))
        })?;
        rows.collect()
    }

    /// The ids of the flushes that recorded exactly `ranges`.
    pub fn flush_ids(
        &self,
        conn: &Connection,
        ranges: &[OffsetRange],
    ) -> duckdb::Result<Vec<String>> {
        let mut ids = Vec::with_capacity(ranges.len());
        let sql = format!(
            "SELECT DISTINCT flush_id FROM {} WHERE target_table = ? AND topic = ? \
             AND kafka_partition = ? AND first_offset = ? AND last_offset = ?",
            self.name
        );
        let mut stmt = conn.prepare(&sql)?;
        for r in ranges {
            let rows = stmt.query_map(
                params![self.target, r.topic, r.partition, r.first, r.last],
                |row| row.get::<_, String>(0),
            )?;
            for id in rows {
                ids.push(id?);
            }
        }
        Ok(ids)
    }

    /// Deletes every row below the highest per partition. Best effort and
    /// in its own transaction, so it never fails a flush.
    pub fn prune_sql(&self) -> String {
        format!(
            "DELETE FROM {t} WHERE target_table = {target} AND (topic, kafka_partition, last_offset) NOT IN \
             (SELECT topic, kafka_partition, max(last_offset) FROM {t} WHERE target_table = {target} GROUP BY ALL);\n\
             DELETE FROM {l} WHERE target_table = {target} AND (topic, kafka_partition, last_offset) NOT IN \
             (SELECT topic, kafka_partition, max(last_offset) FROM {t} WHERE target_table = {target} GROUP BY ALL)",
            t = self.name,
            l = self.last_records,
            target = literal(&self.target)
        )
    }
}

/// The highest offset recorded per partition, as this writer last saw it:
/// read from the lake, or committed itself. A flush that starts past it on
/// every partition is new without reading the table again. The skip lets
/// nothing through that a read would have stopped: the write transaction's
/// re-check refuses the flush if anything at or past its first offset was
/// recorded meanwhile (another writer, a commit whose outcome was lost), and
/// the retry after that, with this forgotten, reads the table. A partition
/// whose lease was taken over rather than renewed is read again first.
#[derive(Default)]
pub struct KnownOffsets {
    last: HashMap<(String, i32), i64>,
    /// Topics read whole: a partition of theirs not in `last` had nothing
    /// recorded.
    read: HashSet<String>,
}

impl KnownOffsets {
    /// Whether every range starts past what is known of its partition.
    pub fn all_new(&self, ranges: &[OffsetRange]) -> bool {
        ranges
            .iter()
            .all(|r| match self.last.get(&(r.topic.clone(), r.partition)) {
                Some(last) => r.first > *last,
                None => self.read.contains(&r.topic),
            })
    }

    /// What a read of `topic` found: the highest range per partition.
    pub fn read(&mut self, topic: &str, recorded: &[OffsetRange]) {
        self.last.retain(|(t, _), _| t != topic);
        for r in recorded {
            self.last.insert((topic.to_owned(), r.partition), r.last);
        }
        self.read.insert(topic.to_owned());
    }

    /// `ranges` were committed by this writer.
    pub fn committed(&mut self, ranges: &[OffsetRange]) {
        for r in ranges {
            self.last.insert((r.topic.clone(), r.partition), r.last);
        }
    }

    pub fn forget(&mut self) {
        self.last.clear();
        self.read.clear();
    }
}

#[cfg(test)]
#[path = "offsets_tests.rs"]
mod tests;
