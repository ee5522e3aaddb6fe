//! What a written flush lost or changed, logged and counted once it is
//! committed: refused names, values that did not convert, columns added,
//! dead letters.
use millpond_shared::metrics::{error_type, skip_reason};

use super::lake::Lake;
use super::table::Evolution;
use crate::sink::letters::Letters;

/// After the commit: every dead letter counted by reason, records and
/// values apart; with the table off, also said in the log (they are
/// then discarded).
pub fn dead_letters(lake: &Lake, flush_id: &str, letters: &Letters) {
    letters.count(&lake.metrics);
    if lake.dead_letters.is_none() && !letters.is_empty() {
        tracing::warn!(flush_id = %flush_id, count = letters.len(),
            "dead letters discarded: DUCKLAKE_DEAD_LETTER_TABLE is off");
    }
}

/// Logs and counts the refused names of a flush: unsafe ones, the
/// records that lost a value to them, and reserved ones.
pub fn names<'a>(
    lake: &Lake,
    unsafe_names: impl IntoIterator<Item = &'a String>,
    rows_with_unsafe: u64,
    reserved_names: impl IntoIterator<Item = &'a String>,
) {
    for name in unsafe_names {
        tracing::warn!(column = %name, "payload key is not a safe identifier; its values go to the dead-letter table");
    }
    if rows_with_unsafe > 0 {
        // Records that lost at least one value, not names.
        lake.metrics
            .records_skipped
            .with_label_values(&[skip_reason::UNSAFE_FIELD_NAME])
            .inc_by(rows_with_unsafe);
    }
    for name in reserved_names {
        tracing::error!(column = %name, "payload key is reserved (_inserted_at, year, month, day, hour, _millpond_*); its values go to the dead-letter table; rename it upstream");
        lake.metrics
            .errors
            .with_label_values(&[error_type::SCHEMA])
            .inc();
    }
}

/// New keys the table had no room for (MILLPOND_MAX_COLUMNS).
pub fn over_limit(lake: &Lake, over_limit: &[String]) {
    if let Some(first) = over_limit.first() {
        tracing::warn!(columns = over_limit.len(), first = %first,
            max_columns = lake.cfg.max_columns,
            "table is at MILLPOND_MAX_COLUMNS; values of new keys go to the dead-letter table");
        lake.metrics
            .errors
            .with_label_values(&[error_type::SCHEMA])
            .inc();
    }
}

/// Columns whose values did not all convert to the column's type.
pub fn unconverted(lake: &Lake, failed: &[(String, String, usize)]) {
    for (col, live, lost) in failed {
        tracing::warn!(column = %col, live_type = %live, values = lost,
            "values that do not convert exactly to the column's type are NULL; they are in the dead-letter table");
        lake.metrics
            .errors
            .with_label_values(&[error_type::SCHEMA])
            .inc();
    }
}

/// Columns the flush added to the table.
pub fn columns_added(lake: &Lake, evo: &Evolution) {
    for c in &evo.added {
        tracing::info!(column = %c, "column added");
    }
    lake.metrics
        .schema_columns_added
        .inc_by(evo.added.len() as u64);
}
