//! Names Millpond keeps for itself in the lake: the columns the sink adds
//! to every row (and its partition folders), and its own tables beside the
//! target table.

/// Names the sink adds itself; payload columns with these names are refused.
pub const RESERVED_COLUMNS: [&str; 5] = ["_inserted_at", "year", "month", "day", "hour"];
/// The table holding recorded Kafka offsets, beside the target table.
pub const OFFSETS_TABLE: &str = "_millpond_offsets";
/// The record at each recorded range's last offset, beside the offsets.
pub const LAST_RECORDS_TABLE: &str = "_millpond_last_records";
