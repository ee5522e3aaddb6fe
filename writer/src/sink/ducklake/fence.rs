//! Fencing a second owner of a partition with leases.
//!
//! Two writers handed the same partition at once (a terminating pod's final
//! flush while the new owner writes, a hand-made replay) would both pass the
//! already-recorded check and both commit: DuckLake lets concurrent inserts
//! through. So a writer writes a partition only while it holds that
//! partition's lease, a row of `<schema>._millpond_leases_<table>`
//! (topic, kafka_partition, owner, expires_at) in the lake:
//!
//! * A partition's row is created, unowned and expired, in a commit of its
//!   own the first time a writer needs it. Claiming is then a small
//!   transaction that only updates rows: it takes the partitions whose lease
//!   is this owner's or has expired, and gives up (rolls back, retryable)
//!   when another owner's lease is still running. DuckLake refuses the second
//!   of two concurrent updates of the same rows, which is then retried:
//!   claims are serialised, and they are cheap. That was probed on DuckLake
//!   1.5.5 with a Postgres catalog, and the test
//!   `two_first_claims_of_a_new_partition_have_one_winner` checks it.
//! * DuckLake does not refuse concurrent inserts. Had the claim inserted a
//!   missing row and taken it at once, two writers claiming a new partition
//!   together would both have won. Two writers creating the same row leave
//!   two rows; a claim takes them all.
//! * A lease lasts `DUCKLAKE_PARTITION_LEASE_S`; a writer renews it only when
//!   less than two thirds remain, so most flushes pay nothing, and it never
//!   starts a commit with less than a third left (it renews first).
//! * The lease alone cannot stop a commit that stalls past it (a paused
//!   process, a catalog connection that holds its bytes): DuckLake retries
//!   a commit for a long time, and appended offsets never conflict. So each
//!   writer start also has a fence table, `_millpond_fence_<table>_<token>`
//!   (the token ends its owner id), and every write transaction inserts one
//!   row into it. A claim that takes partitions from another owner drops
//!   that owner's fence table in the claim transaction. DuckLake refuses to
//!   commit an insert into a table a concurrent transaction dropped (probed
//!   on 1.5.5 with a Postgres catalog; conflicts are per table, so a row per
//!   partition in a shared table would serialise every writer). So a write
//!   that began before another owner's claim can no longer commit once that
//!   claim did, however long it stalls; a write begun after it finds no
//!   table. A write that committed first is seen by the new owner's
//!   re-check. One insert per flush into a table only this writer touches;
//!   its own claims empty it.
//! * A stopping writer releases its leases, so the next owner starts at once.
//!   A killed one's leases expire.
//!
//! What it assumes: the catalog clients' clocks agree to within a third of
//! the lease. The owner is one per process start (lease_owner.rs).
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use duckdb::Connection;
use millpond_proto::OffsetRange;

use millpond_shared::retry::Ladder;

use super::classify::lake_error;
use super::commit_lock::CommitLock;
use super::config::DuckLakeConfig;
use super::connect::scrub;
use super::lease_owner::LeaseOwner;
use super::leases::{claim, fence_name, fence_token, own_fence, partitions};
pub use super::leases::{create_sql, sql_table};
use super::sql::literal;
use crate::sink::SinkError;

/// Claims (and releases) that collide with another writer's: 8 attempts,
/// 25 ms doubling with up to +100 % jitter (about 6 s in all).
const CLAIM: Ladder = Ladder {
    attempts: 8,
    base: Duration::from_millis(25),
    jitter: 1.0,
};

pub struct Fence {
    owner: LeaseOwner,
    lease: Duration,
    /// (topic, partition) -> when this writer's lease ends, by its own clock
    /// (measured from before the claim began: never later than the lake's).
    held: HashMap<(String, i32), Instant>,
    table_ready: bool,
    /// Partitions whose lease row this writer saw or created.
    rows: HashSet<(String, i32)>,
    /// This writer start's fence table exists (created in this session).
    fence_ready: bool,
}

impl Fence {
    pub fn new(owner: LeaseOwner, lease: Duration) -> Fence {
        Fence {
            owner,
            lease,
            held: HashMap::new(),
            table_ready: false,
            rows: HashSet::new(),
            fence_ready: false,
        }
    }

    /// Forgets the session's state (after a failed attempt). Held leases stay
    /// valid in the lake and are renewed by the next claim.
    pub fn reset(&mut self) {
        self.table_ready = false;
        self.fence_ready = false;
        self.rows.clear();
    }

    /// Drops this writer's own idea that it holds `ranges`' partitions
    /// (after a write transaction that failed to commit: another owner may
    /// have claimed them). The next write claims them again.
    pub fn forget(&mut self, ranges: &[OffsetRange]) {
        for r in ranges {
            self.held.remove(&(r.topic.clone(), r.partition));
        }
        // Its fence table may have been dropped by another owner's claim.
        self.fence_ready = false;
    }

    fn remaining(&self, r: &OffsetRange, now: Instant) -> Duration {
        self.held
            .get(&(r.topic.clone(), r.partition))
            .map_or(Duration::ZERO, |end| end.saturating_duration_since(now))
    }

    /// Makes sure this writer holds the lease of every partition in
    /// `ranges` for at least a third of the lease; claims or renews (in its
    /// own small transaction) when less than two thirds remain. Claims that
    /// collide with other writers' claims are retried here, briefly: they
    /// are cheap and expected when pods start together. `true` when it took
    /// a partition whose lease it did not hold (first claim, or one that
    /// ran out): another writer may have written it meanwhile.
    pub fn hold(
        &mut self,
        conn: &Connection,
        cfg: &DuckLakeConfig,
        lock: Option<&CommitLock>,
        ranges: &[OffsetRange],
    ) -> Result<bool, SinkError> {
        let now = Instant::now();
        if ranges
            .iter()
            .all(|r| self.remaining(r, now) > self.lease * 2 / 3)
        {
            return Ok(false);
        }
        let taken = ranges.iter().any(|r| self.remaining(r, now).is_zero());
        if taken {
            // Whoever took a partition from this writer meanwhile dropped
            // its fence table.
            self.fence_ready = false;
        }
        self.ensure_table(conn, cfg)?;
        let mut again = false;
        let started = CLAIM.retry_blocking(
            || {
                if again {
                    // A row may be gone (deleted by hand): create it again.
                    self.rows.clear();
                }
                again = true;
                let started = Instant::now();
                self.ensure_rows(conn, cfg, ranges)
                    .and_then(|()| self.ensure_fence(conn, cfg))
                    .and_then(|()| claim(conn, cfg, lock, &self.owner, self.lease, ranges))
                    .map(|()| started)
            },
            SinkError::is_contention,
        )?;
        for r in ranges {
            self.held
                .insert((r.topic.clone(), r.partition), started + self.lease);
        }
        Ok(taken)
    }

    /// Creates, in its own commit, the rows of the partitions in `ranges`
    /// that have none yet (unowned, expired), so that claims only update.
    fn ensure_rows(
        &mut self,
        conn: &Connection,
        cfg: &DuckLakeConfig,
        ranges: &[OffsetRange],
    ) -> Result<(), SinkError> {
        let missing: Vec<&OffsetRange> = ranges
            .iter()
            .filter(|r| !self.rows.contains(&(r.topic.clone(), r.partition)))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let table = sql_table(cfg);
        let mut topics: Vec<&str> = missing.iter().map(|r| r.topic.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        let mut sql = Vec::new();
        for topic in topics {
            let parts = partitions(ranges, topic);
            sql.push(format!(
                "INSERT INTO {table} SELECT {t}, p, '', TIMESTAMPTZ '1970-01-01 00:00:00+00' \
                 FROM unnest([{parts}]) AS u(p) \
                 WHERE p NOT IN (SELECT kafka_partition FROM {table} WHERE topic = {t})",
                t = literal(topic),
            ));
        }
        conn.execute_batch(&sql.join(";\n")).map_err(|e| {
            let mut e = lake_error(&cfg.lake, &e.to_string());
            e.message = format!("creating partition lease rows: {}", e.message);
            e
        })?;
        for r in ranges {
            self.rows.insert((r.topic.clone(), r.partition));
        }
        Ok(())
    }

    /// The statement each write transaction runs: a row into this writer
    /// start's fence table. Its COMMIT then fails if another owner's claim
    /// dropped that table after the transaction began.
    pub fn write_sql(&self, cfg: &DuckLakeConfig) -> String {
        format!(
            "INSERT INTO {} VALUES ({}, now())",
            own_fence(cfg, &self.owner),
            literal(&self.owner.id)
        )
    }

    /// Creates this writer start's fence table once per session (and again
    /// after a failed write: another owner may have dropped it).
    fn ensure_fence(&mut self, conn: &Connection, cfg: &DuckLakeConfig) -> Result<(), SinkError> {
        if self.fence_ready {
            return Ok(());
        }
        let token = fence_token(&self.owner.id).expect("an owner id ends with its token");
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} (owner VARCHAR, written_at TIMESTAMP WITH TIME ZONE)",
            own_fence(cfg, &self.owner)
        ))
        .map_err(|e| {
            let mut e = lake_error(&cfg.lake, &e.to_string());
            e.message = format!("creating the fence table: {}", e.message);
            e
        })?;
        // One row per write: kept in the catalog, never a file per flush.
        let _ = conn.execute_batch(&format!(
            "CALL lake.set_option('data_inlining_row_limit', 1000, schema => {}, table_name => {})",
            literal(&cfg.schema),
            literal(&fence_name(&cfg.table, token))
        ));
        self.fence_ready = true;
        Ok(())
    }

    /// Right before the write commits: false when some lease has less than
    /// a third left (the caller renews and retries rather than commit late).
    pub fn still_held(&self, ranges: &[OffsetRange]) -> bool {
        let now = Instant::now();
        ranges
            .iter()
            .all(|r| self.remaining(r, now) > self.lease / 3)
    }

    /// Ends this writer's leases, so the next owner need not wait them out.
    /// In turn with the catalog's other writers, and retried: pods stopping
    /// together (a scale-down) release at the same moment, DuckLake refuses
    /// the second of two concurrent updates of the lease table, and a
    /// release given up on leaves the next owner waiting out the lease.
    pub fn release(&mut self, conn: &Connection, cfg: &DuckLakeConfig, lock: Option<&CommitLock>) {
        if self.held.is_empty() {
            return;
        }
        let table = sql_table(cfg);
        let sql = format!(
            "UPDATE {table} SET expires_at = now() - INTERVAL 1 SECOND WHERE owner = {}; DROP TABLE IF EXISTS {}; COMMIT",
            literal(&self.owner.id),
            own_fence(cfg, &self.owner)
        );
        let attempt = || {
            let done = super::commit_lock::begin_on(lock, conn)
                .and_then(|()| conn.execute_batch(&sql).map_err(|e| e.to_string()));
            if done.is_err() {
                // Whatever failed, the next attempt starts from no open
                // transaction.
                let _ = conn.execute_batch("ROLLBACK");
            }
            done
        };
        match CLAIM.retry_blocking(attempt, |_| true) {
            Ok(()) => tracing::info!(partitions = self.held.len(), "partition leases released"),
            Err(e) => {
                let e = scrub(&cfg.lake, &e.to_string());
                tracing::warn!(error = %e, "releasing partition leases failed; they expire on their own")
            }
        }
        self.held.clear();
    }

    /// Creates the lease table once per session.
    fn ensure_table(&mut self, conn: &Connection, cfg: &DuckLakeConfig) -> Result<(), SinkError> {
        if self.table_ready {
            return Ok(());
        }
        let table = sql_table(cfg);
        if let Err(e) = conn.execute_batch(&create_sql(cfg)) {
            // Another writer may have created it at the same moment.
            conn.execute_batch(&format!("SELECT 1 FROM {table} LIMIT 0"))
                .map_err(|_| {
                    let e = scrub(&cfg.lake, &e.to_string());
                    SinkError::transient(format!("lease table {table}: {e}"))
                })?;
        }
        self.table_ready = true;
        Ok(())
    }

    /// The lease table exists: it was created with the writer's other
    /// tables at startup.
    pub fn table_created(&mut self) {
        self.table_ready = true;
    }
}

#[cfg(test)]
#[path = "fence_tests.rs"]
mod tests;
