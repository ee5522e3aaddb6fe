//! Turning DuckDB errors into retry decisions.
use millpond_shared::redact::without_values;

use super::connect::scrub;
use super::lake_config::LakeConfig;
use crate::sink::{SinkError, SinkErrorKind};

/// The write transaction's refusal when the table's columns changed since
/// the writer read them (another writer added one): retried at once. Raised
/// by the statement `table::columns_unchanged_sql` writes.
pub const COLUMNS_CHANGED: &str =
    "millpond: the columns of the table changed since the writer read them";

/// Catalog commit contention: snapshot id races, conflicting DDL, a
/// partition claimed by another writer (fence conflict or re-check), a
/// column another writer added during a write, and a SQLite catalog locked
/// by another process's transaction (`millpond-lake` maintaining it, say:
/// SQLite answers a transaction that read before another's write with
/// "database is locked" at once, whatever the busy timeout).
const CONTENTION: [&str; 9] = [
    super::offsets::RECORDED_MEANWHILE,
    COLUMNS_CHANGED,
    "maximum retry count",
    "duplicate key value",
    "could not serialize access",
    "Transaction conflict",
    "another transaction has altered",
    "Conflict",
    SQLITE_LOCKED,
];

/// Deterministic failures: the same input fails the same way every time.
const PERMANENT: [&str; 3] = ["Conversion Error", "Parser Error", "Binder Error"];

/// A lost catalog or storage connection, whatever error class DuckDB wraps
/// it in (a catalog query failing mid-bind surfaces as a Binder Error).
const CONNECTION_LOST: [&str; 6] = [
    "no connection to the server",
    "server closed the connection",
    "could not connect to server",
    "connection to server",
    "Connection refused",
    "SSL SYSCALL error",
];

/// How DuckLake refuses a file given to `ducklake_add_data_files` (a column
/// of another type, one the table lacks, a partitioned table).
pub const FILE_REFUSED: &str = "Invalid Input Error";

/// Whether an error is a lost catalog or storage connection.
pub fn connection_lost(message: &str) -> bool {
    CONNECTION_LOST.iter().any(|p| message.contains(p))
}

/// An error of the lake's: classified on DuckDB's own message, kept with
/// the lake's secrets and any value it quotes masked. Masking first could
/// hide a signature: a secret may contain one, or be a word of ours.
pub fn lake_error(lake: &LakeConfig, raw: &str) -> SinkError {
    SinkError::new(kind_of(raw), without_values(&scrub(lake, raw)))
}

/// Whether an error is another transaction's commit getting in the way:
/// the same statement may succeed when run again.
pub fn contended(message: &str) -> bool {
    CONTENTION.iter().any(|p| message.contains(p))
}

/// SQLite's refusal of a commit: after it DuckDB's attachment of the
/// catalog stays stuck until it is attached again.
const SQLITE_LOCKED: &str = "database is locked";

/// Whether the session may be kept for the next attempt after `error`:
/// a commit conflict rolled back on a live catalog connection. A lost
/// connection, a SQLite catalog that refused a commit and every other
/// failure open a new session.
pub fn keeps_session(error: &SinkError) -> bool {
    error.is_contention() && !error.message.contains(SQLITE_LOCKED)
}

fn kind_of(message: &str) -> SinkErrorKind {
    if contended(message) {
        SinkErrorKind::Contention(crate::sink::SinkId::DuckLake)
    } else if connection_lost(message) {
        SinkErrorKind::Transient
    } else if PERMANENT.iter().any(|p| message.contains(p)) {
        SinkErrorKind::Permanent
    } else {
        SinkErrorKind::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_signatures() {
        for m in [
            "TransactionContext Error: Failed to commit: duplicate key value violates unique constraint \"ducklake_snapshot_pkey\"",
            "exceeded the maximum retry count",
            "TransactionContext Error: Transaction conflict: cannot add column",
            "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\nFailed to flush changes into DuckLake: database is locked",
        ] {
            assert_eq!(kind_of(m), SinkErrorKind::Contention(crate::sink::SinkId::DuckLake), "{m}");
        }
        assert_eq!(
            kind_of("Conversion Error: Could not convert string 'x' to INT64"),
            SinkErrorKind::Permanent
        );
        assert_eq!(
            kind_of("IO Error: Connection refused"),
            SinkErrorKind::Transient
        );
        assert_eq!(
            kind_of(
                "Binder Error: Failed to get data file list from DuckLake: Failed to prepare query (no result returned): no connection to the server"
            ),
            SinkErrorKind::Transient,
            "a dropped catalog connection is retried whatever class wraps it"
        );
    }

    /// A commit conflict keeps the session; SQLite's refusal, a lost
    /// connection and any other failure open a new one.
    #[test]
    fn only_a_conflict_on_a_live_connection_keeps_the_session() {
        let pg_conflict = lake_error_raw(
            "TransactionContext Error: Failed to commit: duplicate key value violates unique constraint \"ducklake_snapshot_pkey\"",
        );
        assert!(keeps_session(&pg_conflict));
        let sqlite = lake_error_raw(
            "TransactionContext Error: Failed to commit DuckLake transaction.\nFailed to flush changes into DuckLake: database is locked",
        );
        assert!(sqlite.is_contention());
        assert!(!keeps_session(&sqlite));
        assert!(!keeps_session(&lake_error_raw(
            "IO Error: no connection to the server"
        )));
        assert!(!keeps_session(&lake_error_raw("Binder Error: x")));
    }

    fn lake_error_raw(m: &str) -> SinkError {
        SinkError::new(kind_of(m), m)
    }

    /// The kind comes from DuckDB's own message, the text is masked: a
    /// password that is a word of a signature neither leaks nor turns the
    /// re-check's contention into a plain transient error.
    #[test]
    fn a_secret_inside_a_signature_is_masked_after_classifying() {
        use millpond_shared::config::{Env, EnvReader};
        let env = Env::from_pairs(vec![
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_RDS_PASSWORD", "millpond"),
            ("DUCKLAKE_DATA_PATH", "/lake/data/"),
        ]);
        let mut r = EnvReader::new(&env);
        let lake = LakeConfig::parse(&mut r).unwrap();
        r.finish().unwrap();
        let raw = format!(
            "Invalid Input Error: {}",
            super::super::offsets::RECORDED_MEANWHILE
        );
        let e = lake_error(&lake, &raw);
        assert_eq!(
            e.kind,
            SinkErrorKind::Contention(crate::sink::SinkId::DuckLake)
        );
        assert!(!e.message.contains("millpond"), "{}", e.message);
        assert!(e.message.contains("recorded meanwhile"), "{}", e.message);
    }
}
