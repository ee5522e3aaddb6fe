//! The catalog's own state: its format version, its settings, its tables by
//! state and its tables of inlined rows.
use duckdb::types::Value;
use millpond_shared::metrics::LakeMetrics;

use super::super::catalog::{as_f64, as_i64, as_string, meta, Lake};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogState {
    /// (major.minor, the rest, e.g. `-dev1`); None for a version without a
    /// leading number.
    pub format_version: Option<(f64, String)>,
    /// (key, scope, scope id, value) of each setting with a number, a
    /// boolean or an interval as value.
    pub config: Vec<(String, String, String, f64)>,
    pub live_tables: i64,
    pub dropped_tables: i64,
    pub inlined_data_tables: i64,
    pub unreachable_inlined_data_tables: i64,
}

/// `1.0` -> (1.0, ""), `1.1-dev1` -> (1.1, "-dev1"): the leading
/// `major[.minor]`, and the rest.
pub fn format_version(text: &str) -> Option<(f64, String)> {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut end = digits(text);
    if end == 0 {
        return None;
    }
    if let Some(rest) = text[end..].strip_prefix('.') {
        let minor = digits(rest);
        if minor > 0 {
            end += 1 + minor;
        }
    }
    Some((text[..end].parse().ok()?, text[end..].to_owned()))
}

/// A setting's value as a number: `true` 1, `false` 0, a number itself, or
/// an interval's seconds (`interval_s`, DuckDB's reading of the text).
pub fn config_number(value: &str, interval_s: Option<f64>) -> Option<f64> {
    match value.trim() {
        "true" => Some(1.0),
        "false" => Some(0.0),
        v => v
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .or(interval_s),
    }
}

fn settings(lake: &Lake) -> anyhow::Result<Vec<(String, String, String, f64)>> {
    let rows = lake.rows(&format!(
        "SELECT key, coalesce(scope, ''), coalesce(scope_id::VARCHAR, ''), value, \
         epoch(TRY_CAST(value AS INTERVAL)) FROM {} WHERE key <> 'version' ORDER BY ALL",
        meta("ducklake_metadata")
    ))?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let interval = (!matches!(r[4], Value::Null)).then(|| as_f64(&r[4]));
            let v = config_number(&as_string(&r[3]), interval)?;
            Some((as_string(&r[0]), as_string(&r[1]), as_string(&r[2]), v))
        })
        .collect())
}

pub fn collect(lake: &Lake) -> anyhow::Result<CatalogState> {
    let version = lake.rows(&format!(
        "SELECT value FROM {} WHERE key = 'version' AND scope IS NULL",
        meta("ducklake_metadata")
    ))?;
    let version = version.first().map(|r| as_string(&r[0]));
    let format_version = version.as_deref().and_then(format_version);
    if format_version.is_none() {
        tracing::warn!(version = ?version, "the catalog's format version has no leading number");
    }
    // A table keeps one row per version (a rename ends one): counted once.
    let tables = lake.rows(&format!(
        "SELECT count(*) FILTER (WHERE live)::BIGINT, count(*) FILTER (WHERE NOT live)::BIGINT \
         FROM (SELECT table_id, bool_or(end_snapshot IS NULL) AS live FROM {} GROUP BY table_id)",
        meta("ducklake_table")
    ))?;
    // Unreachable: no row of its table overlaps the snapshots kept.
    let inlined = lake.rows(&format!(
        "WITH kept AS (SELECT min(snapshot_id) AS lo, max(snapshot_id) AS hi FROM {}), \
         seen AS (SELECT DISTINCT t.table_id FROM {} t, kept \
           WHERE t.begin_snapshot <= kept.hi AND (t.end_snapshot IS NULL OR t.end_snapshot > kept.lo)) \
         SELECT count(*)::BIGINT, count(*) FILTER (WHERE seen.table_id IS NULL)::BIGINT \
         FROM {} i LEFT JOIN seen ON seen.table_id = i.table_id",
        meta("ducklake_snapshot"),
        meta("ducklake_table"),
        meta("ducklake_inlined_data_tables")
    ))?;
    Ok(CatalogState {
        format_version,
        config: settings(lake)?,
        live_tables: as_i64(&tables[0][0]),
        dropped_tables: as_i64(&tables[0][1]),
        inlined_data_tables: as_i64(&inlined[0][0]),
        unreachable_inlined_data_tables: as_i64(&inlined[0][1]),
    })
}

pub fn apply(state: &CatalogState, m: &LakeMetrics) {
    if let Some((version, suffix)) = &state.format_version {
        m.catalog_format_version
            .with_label_values(&[suffix])
            .set(*version);
    }
    for (key, scope, scope_id, value) in &state.config {
        m.config_value
            .with_label_values(&[key, scope, scope_id])
            .set(*value);
    }
    m.tables.with_label_values(&["live"]).set(state.live_tables);
    m.tables
        .with_label_values(&["dropped"])
        .set(state.dropped_tables);
    m.inlined_data_tables.set(state.inlined_data_tables);
    m.unreachable_inlined_data_tables
        .set(state.unreachable_inlined_data_tables);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_versions_split_into_number_and_tag() {
        for (text, want) in [
            ("1.0", Some((1.0, ""))),
            ("0.3", Some((0.3, ""))),
            ("1.1-dev1", Some((1.1, "-dev1"))),
            ("2.0-rc7", Some((2.0, "-rc7"))),
            ("12", Some((12.0, ""))),
            ("1.", Some((1.0, "."))),
            ("3.x", Some((3.0, ".x"))),
            ("junk", None),
            ("", None),
            ("-1.0", None),
        ] {
            let got = format_version(text);
            assert_eq!(
                got.as_ref().map(|(v, s)| (*v, s.as_str())),
                want,
                "{text:?}"
            );
        }
    }

    #[test]
    fn settings_become_numbers_or_are_left_out() {
        assert_eq!(config_number("true", None), Some(1.0));
        assert_eq!(config_number("false", None), Some(0.0));
        assert_eq!(config_number("16000000", Some(16e6)), Some(16e6));
        assert_eq!(config_number("0.5", None), Some(0.5));
        assert_eq!(config_number("7 days", Some(604800.0)), Some(604800.0));
        assert_eq!(config_number("s3://lake/data/", None), None);
        assert_eq!(config_number("zstd", None), None);
        assert_eq!(config_number("inf", None), None);
    }
}
