//! The writers of one Postgres catalog commit their flushes in turn.
//!
//! DuckLake 1.5.5 commits a transaction at the snapshot it began from. When
//! any other commit landed meanwhile (another pod's, on any table), the
//! first attempt fails on the snapshot's key, and DuckLake rolls back,
//! waits 50-100 ms (growing 1.5 times a retry), reads the whole snapshot
//! table twice and every table's statistics (its newest-snapshot subquery
//! is not passed down to Postgres), and tries again. Measured with 16
//! writers flushing once a second each: two such retries per commit, and
//! the reads grow with every snapshot the lake keeps.
//!
//! So each write transaction and each lease claim first takes a Postgres
//! advisory lock, in a transaction of its own on a second, read-only
//! attachment of the catalog database. DuckDB commits the attachments of a
//! transaction in the reverse order of their first use, so the lock is
//! released after the lake's commit: the next writer begins from the
//! newest snapshot and its first attempt lands.
//!
//! The lock orders commits and nothing else: what a flush writes, the
//! offsets re-check and the partition fence are as without it. A lock not
//! had within DUCKLAKE_COMMIT_LOCK_WAIT_MS (a holder stalled between its
//! BEGIN and COMMIT, or commits queued past what the catalog keeps up
//! with) is given up for that transaction, which then commits as DuckLake
//! allows without it: meeting other commits and retrying.
use std::time::Duration;

/// The attachment that holds the lock's transaction.
pub const ATTACHMENT: &str = "millpond_commit_lock";

/// The advisory lock's key: "millpond" in ASCII, as one BIGINT. `pg_locks`
/// shows it as `locktype = 'advisory'`, classid 1835625580 and objid
/// 1886350948 (its two halves).
pub const KEY: i64 = 0x6d69_6c6c_706f_6e64;

/// Postgres' message when `lock_timeout` ran out.
const TIMED_OUT: &str = "lock timeout";

pub struct CommitLock {
    wait: Duration,
}

impl CommitLock {
    pub fn new(wait: Duration) -> CommitLock {
        CommitLock { wait }
    }

    /// The libpq `options` of the attachment: waits end after `wait`.
    pub fn options(&self) -> String {
        format!("-c lock_timeout={}", self.wait.as_millis())
    }

    /// BEGIN, then the lock, through `run` (the connection the
    /// transaction runs on). A wait that ran out gives the lock up for this
    /// transaction (see the module) and begins again without it.
    pub fn begin(&self, run: impl Fn(&str) -> Result<(), String>) -> Result<(), String> {
        run("BEGIN TRANSACTION")?;
        match run(&lock_sql()) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = run("ROLLBACK");
                if !e.contains(TIMED_OUT) {
                    return Err(format!("taking the commit lock: {e}"));
                }
                tracing::warn!(
                    waited_ms = self.wait.as_millis() as u64,
                    "another writer of this catalog held the commit lock past DUCKLAKE_COMMIT_LOCK_WAIT_MS; \
                     committing without it (DuckLake retries a commit that meets another)"
                );
                run("BEGIN TRANSACTION")
            }
        }
    }
}

/// BEGIN on `conn`, with the lock when there is one.
pub fn begin_on(lock: Option<&CommitLock>, conn: &duckdb::Connection) -> Result<(), String> {
    let run = |sql: &str| conn.execute_batch(sql).map_err(|e| e.to_string());
    match lock {
        Some(lock) => lock.begin(run),
        None => run("BEGIN TRANSACTION"),
    }
}

/// Taken inside the write transaction; released when it ends.
pub fn lock_sql() -> String {
    format!("SELECT * FROM postgres_query('{ATTACHMENT}', 'SELECT pg_advisory_xact_lock({KEY})')")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_spells_millpond() {
        assert_eq!(KEY.to_be_bytes(), *b"millpond");
        assert_eq!(
            CommitLock::new(Duration::from_millis(1500)).options(),
            "-c lock_timeout=1500"
        );
        assert!(lock_sql().contains("pg_advisory_xact_lock(7883951835687382628)"));
        assert_eq!(
            (KEY >> 32, KEY & 0xffff_ffff),
            (1_835_625_580, 1_886_350_948)
        );
    }
}
