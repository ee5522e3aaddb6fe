//! The delivery of one flush to the writer, as one state machine: its
//! batches stream out as they are converted ([`State::Streaming`]); a
//! writer out of reach at the stream's opening holds the flush whole for
//! its cut ([`State::Held`]); a stream that breaks leaves the flush to be
//! read again from Kafka at its cut ([`State::Broken`]); a permanent
//! refusal stops the loop ([`State::Refused`]). At the cut,
//! [`Delivery::deliver`] ends the stream or sends the flush whole, and
//! rebuilds it from Kafka when no acknowledgement came (`rebuild`).
mod rebuild;

use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use millpond_proto::{FlushAck, OffsetRange};
use millpond_shared::metrics::{error_type, skip_reason, whole_reason, IngestMetrics};

use crate::buffer::Cut;
use crate::config::IngestConfig;
use crate::flight::{FlushStream, SendError, WriterClient};
use crate::stages::filter::LiveValues;
use rebuild::{Rebuild, Resend};

/// Longest wait for the writer to take the next message of a streamed
/// flush (it reads as fast as it decodes); past it the stream is broken.
const STREAM_STALL: Duration = Duration::from_secs(60);

/// How long opening a flush's stream may try to reach the writer before
/// the flush is held and sent whole instead.
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// Time left until `until`.
fn left(until: Instant) -> Duration {
    until.saturating_duration_since(Instant::now())
}

/// How long the end of a flush's stream waits for the acknowledgement,
/// with `left` of the send deadline: two thirds, so the rest stays for a
/// re-read and resend, but never less than the writer's whole write may
/// take (its budget and the margin), which the send deadline holds.
fn finish_wait(left: Duration, budget: Option<&millpond_proto::WriterBudget>) -> Duration {
    let share = left * 2 / 3;
    match budget {
        Some(b) => share.max(b.least_send_deadline()).min(left),
        None => share,
    }
}

/// Where the pending flush's delivery stands.
enum State {
    /// Nothing of it was sent yet.
    Idle,
    /// Its batches go to the writer on this stream as they are converted.
    Streaming { id: String, stream: FlushStream },
    /// The writer could not be reached when its stream was to open: ingest
    /// holds the flush and sends it whole at its cut.
    Held { id: String },
    /// It lost its stream: what the stream carried is gone, so the flush is
    /// read again from Kafka and sent whole at its cut.
    Broken { id: String },
    /// The writer refused the streamed flush permanently, or ingest gave
    /// up on it after the stop: the loop stops with it, as it does when
    /// this comes at the cut.
    Refused {
        id: String,
        error: Option<SendError>,
    },
}

/// A flush delivered: the writer's acknowledgement (`None`: another owner
/// had recorded part of it, and the rest was acknowledged or none was
/// left), and why it was sent whole rather than streamed.
pub struct Delivered {
    pub ack: Option<FlushAck>,
    pub whole: Option<&'static str>,
}

pub struct Delivery {
    cfg: IngestConfig,
    metrics: IngestMetrics,
    writer: WriterClient,
    rt: tokio::runtime::Handle,
    /// The dynamic allowlist, for a flush rebuilt from Kafka.
    live: Option<LiveValues>,
    state: State,
}

impl Delivery {
    pub fn new(
        cfg: IngestConfig,
        metrics: IngestMetrics,
        writer: WriterClient,
        rt: tokio::runtime::Handle,
    ) -> Self {
        Delivery {
            cfg,
            metrics,
            writer,
            rt,
            live: None,
            state: State::Idle,
        }
    }

    /// A flush rebuilt from Kafka follows the dynamic allowlist.
    pub fn with_live_allowlist(mut self, live: LiveValues) -> Self {
        self.live = Some(live);
        self
    }

    /// The offsets the lake recorded for `topic`, read through the writer.
    pub fn recorded_offsets(
        &mut self,
        topic: &str,
        deadline: Duration,
    ) -> Result<Vec<OffsetRange>, SendError> {
        self.rt
            .block_on(self.writer.recorded_offsets(topic, deadline))
    }

    /// The error that stops the loop, once: the writer refused the
    /// streamed flush.
    pub fn refused(&mut self) -> Option<SendError> {
        match &mut self.state {
            State::Refused { error, .. } => error.take(),
            _ => None,
        }
    }

    /// The pending flush's id: its stream's, or a new one.
    pub fn flush_id(&self) -> String {
        match &self.state {
            State::Idle => uuid::Uuid::new_v4().to_string(),
            State::Streaming { id, .. }
            | State::Held { id }
            | State::Broken { id }
            | State::Refused { id, .. } => id.clone(),
        }
    }

    /// Sends the batches converted since the last call on the flush's
    /// stream, opening it on the first. If the writer cannot be reached
    /// before anything was sent, the flush is held and sent whole at its
    /// cut. A stream that breaks later marks the flush broken: what it
    /// carried is gone, so the flush is read again from Kafka at its cut.
    /// Returns the batches the flush keeps (a held flush keeps them all).
    pub fn stream(&mut self, batches: Vec<RecordBatch>) -> Vec<RecordBatch> {
        let stall = self.cfg.send_deadline.min(STREAM_STALL);
        let mut batches = batches.into_iter();
        while let Some(batch) = batches.next() {
            match &self.state {
                State::Held { .. } => return std::iter::once(batch).chain(batches).collect(),
                State::Broken { .. } | State::Refused { .. } => continue,
                State::Idle | State::Streaming { .. } => {}
            }
            let (id, e) = match std::mem::replace(&mut self.state, State::Idle) {
                State::Streaming { id, mut stream } => {
                    match self.rt.block_on(stream.push(&batch, stall)) {
                        Ok(()) => {
                            self.state = State::Streaming { id, stream };
                            continue;
                        }
                        Err(e) => (id, e),
                    }
                }
                _ => {
                    let id = uuid::Uuid::new_v4().to_string();
                    let open = OPEN_DEADLINE.min(self.cfg.send_deadline);
                    match self.rt.block_on(self.writer.open(&id, &batch, open)) {
                        Ok(stream) => {
                            self.state = State::Streaming { id, stream };
                            continue;
                        }
                        Err(e @ (SendError::Permanent { .. } | SendError::Stopped(_))) => (id, e),
                        Err(e) => {
                            tracing::warn!(error = %e, flush_id = %id,
                                "cannot open a stream to the writer; holding this flush and sending it whole at its cut");
                            self.writer.reset();
                            self.state = State::Held { id };
                            return std::iter::once(batch).chain(batches).collect();
                        }
                    }
                }
            };
            if matches!(e, SendError::Permanent { .. } | SendError::Stopped(_)) {
                self.state = State::Refused { id, error: Some(e) };
                continue;
            }
            self.metrics
                .errors
                .with_label_values(&[error_type::FLIGHT])
                .inc();
            tracing::warn!(error = %e, flush_id = ?Some(&id),
                "the flush's stream to the writer broke; the flush will be read again from Kafka and sent whole");
            self.writer.reset();
            self.state = State::Broken { id };
        }
        Vec::new()
    }

    /// Delivers the flush cut from the buffer before `until`: ends its
    /// stream, or sends it whole (`sorted`: held for MILLPOND_SORT_BY),
    /// reading it again from Kafka when no acknowledgement came. An error
    /// means nothing of it may be committed.
    pub fn deliver(&mut self, cut: Cut, sorted: bool, until: Instant) -> anyhow::Result<Delivered> {
        let Cut {
            descriptor: desc,
            schema,
            batches,
            records,
            rows_digest,
            ..
        } = cut;
        let flush_id = desc.flush_id.clone();
        let rows = desc.expected_rows;
        let state = std::mem::replace(&mut self.state, State::Idle);
        let mut whole = match (&state, sorted) {
            (State::Held { .. }, _) => Some(whole_reason::WRITER_UNREACHABLE),
            (_, true) if rows > 0 => Some(whole_reason::SORT),
            _ => None,
        };
        // The ack of the stream or of the flush sent whole; Ok(None): the
        // stream broke and the flush is read again from Kafka.
        let sent: Result<Option<FlushAck>, SendError> = match state {
            State::Streaming { stream, .. } => {
                let wait = finish_wait(left(until), self.writer.writer_budget());
                match self.rt.block_on(stream.finish(&desc, wait)) {
                    Ok(ack) => Ok(Some(ack)),
                    Err(e @ (SendError::Permanent { .. } | SendError::Stopped(_))) => Err(e),
                    Err(e) => {
                        self.metrics
                            .errors
                            .with_label_values(&[error_type::FLIGHT])
                            .inc();
                        self.writer.reset();
                        tracing::warn!(error = %e, flush_id = %flush_id,
                            "no acknowledgement for the streamed flush; reading it again from Kafka");
                        Ok(None)
                    }
                }
            }
            State::Broken { .. } | State::Refused { .. } => Ok(None),
            State::Idle | State::Held { .. } => self
                .rt
                .block_on(self.writer.send(&desc, schema, &batches, left(until)))
                .map(Some),
        };
        // Only the counts are needed from here on, not the dead letters.
        let want = Rebuild::of(&desc, records, rows_digest);
        drop(desc);
        let sent = match sent {
            Ok(None) => {
                whole = Some(whole_reason::REREAD);
                match self.resend_from_kafka(&want, until) {
                    Ok(ack) => Ok(Some(ack)),
                    Err(Resend::Send(e)) => Err(e),
                    Err(Resend::Rebuild(e)) => return Err(e),
                }
            }
            other => other,
        };
        let ack = match sent {
            Ok(Some(ack)) => Some(ack),
            Ok(None) => unreachable!("a flush read again is acknowledged or fails"),
            Err(e) if rebuild::is_overlap(&e) => {
                whole = Some(whole_reason::REREAD);
                let left_out = self.send_unrecorded(&want, until)?;
                self.metrics
                    .records_skipped
                    .with_label_values(&[skip_reason::ALREADY_RECORDED])
                    .inc_by(left_out);
                None
            }
            Err(e) => return Err(e.into()),
        };
        drop(batches);
        if ack.as_ref().is_some_and(|a| a.recorded_by_another_flush) {
            // Another owner wrote the very same ranges (a handover).
            self.metrics
                .records_skipped
                .with_label_values(&[skip_reason::ALREADY_RECORDED])
                .inc_by(want.rows + want.record_dead_letters as u64);
        }
        if let Some(ack) = ack.as_ref().filter(|a| a.flush_id != flush_id) {
            anyhow::bail!(
                "the writer acknowledged flush {:?} while {} was sent; not committing",
                ack.flush_id,
                flush_id
            );
        }
        Ok(Delivered { ack, whole })
    }
}

#[cfg(test)]
mod finish_tests {
    use super::*;

    #[test]
    fn a_streams_end_waits_out_the_writers_budget() {
        let s = Duration::from_secs;
        assert_eq!(finish_wait(s(420), None), s(280));
        let ducklake = millpond_proto::WriterBudget::new(s(300), "DUCKLAKE_WRITE_BUDGET_S");
        assert_eq!(finish_wait(s(420), Some(&ducklake)), s(320));
        assert_eq!(
            finish_wait(s(100), Some(&ducklake)),
            s(100),
            "never past the deadline"
        );
        let small = millpond_proto::WriterBudget::new(s(10), "");
        assert_eq!(finish_wait(s(420), Some(&small)), s(280));
    }
}
