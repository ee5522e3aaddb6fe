//! How fresh the data is: the age of the pending flush's oldest record
//! (buffer lag) and, per partition, how old the last committed record's
//! Kafka timestamp is (how far behind the producer the lake is).
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use millpond_proto::OffsetRange;
use millpond_shared::metrics::IngestMetrics;

use crate::kafka::Record;

/// How often the gauges are refreshed from the loop.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct Freshness {
    /// When the oldest record of the pending flush was consumed.
    oldest: Option<Instant>,
    /// Newest Kafka timestamp per partition among the pending records.
    pending_ts: HashMap<i32, i64>,
    /// Kafka timestamp of the last committed record per partition.
    committed_ts: HashMap<i32, i64>,
    shown: Option<Instant>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Freshness {
    /// A consumed batch; `pending` says whether the flush now holds rows.
    pub fn consumed(&mut self, records: &[Record<'_>], pending: bool) {
        if pending && self.oldest.is_none() {
            self.oldest = Some(Instant::now());
        }
        for r in records {
            if let Some(ts) = r.timestamp_ms {
                let e = self.pending_ts.entry(r.partition).or_insert(ts);
                *e = (*e).max(ts);
            }
        }
    }

    /// The flush covering `ranges` is committed.
    pub fn committed(&mut self, ranges: &[OffsetRange], metrics: &IngestMetrics) {
        self.oldest = None;
        for r in ranges {
            if let Some(ts) = self.pending_ts.remove(&r.partition) {
                self.committed_ts.insert(r.partition, ts);
            }
        }
        self.pending_ts.clear();
        self.show(metrics, true);
    }

    /// Refreshes the gauges (at most once a second unless `now`).
    pub fn show(&mut self, metrics: &IngestMetrics, now: bool) {
        if !now && self.shown.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.shown = Some(Instant::now());
        metrics
            .buffer_age_seconds
            .set(self.oldest.map_or(0.0, |t| t.elapsed().as_secs_f64()));
        let now_ms = now_ms();
        for (p, ts) in &self.committed_ts {
            metrics
                .committed_record_age_seconds
                .with_label_values(&[&p.to_string()])
                .set((now_ms - ts).max(0) as f64 / 1000.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::metrics::new_registry;

    fn record(partition: i32, ts: i64) -> Record<'static> {
        Record {
            partition,
            offset: 0,
            timestamp_ms: Some(ts),
            key: None,
            payload: Some(&b"{}"[..]),
        }
    }

    #[test]
    fn ages_follow_the_pending_flush_and_the_last_commit() {
        let registry = new_registry("p", "");
        let m = IngestMetrics::new(&registry);
        let mut f = Freshness::default();
        f.show(&m, true);
        assert_eq!(m.buffer_age_seconds.get(), 0.0);
        let an_hour_ago = now_ms() - 3_600_000;
        f.consumed(&[record(0, an_hour_ago), record(0, an_hour_ago - 5)], true);
        std::thread::sleep(Duration::from_millis(20));
        f.show(&m, true);
        assert!(m.buffer_age_seconds.get() > 0.0);
        let range = OffsetRange::new("t", 0, 0, 1);
        f.committed(&[range], &m);
        assert_eq!(m.buffer_age_seconds.get(), 0.0, "nothing pending");
        let age = m
            .committed_record_age_seconds
            .with_label_values(&["0"])
            .get();
        assert!((3599.0..3700.0).contains(&age), "{age}");
    }
}
