//! The record stages between conversion and the writer, in the spec's
//! order: conversion and limits, column type coercion, the allowlist and
//! denylist filters, the pending buffer, then the pre-write sort of the
//! consolidated flush. One path: the consume loop, the replay
//! tool and the benchmarks all call [`Stages::process`] and [`Stages::cut`].
pub mod coerce;
pub mod config;
mod decision;
pub mod filter;
pub mod include;
pub mod sort;

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use millpond_proto::FlushTrigger;

use crate::buffer::{Cut, Pending};
use crate::kafka::Record;
pub use config::StageConfig;
pub use decision::{Added, Decision};
use sort::{Skipped, Sorted};

pub struct Stages {
    pending: Pending,
    coercion: coerce::Coercion,
    filters: filter::Filters,
    sort_by: Vec<String>,
    warned: sort::Warned,
}

/// A flush ready to send, and what the sort did.
pub struct Staged {
    pub cut: Cut,
    /// Set when the flush goes unsorted although MILLPOND_SORT_BY is set;
    /// `warn` is true the first time this (reason, keys) is seen.
    pub sort_skipped: Option<(Skipped, bool)>,
}

impl Stages {
    /// The allowlist follows `live` from now on (authoritative dynamic source).
    pub fn with_live_allowlist(mut self, live: filter::LiveValues) -> Self {
        self.filters = std::mem::take(&mut self.filters).with_live_values(live);
        self
    }

    pub fn new(cfg: &StageConfig) -> Stages {
        Stages {
            pending: Pending::with_limits(cfg.limits),
            coercion: cfg.coercion.clone(),
            filters: filter::Filters::new(cfg.keep.clone(), cfg.drop.clone()),
            sort_by: cfg.sort_by.clone(),
            warned: sort::Warned::default(),
        }
    }

    /// Runs consumed records of `topic` through the stages into the buffer.
    pub fn process(&mut self, topic: &str, records: &[Record<'_>]) -> Added {
        let rows = self.pending.convert(topic, records);
        let decision = match &rows.batch {
            Some(batch) => self.decide(batch),
            None => Decision::default(),
        };
        let (kept, report) = decision.split();
        report.with(self.pending.admit(topic, rows, kept))
    }

    /// coercion -> allowlist -> denylist, as the spec orders them.
    fn decide(&mut self, batch: &RecordBatch) -> Decision {
        let coerced = self.coercion.apply(batch);
        let mut decision = self.filters.decide(coerced.batch.as_ref().unwrap_or(batch));
        decision.batch = coerced.batch;
        decision.nulled = coerced.nulled;
        decision.coerced = coerced.columns;
        decision
    }

    /// Takes everything pending as one flush, sorted when configured.
    pub fn cut(
        &mut self,
        topic: &str,
        trigger: FlushTrigger,
        flush_id: String,
    ) -> Result<Staged, ArrowError> {
        let mut cut = self.pending.cut(topic, trigger, flush_id)?;
        if self.sort_by.is_empty() || cut.batches.is_empty() {
            return Ok(Staged {
                cut,
                sort_skipped: None,
            });
        }
        let batches = std::mem::take(&mut cut.batches);
        let sort_skipped = match sort::sort(&cut.schema, batches, &self.sort_by)? {
            Sorted::Sorted(b) => {
                cut.batches = b;
                None
            }
            Sorted::Skipped(b, why) => {
                cut.batches = b;
                let first = self.warned.first_time(&why);
                Some((why, first))
            }
        };
        Ok(Staged { cut, sort_skipped })
    }

    /// True when a flush can go to the writer batch by batch as it is
    /// consumed: the pre-write sort needs the whole flush, so a flush held
    /// for MILLPOND_SORT_BY is sent at its cut.
    pub fn streams(&self) -> bool {
        self.sort_by.is_empty()
    }

    /// The batches converted since the last call (see [`Pending::drain`]).
    pub fn drain(&mut self) -> Vec<RecordBatch> {
        self.pending.drain()
    }

    /// See [`Pending::restore`].
    pub fn restore(&mut self, batches: Vec<RecordBatch>) {
        self.pending.restore(batches);
    }

    pub fn bytes(&self) -> usize {
        self.pending.bytes()
    }

    pub fn rows(&self) -> usize {
        self.pending.rows()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}
