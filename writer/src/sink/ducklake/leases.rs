//! The lease table and the claim transaction of the partition fence
//! (fence.rs says how the fence works): the SQL names of the lease and
//! fence tables, and one claim of partitions for an owner.
use std::collections::HashSet;
use std::time::Duration;

use duckdb::Connection;
use millpond_proto::OffsetRange;
use millpond_shared::failpoint::{self, Failpoint};

use super::commit_lock::{self, CommitLock};
use super::config::DuckLakeConfig;
use super::connect::scrub;
use super::lease_owner::LeaseOwner;
use super::sql::literal;
use crate::sink::{SinkError, SinkErrorKind};

/// `_millpond_leases_<table>`: one lease table per target table, so the
/// claims of unrelated pipelines never conflict.
pub fn table_name(target: &str) -> String {
    format!("_millpond_leases_{target}")
}

/// `_millpond_fence_<table>_<token>`: the fence of one writer start.
pub fn fence_name(target: &str, token: &str) -> String {
    format!("_millpond_fence_{target}_{token}")
}

/// The token that ends an owner id (`<name>/<uid>/<token>`); none for an
/// owner written by a release without fence tables.
pub fn fence_token(owner: &str) -> Option<&str> {
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

pub fn partitions(ranges: &[OffsetRange], topic: &str) -> String {
    ranges
        .iter()
        .filter(|r| r.topic == topic)
        .map(|r| r.partition.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// This writer start's fence table, as SQL names it.
pub fn own_fence(cfg: &DuckLakeConfig, owner: &LeaseOwner) -> String {
    let token = fence_token(&owner.id).expect("an owner id ends with its token");
    cfg.sql_name(&fence_name(&cfg.table, token))
}

/// One claim transaction: the partitions' rows taken where this owner
/// holds them or their lease has ended.
pub fn claim(
    conn: &Connection,
    cfg: &DuckLakeConfig,
    lock: Option<&CommitLock>,
    owner: &LeaseOwner,
    lease: Duration,
    ranges: &[OffsetRange],
) -> Result<(), SinkError> {
    let table = sql_table(cfg);
    let mut topics: Vec<&str> = ranges.iter().map(|r| r.topic.as_str()).collect();
    topics.sort_unstable();
    topics.dedup();
    let owner_id = literal(&owner.id);
    let mut sql = Vec::new();
    for topic in &topics {
        let parts = partitions(ranges, topic);
        sql.push(format!(
            "UPDATE {table} SET owner = {owner_id}, expires_at = now() + INTERVAL {secs} SECOND \
             WHERE topic = {t} AND kafka_partition IN ({parts}) \
             AND (owner = {owner_id} OR expires_at < now() OR {same_pod})",
            secs = lease.as_secs(),
            t = literal(topic),
            same_pod = same_pod_sql(owner),
        ));
    }
    // This writer's own fence rows are no longer needed.
    sql.push(format!("DELETE FROM {}", own_fence(cfg, owner)));
    // In turn with the catalog's other writers, as a flush (commit_lock.rs).
    commit_lock::begin_on(lock, conn).map_err(|e| {
        SinkError::new(
            SinkErrorKind::Contention(crate::sink::SinkId::DuckLake),
            format!("claiming partition leases: {}", scrub(&cfg.lake, &e)),
        )
    })?;
    let run = take(conn, cfg, &table, &topics, owner, ranges, sql)
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
                same_pod_sql(owner)
            ))?;
            let rows = stmt.query_map(duckdb::params![topic, owner.id], |row| {
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
                duckdb::params![topic, owner.id],
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

/// The claim's updates, and the fence tables of the owners whose partitions
/// it takes dropped, so that none of their writes can commit after it.
fn take(
    conn: &Connection,
    cfg: &DuckLakeConfig,
    table: &str,
    topics: &[&str],
    owner: &LeaseOwner,
    ranges: &[OffsetRange],
    updates: Vec<String>,
) -> duckdb::Result<()> {
    let mut taken = Vec::new();
    for topic in topics {
        let mut stmt = conn.prepare(&format!(
            "SELECT DISTINCT owner FROM {table} WHERE topic = ? AND kafka_partition IN ({}) \
             AND owner <> ? AND owner <> '' AND (expires_at < now() OR {})",
            partitions(ranges, topic),
            same_pod_sql(owner)
        ))?;
        let rows = stmt.query_map(duckdb::params![topic, owner.id], |row| {
            row.get::<_, String>(0)
        })?;
        for owner in rows {
            taken.push(owner?);
        }
    }
    let drops = taken.iter().filter_map(|o| fence_token(o)).map(|t| {
        format!(
            "DROP TABLE IF EXISTS {}",
            cfg.sql_name(&fence_name(&cfg.table, t))
        )
    });
    let claim: Vec<String> = updates.into_iter().chain(drops).collect();
    conn.execute_batch(&claim.join(";\n"))
}

/// Whether a lease row's owner is an earlier run in this pod (its UID
/// known): `starts_with(owner, '<name>/<uid>/')`, else `false`.
fn same_pod_sql(owner: &LeaseOwner) -> String {
    owner.same_pod.as_ref().map_or("false".to_owned(), |p| {
        format!("starts_with(owner, {})", literal(p))
    })
}
