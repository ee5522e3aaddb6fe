//! The one lake transaction of a flush: begun in turn with the catalog's
//! other writers (commit_lock.rs), the offsets re-checked, the DDL
//! its rows need, the statements that add its rows, its dead letters, its
//! offset ranges recorded, the fence written, the snapshot's commit
//! message, and COMMIT. It returns where it failed, if it did.
//!
//! The snapshot is not looked up after COMMIT: that read is a catalog
//! transaction of its own, which on a SQLite catalog scans every kept
//! snapshot (measured: 2.7 ms a flush on a new lake, 10 ms at 20,000
//! snapshots). The commit message names the flush instead:
//! `SELECT snapshot_id FROM lake.snapshots() WHERE commit_message =
//! 'millpond flush <id>'`.
use millpond_shared::failpoint::{self, Failpoint};

use super::classify::lake_error;
use super::lake::Lake;
use super::sql::literal;
use crate::sink::{Flush, SinkError, SinkErrorKind, SinkId};

pub struct Transaction<'a> {
    pub flush: &'a Flush,
    /// The columns the rows need, before them.
    pub ddl: &'a [String],
    /// Statements that add the flush's rows, run one at a time.
    pub rows: Vec<String>,
    /// The statement that adds the flush's dead letters, if any.
    pub dead_letters: Option<String>,
}

/// Where a transaction failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// BEGIN, the re-check of the offsets, the DDL.
    Open,
    /// A statement adding the flush's rows: the rows' own failure.
    Rows,
    /// The dead letters, the offsets or the fence.
    Record,
    /// The partition lease too close to its end to commit.
    Lease,
    /// COMMIT was issued: the outcome is unknown until the offsets are
    /// read again.
    Commit,
}

#[derive(Debug)]
pub struct Failed {
    pub error: SinkError,
    pub at: Step,
}

impl Failed {
    /// COMMIT was issued: what it wrote may be in the lake.
    pub fn commit_sent(&self) -> bool {
        self.at == Step::Commit
    }

    /// A statement adding the flush's rows was refused.
    pub fn rows_refused(&self) -> bool {
        self.at == Step::Rows
    }
}

impl From<Failed> for SinkError {
    fn from(f: Failed) -> SinkError {
        f.error
    }
}

impl Transaction<'_> {
    /// Runs the transaction on the lake's session.
    pub fn run(self, lake: &mut Lake) -> Result<(), Failed> {
        let flush = self.flush;
        let mut head: Vec<String> = lake
            .offsets
            .recheck_sql(&flush.ranges)
            .into_iter()
            .collect();
        head.extend(self.ddl.iter().cloned());
        let mut tail = Vec::new();
        tail.extend(self.dead_letters);
        if let Some(s) = lake.offsets.insert_sql(&flush.id, &flush.ranges) {
            tail.push(s);
        }
        if lake.cfg.partition_fence {
            tail.push(lake.fence.write_sql(&lake.cfg));
        }
        tail.push(commit_message_sql(&lake.cfg.lease_owner.id, &flush.id));
        let mut at = Step::Open;
        let mut result = lake.begin();
        let session = lake.session();
        if result.is_ok() && !head.is_empty() {
            result = session.execute_raw(&head.join(";\n"));
        }
        // One statement at a time: a failure here is the rows' own.
        for statement in &self.rows {
            if result.is_ok() {
                at = Step::Rows;
                result = session.execute_raw(statement);
            }
        }
        if result.is_ok() {
            at = Step::Record;
            result = session.execute_raw(&tail.join(";\n"));
        }
        if result.is_ok() {
            failpoint::pause(Failpoint::PauseBeforeCommit);
            if lake.cfg.partition_fence && !lake.fence.still_held(&flush.ranges) {
                let _ = session.execute_raw("ROLLBACK");
                return Err(Failed {
                    error: SinkError::new(
                        SinkErrorKind::Contention(SinkId::DuckLake),
                        "partition lease too close to its end to commit; renewing it first",
                    ),
                    at: Step::Lease,
                });
            }
            failpoint::pause(Failpoint::StallInCommit);
            at = Step::Commit;
            result = session.execute_raw("COMMIT");
        }
        if let Err(e) = result {
            let _ = session.execute_raw("ROLLBACK");
            let error = lake_error(&lake.cfg.lake, &e);
            // The outcome may be unknown: read the offsets again next time.
            lake.caches.known.forget();
            // Maybe another owner's claim (the fence): claim again. Not
            // when the rows' own statement failed: nothing of the fence was
            // touched and the lease is still this writer's (the VARIANT
            // fallback writes the flush again at once, under it).
            if at != Step::Rows {
                lake.fence.forget(&flush.ranges);
            }
            return Err(Failed { error, at });
        }
        lake.caches.known.committed(&flush.ranges);
        Ok(())
    }
}

/// The snapshot's author (this writer start) and a message naming the
/// flush, so the snapshot that holds a flush can be found.
pub fn commit_message_sql(author: &str, flush_id: &str) -> String {
    format!(
        "CALL lake.set_commit_message({}, {})",
        literal(author),
        literal(&format!("millpond flush {flush_id}"))
    )
}
