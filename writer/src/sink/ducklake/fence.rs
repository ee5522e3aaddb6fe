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
use millpond_shared::failpoint::{self, Failpoint};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use duckdb::Connection;
use millpond_proto::OffsetRange;

use millpond_shared::retry::Ladder;

use super::classify::lake_error;
use super::config::DuckLakeConfig;
use super::connect::scrub;
use super::lease_owner::LeaseOwner;
use super::sql::literal;
use crate::sink::{SinkError, SinkErrorKind};

/// Claims that collide with another writer's claim: 8 attempts, 25 ms
/// doubling with up to +100 % jitter (about 6 s in all).
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

/// `_millpond_leases_<table>`: one lease table per target table, so the
/// claims of unrelated pipelines never conflict.
pub fn table_name(target: &str) -> String {
    format!("_millpond_leases_{target}")
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
                    .and_then(|()| self.claim(conn, cfg, ranges))
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

    /// One claim transaction: the partitions' rows taken where this owner
    /// holds them or their lease has ended.
    fn claim(
        &self,
        conn: &Connection,
        cfg: &DuckLakeConfig,
        ranges: &[OffsetRange],
    ) -> Result<(), SinkError> {
        let table = sql_table(cfg);
        let mut topics: Vec<&str> = ranges.iter().map(|r| r.topic.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        let owner = literal(&self.owner.id);
        let mut sql = vec!["BEGIN TRANSACTION".to_owned()];
        for topic in &topics {
            let parts = partitions(ranges, topic);
            sql.push(format!(
                "UPDATE {table} SET owner = {owner}, expires_at = now() + INTERVAL {secs} SECOND \
                 WHERE topic = {t} AND kafka_partition IN ({parts}) \
                 AND (owner = {owner} OR expires_at < now() OR {same_pod})",
                secs = self.lease.as_secs(),
                t = literal(topic),
                same_pod = self.same_pod_sql(),
            ));
        }
        // This writer's own fence rows are no longer needed.
        sql.push(format!("DELETE FROM {}", self.own_fence(cfg)));
        let run = conn
            .execute_batch("BEGIN TRANSACTION")
            .and_then(|()| {
                // The owners whose partitions this claim takes: their fence
                // tables go, so none of their writes can commit after it.
                let mut taken = Vec::new();
                for topic in &topics {
                    let mut stmt = conn.prepare(&format!(
                        "SELECT DISTINCT owner FROM {table} WHERE topic = ? AND kafka_partition IN ({}) \
                         AND owner <> ? AND owner <> '' AND (expires_at < now() OR {})",
                        partitions(ranges, topic),
                        self.same_pod_sql()
                    ))?;
                    let rows = stmt.query_map(duckdb::params![topic, self.owner.id], |row| {
                        row.get::<_, String>(0)
                    })?;
                    for owner in rows {
                        taken.push(owner?);
                    }
                }
                let drops = taken.iter().filter_map(|o| fence_token(o)).map(|t| {
                    format!("DROP TABLE IF EXISTS {}", cfg.sql_name(&fence_name(&cfg.table, t)))
                });
                let claim: Vec<String> = sql[1..].iter().cloned().chain(drops).collect();
                conn.execute_batch(&claim.join(";\n"))
            })
            .and_then(|()| {
            // Anyone else's running lease on these partitions? And did this
            // claim take a row of every one?
            let mut others = Vec::new();
            let mut rowless = false;
            for topic in &topics {
                let mut stmt = conn.prepare(&format!(
                    "SELECT kafka_partition, owner, expires_at::VARCHAR FROM {table} \
                     WHERE topic = ? AND kafka_partition IN ({}) AND owner <> ? AND expires_at >= now() \
                     AND NOT ({})",
                    partitions(ranges, topic),
                    self.same_pod_sql()
                ))?;
                let rows = stmt.query_map(duckdb::params![topic, self.owner.id], |row| {
                    Ok(format!(
                        "partition {} held by {} until {}",
                        row.get::<_, i32>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?
                    ))
                })?;
                for r in rows {
                    others.push(r?);
                }
                let want: HashSet<i32> = ranges
                    .iter()
                    .filter(|r| r.topic == *topic)
                    .map(|r| r.partition)
                    .collect();
                let mine: i64 = conn.query_row(
                    &format!(
                        "SELECT count(DISTINCT kafka_partition) FROM {table} \
                         WHERE topic = ? AND kafka_partition IN ({}) AND owner = ?",
                        partitions(ranges, topic)
                    ),
                    duckdb::params![topic, self.owner.id],
                    |row| row.get(0),
                )?;
                rowless |= mine < want.len() as i64;
            }
            Ok((others, rowless))
        });
        let conflict = |e: &dyn std::fmt::Display| {
            let _ = conn.execute_batch("ROLLBACK");
            SinkError::new(
                SinkErrorKind::Contention(crate::sink::SinkId::DuckLake),
                format!(
                    "claiming partition leases: {}",
                    scrub(&cfg.lake, &e.to_string())
                ),
            )
        };
        let (others, rowless) = run.map_err(|e| conflict(&e))?;
        if !others.is_empty() {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(SinkError::new(
                SinkErrorKind::Leased,
                format!(
                    "another writer owns these partitions ({}); resend once its lease ends or is released",
                    others.join("; ")
                ),
            ));
        }
        if rowless {
            // A row deleted meanwhile: retried, after creating it again.
            return Err(conflict(&"a partition has no lease row"));
        }
        failpoint::pause(Failpoint::PauseInClaim);
        conn.execute_batch("COMMIT").map_err(|e| conflict(&e))
    }

    /// Whether a lease row's owner is an earlier run in this pod (its UID
    /// known): `starts_with(owner, '<name>/<uid>/')`, else `false`.
    fn same_pod_sql(&self) -> String {
        self.owner
            .same_pod
            .as_ref()
            .map_or("false".to_owned(), |p| {
                format!("starts_with(owner, {})", literal(p))
            })
    }

    /// The statement each write transaction runs: a row into this writer
    /// start's fence table. Its COMMIT then fails if another owner's claim
    /// dropped that table after the transaction began.
    pub fn write_sql(&self, cfg: &DuckLakeConfig) -> String {
        format!(
            "INSERT INTO {} VALUES ({}, now())",
            self.own_fence(cfg),
            literal(&self.owner.id)
        )
    }

    fn own_fence(&self, cfg: &DuckLakeConfig) -> String {
        let token = fence_token(&self.owner.id).expect("an owner id ends with its token");
        cfg.sql_name(&fence_name(&cfg.table, token))
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
            self.own_fence(cfg)
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
    pub fn release(&mut self, conn: &Connection, cfg: &DuckLakeConfig) {
        if self.held.is_empty() {
            return;
        }
        let table = sql_table(cfg);
        let sql = format!(
            "UPDATE {table} SET expires_at = now() - INTERVAL 1 SECOND WHERE owner = {}; DROP TABLE IF EXISTS {}",
            literal(&self.owner.id),
            self.own_fence(cfg)
        );
        match conn.execute_batch(&sql) {
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

/// `_millpond_fence_<table>_<token>`: the fence of one writer start.
fn fence_name(target: &str, token: &str) -> String {
    format!("_millpond_fence_{target}_{token}")
}

/// The token that ends an owner id (`<name>/<uid>/<token>`); none for an
/// owner written by a release without fence tables.
fn fence_token(owner: &str) -> Option<&str> {
    let (_, token) = owner.rsplit_once('/')?;
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_hexdigit())).then_some(token)
}

/// The lease table of `cfg`'s target table, as SQL names it.
pub fn sql_table(cfg: &DuckLakeConfig) -> String {
    cfg.sql_name(&table_name(&cfg.table))
}

/// Creates the lease table of `cfg`'s target table when it is missing.
pub fn create_sql(cfg: &DuckLakeConfig) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (topic VARCHAR, kafka_partition INTEGER, \
         owner VARCHAR, expires_at TIMESTAMP WITH TIME ZONE)",
        sql_table(cfg)
    )
}

fn partitions(ranges: &[OffsetRange], topic: &str) -> String {
    ranges
        .iter()
        .filter(|r| r.topic == topic)
        .map(|r| r.partition.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_table_is_named_by_the_token_that_ends_its_owner() {
        let owner = LeaseOwner::new(Some("pod-0".into()), Some("uid".into()));
        let token = fence_token(&owner.id).unwrap();
        assert_eq!(token.len(), 12);
        assert!(owner.id.ends_with(token));
        assert_eq!(
            fence_name("events", token),
            format!("_millpond_fence_events_{token}")
        );
        // Owners a release without fence tables wrote have none.
        assert_eq!(fence_token("millpond-0"), None);
        assert_eq!(fence_token("a/b/"), None);
        assert_eq!(fence_token("a/b/x'; DROP"), None);
    }

    #[test]
    fn leases_are_renewed_at_two_thirds_and_refused_for_commit_at_one_third() {
        let mut f = Fence::new(
            LeaseOwner::new(Some("pod-0".into()), None),
            Duration::from_secs(60),
        );
        let r = [OffsetRange::new("t", 3, 0, 9)];
        assert!(!f.still_held(&r), "nothing held yet");
        f.held
            .insert(("t".into(), 3), Instant::now() + Duration::from_secs(50));
        assert!(f.still_held(&r));
        assert!(f.remaining(&r[0], Instant::now()) > f.lease * 2 / 3);
        f.held
            .insert(("t".into(), 3), Instant::now() + Duration::from_secs(15));
        assert!(!f.still_held(&r));
        assert_eq!(
            partitions(
                &[
                    r[0].clone(),
                    OffsetRange::new("t", 5, 0, 1),
                    OffsetRange::new("u", 1, 0, 1)
                ],
                "t"
            ),
            "3, 5"
        );
    }
}
