//! Partitions added to the topic while ingest runs: metadata is re-read
//! periodically and this pod's new partitions (same `p % REPLICA_COUNT`
//! rule) are assigned incrementally, from their beginning: a partition born
//! after startup holds only records nobody has read, whatever
//! KAFKA_AUTO_OFFSET_RESET says.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use millpond_proto::OffsetRange;
use millpond_shared::metrics::IngestMetrics;
use millpond_shared::shutdown::Stop;
use rdkafka::consumer::Consumer as _;

use super::assign::{assignment, my_partitions, resume_points};
use super::client::Consumer;
use super::identity::Identity;
use crate::config::OffsetReset;

/// How often the topic's partition count is re-read.
pub const EVERY: Duration = Duration::from_secs(30);

/// How long a round may wait for the lake's recorded offsets. The round
/// runs on the consume loop, which polls nothing meanwhile: a writer that
/// does not answer costs this much, and the next round tries again.
pub const LAKE_DEADLINE: Duration = Duration::from_secs(10);

/// This pod's partitions among `count` that are not assigned yet.
pub fn unassigned(
    count: i32,
    replicas: i32,
    ordinal: i32,
    assigned: &HashMap<i32, i64>,
) -> Vec<i32> {
    my_partitions(count, replicas, ordinal)
        .into_iter()
        .filter(|p| !assigned.contains_key(p))
        .collect()
}

pub struct Discovery {
    last: Instant,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            last: Instant::now(),
        }
    }
}

impl Discovery {
    /// A discovery whose first round is due at once.
    pub fn due_now() -> Self {
        Discovery {
            last: Instant::now() - EVERY,
        }
    }

    /// Every [`EVERY`]: assigns this pod's new partitions, resuming each at
    /// the later of its committed offset and the lake's (`lake` is read only
    /// when there is one, within the deadline it is given), else at its
    /// beginning; `identity` checks the lake's offsets belong to this topic
    /// (see [`super::identity`]). Adds them to `next` (so they get lag
    /// gauges and flush ranges). Failures are logged and counted and tried
    /// again next time; the partitions already consumed go on.
    #[allow(clippy::too_many_arguments)]
    pub fn maybe_assign(
        &mut self,
        consumer: &Consumer,
        topic: &str,
        replicas: i32,
        ordinal: i32,
        next: &mut HashMap<i32, i64>,
        metrics: &IngestMetrics,
        stop: &Stop,
        lake: impl FnOnce(Duration) -> anyhow::Result<Vec<OffsetRange>>,
        identity: &mut dyn FnMut(&OffsetRange) -> anyhow::Result<Identity>,
    ) {
        if self.last.elapsed() < EVERY {
            return;
        }
        self.last = Instant::now();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            metrics
                .errors
                .with_label_values(&[millpond_shared::metrics::error_type::KAFKA])
                .inc();
            tracing::warn!(error = %e, "{what}; trying again in {}s", EVERY.as_secs());
        };
        let count = match consumer.fetch_metadata(Some(topic), Duration::from_secs(10)) {
            Ok(md) => md
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .map_or(0, |t| t.partitions().len() as i32),
            Err(e) => return fail("reading the topic's partitions failed", &e),
        };
        let new = unassigned(count, replicas, ordinal, next);
        if new.is_empty() {
            return;
        }
        let lake = match lake(LAKE_DEADLINE) {
            Ok(l) => l,
            Err(e) => return fail("reading the lake's offsets for new partitions failed", &e),
        };
        let resume = match resume_points(
            consumer,
            topic,
            &new,
            OffsetReset::Earliest,
            &lake,
            metrics,
            stop,
            identity,
        ) {
            Ok(r) => r,
            Err(e) => return fail("resolving where new partitions start failed", &e),
        };
        let tpl = match assignment(topic, &resume) {
            Ok(tpl) => tpl,
            Err(e) => return fail("building the new assignment failed", &e),
        };
        if let Err(e) = consumer.incremental_assign(&tpl) {
            return fail("assigning new partitions failed", &e);
        }
        for r in &resume {
            tracing::info!(partition = r.partition, start = ?r.start, "partition added to the topic; now consumed");
            next.insert(r.partition, r.position());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_pods_new_partitions() {
        let assigned: HashMap<i32, i64> = [(1, 0), (3, 0)].into();
        assert_eq!(unassigned(4, 2, 1, &assigned), Vec::<i32>::new());
        assert_eq!(unassigned(8, 2, 1, &assigned), vec![5, 7]);
        assert_eq!(unassigned(8, 2, 0, &HashMap::new()), vec![0, 2, 4, 6]);
    }
}
