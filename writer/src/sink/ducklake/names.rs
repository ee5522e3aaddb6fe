//! Names Millpond keeps for itself in the lake: the columns the sink adds
//! to every row (and its partition folders), and its own tables beside the
//! target table.

/// Names the sink adds itself; payload columns with these names are refused.
pub const RESERVED_COLUMNS: [&str; 5] = ["_inserted_at", "year", "month", "day", "hour"];
/// The table holding recorded Kafka offsets, beside the target table.
pub const OFFSETS_TABLE: &str = "_millpond_offsets";
/// The record at each recorded range's last offset, beside the offsets.
pub const LAST_RECORDS_TABLE: &str = "_millpond_last_records";
/// The prefix of every table Millpond keeps for itself: the offsets, the
/// last records, each target's lease table (`_millpond_leases_<table>`)
/// and each writer start's fence (`_millpond_fence_<table>_<token>`).
pub const OWN_TABLE_PREFIX: &str = "_millpond_";

/// Whether `table` is one of Millpond's own tables (never a target: the
/// prefix is reserved).
pub fn is_own_table(table: &str) -> bool {
    table.starts_with(OWN_TABLE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_own_table_has_the_prefix() {
        use crate::sink::ducklake::leases::{fence_name, table_name};
        for t in [
            OFFSETS_TABLE.to_owned(),
            LAST_RECORDS_TABLE.to_owned(),
            table_name("events"),
            fence_name("events", "ab12"),
        ] {
            assert!(is_own_table(&t), "{t}");
        }
        assert!(!is_own_table("events") && !is_own_table("events_dead_letters"));
    }
}
