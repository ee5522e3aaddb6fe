//! A flush's dead letters as rows, for every sink: records (or values) that
//! could not be written as sent, with their Kafka coordinates, the reason
//! and the original bytes. Each sink commits them beside its table in the
//! same transaction (DuckLake) or commit (hoglake) as the flush's rows;
//! [`super::letters::Letters`] holds them.
use millpond_shared::config::EnvReader;

/// `<VAR>` (default `<table>_dead_letters`; `off` turns the table off, and
/// dead letters are then counted and discarded): `Some(None)` when off,
/// `None` after a config error. `taken` are names the sink already uses.
pub fn table_setting(
    r: &mut EnvReader<'_>,
    var: &str,
    table: Option<&str>,
    taken: &[&str],
) -> Option<Option<String>> {
    let name = match r.optional(var) {
        Some(v) if v.eq_ignore_ascii_case("off") => return Some(None),
        Some(v) => v,
        None => format!("{}_dead_letters", table?),
    };
    let name = r.safe_identifier(var, Some(name))?;
    if Some(name.as_str()) == table || taken.contains(&name.as_str()) {
        r.errors.push(
            var,
            format!("{name} is already used (the target table or the offsets table)"),
        );
        return None;
    }
    Some(Some(name))
}

/// The columns that say which Kafka record a dead letter is: one record's
/// letters (one per bad value, or one for the record) share them, and a
/// flush written again under a new flush id repeats them.
pub const COORDINATES: [&str; 3] = ["topic", "kafka_partition", "kafka_offset"];
/// The column naming the flush that wrote a dead letter.
pub const FLUSH_ID: &str = "flush_id";
