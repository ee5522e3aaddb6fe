//! Turning DuckDB errors into retry decisions.
use crate::sink::{SinkError, SinkErrorKind};

/// Catalog commit contention: snapshot id races, conflicting DDL, and a
/// partition claimed by another writer (fence conflict or re-check).
const CONTENTION: [&str; 7] = [
    super::offsets::RECORDED_MEANWHILE,
    "maximum retry count",
    "duplicate key value",
    "could not serialize access",
    "Transaction conflict",
    "another transaction has altered",
    "Conflict",
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

pub fn classify(message: String) -> SinkError {
    let kind = if CONTENTION.iter().any(|p| message.contains(p)) {
        SinkErrorKind::Contention(crate::sink::SinkId::DuckLake)
    } else if connection_lost(&message) {
        SinkErrorKind::Transient
    } else if PERMANENT.iter().any(|p| message.contains(p)) {
        SinkErrorKind::Permanent
    } else {
        SinkErrorKind::Transient
    };
    SinkError::new(kind, message)
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
        ] {
            assert_eq!(classify(m.into()).kind, SinkErrorKind::Contention(crate::sink::SinkId::DuckLake), "{m}");
        }
        assert_eq!(
            classify("Conversion Error: Could not convert string 'x' to INT64".into()).kind,
            SinkErrorKind::Permanent
        );
        assert_eq!(
            classify("IO Error: Connection refused".into()).kind,
            SinkErrorKind::Transient
        );
        assert_eq!(
            classify(
                "Binder Error: Failed to get data file list from DuckLake: Failed to prepare query (no result returned): no connection to the server".into()
            )
            .kind,
            SinkErrorKind::Transient,
            "a dropped catalog connection is retried whatever class wraps it"
        );
    }
}
