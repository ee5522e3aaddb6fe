//! A flush read again from Kafka: for a flush whose stream broke (sent
//! whole under the same id), and for one the writer refused as reaching
//! into offsets another owner recorded (only the rest is sent).
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use millpond_proto::{FlushAck, FlushDescriptor, FlushTrigger, OffsetRange};
use millpond_shared::metrics::error_type;
use millpond_shared::shutdown::Stopped;

use super::{left, Delivery};
use crate::buffer::{record_digest, Cut};
use crate::flight::SendError;
use crate::kafka::identity::{self, Identity};
use crate::kafka::Record;
use crate::stages::Stages;

/// What a flush rebuilt from Kafka must match: the same records with the
/// same outcome (row, record dead letter, or neither: tombstone or
/// filtered), so the counts ingest already made stay true. Counts alone
/// would pass a rebuild whose allowlist changed to keep other records in
/// the same number; the digests say which records are rows and which are
/// dead letters, and why. Value-level dead letters may differ (which keys
/// overflow the column limit depends on the order columns are first seen)
/// without changing any record's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rebuild {
    flush_id: String,
    trigger: FlushTrigger,
    ranges: Vec<OffsetRange>,
    records: usize,
    pub(super) rows: u64,
    rows_digest: u64,
    pub(super) record_dead_letters: usize,
    dead_letters_digest: u64,
}

impl Rebuild {
    pub(super) fn of(desc: &FlushDescriptor, records: usize, rows_digest: u64) -> Self {
        let letters = desc.dead_letters.iter().filter(|l| !l.value_level);
        let dead_letters_digest = letters.clone().fold(0u64, |sum, l| {
            // FNV-1a of the reason.
            let reason = l.reason.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            sum.wrapping_add(record_digest(l.partition, l.offset) ^ reason)
        });
        Rebuild {
            flush_id: desc.flush_id.clone(),
            trigger: desc.trigger(),
            ranges: desc.ranges.clone(),
            records,
            rows: desc.expected_rows,
            rows_digest,
            record_dead_letters: letters.count(),
            dead_letters_digest,
        }
    }
}

/// Record-level dead letters of a flush.
fn record_letters(desc: &FlushDescriptor) -> u64 {
    desc.dead_letters.iter().filter(|l| !l.value_level).count() as u64
}

/// How long reading the recorded offsets after an overlap may take.
const OVERLAP_READ_DEADLINE: Duration = Duration::from_secs(30);

/// Why a flush sent again from Kafka was not acknowledged.
#[derive(Debug, thiserror::Error)]
pub(super) enum Resend {
    #[error(transparent)]
    Rebuild(#[from] anyhow::Error),
    #[error(transparent)]
    Send(SendError),
}

/// The writer refused a flush because it reaches into offsets the lake
/// already recorded under another cut.
pub(super) fn is_overlap(e: &SendError) -> bool {
    matches!(e, SendError::Permanent { error_type, .. } if error_type == error_type::OFFSETS_OVERLAP)
}

impl Delivery {
    /// Sends a flush again from Kafka, before `until`: its ranges are read
    /// again into a flush of the same id, which must cover the same records
    /// with the same outcome, and sent whole. For a flush whose stream
    /// broke.
    pub(super) fn resend_from_kafka(
        &mut self,
        want: &Rebuild,
        until: Instant,
    ) -> Result<FlushAck, Resend> {
        if self.writer.past_grace() {
            return Err(Resend::Send(SendError::from(Stopped)));
        }
        let (full, _) = self.rebuild(want, &HashMap::new(), until)?;
        let sent = self.rt.block_on(self.writer.send(
            &full.descriptor,
            full.schema,
            &full.batches,
            left(until),
        ));
        sent.map_err(Resend::Send)
    }

    /// Reads `want`'s ranges again from Kafka into the same flush (checked
    /// against `want`), and into the flush of only the records past `skip`
    /// (partition -> last offset to leave out).
    fn rebuild(
        &mut self,
        want: &Rebuild,
        skip: &HashMap<i32, i64>,
        until: Instant,
    ) -> anyhow::Result<(Cut, Cut)> {
        let started = Instant::now();
        let stages = || {
            let s = Stages::new(&self.cfg.stages);
            match &self.live {
                Some(live) => s.with_live_allowlist(live.clone()),
                None => s,
            }
        };
        let (mut full, mut rest) = (stages(), stages());
        let consumer = crate::kafka::build_reread_consumer(&self.cfg, self.metrics.clone())?;
        let topic = self.cfg.kafka.topic.clone();
        crate::kafka::reread(&consumer, &want.ranges, left(until), |records| {
            full.process(&topic, records);
            if !skip.is_empty() {
                let past: Vec<Record<'_>> = records
                    .iter()
                    .filter(|r| skip.get(&r.partition).is_none_or(|s| r.offset > *s))
                    .copied()
                    .collect();
                rest.process(&topic, &past);
            }
        })?;
        drop(consumer);
        let full = full.cut(&topic, want.trigger, want.flush_id.clone())?.cut;
        let got = Rebuild::of(&full.descriptor, full.records, full.rows_digest);
        if got != *want {
            // Ranges, records or their outcome differ (records gone from
            // Kafka, an allowlist changed meanwhile): exit, and let the
            // restart resume from the lake's and Kafka's offsets.
            anyhow::bail!(
                "flush {} read again from Kafka is not the flush that was streamed ({got:?} against {want:?}); not sending it",
                want.flush_id
            );
        }
        let rest = rest
            .cut(&topic, want.trigger, uuid::Uuid::new_v4().to_string())?
            .cut;
        tracing::info!(flush_id = %want.flush_id, rows = full.descriptor.expected_rows,
            ms = started.elapsed().as_millis() as u64, "flush read again from Kafka");
        Ok((full, rest))
    }

    /// The writer refused the flush because another owner of a partition
    /// already recorded some of its offsets (a handover: the old owner's
    /// last flushes land after this pod read the lake's offsets). Reads
    /// the recorded offsets, rebuilds the flush from Kafka without what
    /// they cover and sends the rest, until the writer takes it or none is
    /// left. Returns how many rows and record dead letters were left out:
    /// the other owner wrote them.
    pub(super) fn send_unrecorded(
        &mut self,
        want: &Rebuild,
        until: Instant,
    ) -> anyhow::Result<u64> {
        // Recorded ranges already checked against Kafka's records.
        let mut proven = HashSet::new();
        loop {
            let topic = self.cfg.kafka.topic.clone();
            let recorded = self.rt.block_on(
                self.writer
                    .recorded_offsets_delivering(&topic, left(until).min(OVERLAP_READ_DEADLINE)),
            )?;
            let skip: HashMap<i32, i64> = want
                .ranges
                .iter()
                .filter_map(|r| {
                    let done = recorded.iter().find(|x| x.partition == r.partition)?;
                    (done.last >= r.first).then_some((r.partition, done.last))
                })
                .collect();
            if skip.is_empty() {
                anyhow::bail!(
                    "flush {} was refused as overlapping recorded offsets, but the lake's offsets ({recorded:?}) do not reach into it",
                    want.flush_id
                );
            }
            for range in recorded.iter().filter(|x| skip.contains_key(&x.partition)) {
                if proven.insert((range.partition, range.last)) {
                    self.prove_from_kafka(range, want)?;
                }
            }
            let (full, rest) = self.rebuild(want, &skip, until)?;
            let left_out = (full.descriptor.expected_rows + record_letters(&full.descriptor))
                .saturating_sub(rest.descriptor.expected_rows + record_letters(&rest.descriptor));
            tracing::warn!(flush_id = %want.flush_id, recorded = ?skip, left_out, remaining_rows = rest.descriptor.expected_rows,
                "another owner already recorded part of this flush (a handover); sending only the rest");
            if rest.descriptor.ranges.is_empty() {
                return Ok(left_out);
            }
            let sent = self.rt.block_on(self.writer.send(
                &rest.descriptor,
                rest.schema,
                &rest.batches,
                left(until),
            ));
            match sent {
                // The rest too, exactly (its ranges were another owner's last).
                Ok(ack)
                    if ack.flush_id == rest.descriptor.flush_id
                        && ack.recorded_by_another_flush =>
                {
                    return Ok(left_out
                        + rest.descriptor.expected_rows
                        + record_letters(&rest.descriptor))
                }
                Ok(ack) if ack.flush_id == rest.descriptor.flush_id => return Ok(left_out),
                Ok(ack) => anyhow::bail!(
                    "the writer acknowledged flush {:?} while {} was sent; not committing",
                    ack.flush_id,
                    rest.descriptor.flush_id
                ),
                // Recorded further meanwhile: read the offsets again.
                Err(e) if is_overlap(&e) && Instant::now() < until => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Delivery {
    /// Offsets recorded by another owner stand for this flush's records
    /// only when they are the same records: the lake keeps the record at a
    /// range's last offset, and Kafka must hold that very record there. A
    /// replay or a hand-made flush under the pipeline's topic records other
    /// records (or none to compare) at offsets whose real records never
    /// landed: leaving them out would lose them, so ingest stops instead.
    fn prove_from_kafka(&self, range: &OffsetRange, want: &Rebuild) -> anyhow::Result<()> {
        let reader = crate::kafka::build_reread_consumer(&self.cfg, self.metrics.clone())?;
        let found = identity::compare(&reader, range)?;
        if found.stands(range) {
            return Ok(());
        }
        let why = match found {
            Identity::Different { recorded, found } => format!(
                "the record Kafka holds at offset {} ({found}) is not the record the lake recorded there ({recorded})",
                range.last
            ),
            _ => format!(
                "the lake kept no record of what it wrote at offset {}, so nothing shows they are Kafka's records",
                range.last
            ),
        };
        let mine = want.ranges.iter().find(|r| r.partition == range.partition);
        let lost = mine.map_or(String::new(), |r| {
            format!(" {}..={}", r.first, r.last.min(range.last))
        });
        anyhow::bail!(
            "partition {p}: flush {flush} reaches into offsets the lake recorded as written ({first}..={last}), \
             but {why}. Counting them as written by another owner would drop this partition's records at \
             offsets{lost}, which never landed, so ingest stops. If a replay or a hand-made flush recorded \
             these offsets under the pipeline's topic (millpond-replay --jsonl), delete its ranges of partition \
             {p} from the lake's _millpond_offsets table (and its rows, if they should not stay) and restart \
             ingest; record replays under a topic of their own",
            p = range.partition,
            flush = want.flush_id,
            first = range.first,
            last = range.last,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use millpond_proto::DeadLetter;

    /// A rebuilt flush with its record dead letters at other offsets, or
    /// for another reason, is another flush, though the counts agree.
    #[test]
    fn a_rebuild_compares_which_records_are_dead_letters() {
        let desc = |offset: i64, reason: &str| FlushDescriptor {
            flush_id: "f".into(),
            dead_letters: vec![DeadLetter {
                partition: 0,
                offset,
                reason: reason.into(),
                ..DeadLetter::default()
            }],
            ..FlushDescriptor::default()
        };
        let of = |offset, reason| Rebuild::of(&desc(offset, reason), 2, 7);
        assert_eq!(of(1, "invalid_json"), of(1, "invalid_json"));
        assert_ne!(of(1, "invalid_json"), of(0, "invalid_json"));
        assert_ne!(of(1, "invalid_json"), of(1, "not_an_object"));
        assert_ne!(
            of(1, "invalid_json"),
            Rebuild::of(&desc(1, "invalid_json"), 2, 8)
        );
    }
}
