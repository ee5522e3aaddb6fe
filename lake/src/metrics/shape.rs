//! How the live data files are spread: over size bands (the compaction
//! tiers' bands, so each tier's backlog shows) and over the partitions with
//! the most files. Both are counted in the catalog, grouped there.
use std::collections::HashMap;

use millpond_shared::metrics::LakeMetrics;

use super::super::catalog::{as_i64, as_string, meta, Lake, TableRef};
use super::super::tiers::TIERS;

/// The size bands, smallest first: one per compaction tier, then `large`.
pub const BANDS: [&str; 4] = ["tier1", "tier2", "tier3", "large"];
/// How many partitions `lake_partition_files` reports (the original's 20).
pub const TOP_PARTITIONS: usize = 20;
/// The `partition` of files without partition values.
pub const UNPARTITIONED: &str = "<none>";
/// A NULL partition value, as DuckLake names its folder.
pub const NULL_VALUE: &str = "__HIVE_DEFAULT_PARTITION__";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shape {
    /// (table, band, files, bytes): every band of every live table.
    pub bands: Vec<(String, &'static str, i64, i64)>,
    /// (table, partition, files): at most TOP_PARTITIONS, most files first.
    pub partitions: Vec<(String, String, i64)>,
}

/// SQL: the band of the file size `size`.
fn band_case(size: &str) -> String {
    let mut sql = String::from("CASE");
    for (tier, band) in TIERS.iter().zip(BANDS) {
        sql.push_str(&format!(" WHEN {size} < {} THEN '{band}'", tier.max));
    }
    sql.push_str(&format!(" ELSE '{}' END", BANDS[TIERS.len()]));
    sql
}

/// (files, bytes) per (table id, band) of the files in `source`.
fn band_counts(lake: &Lake, source: &str) -> anyhow::Result<HashMap<(i64, String), [i64; 2]>> {
    Ok(lake
        .rows(&format!(
            "SELECT table_id::BIGINT, {} AS band, count(*)::BIGINT, \
             coalesce(sum(file_size_bytes), 0)::BIGINT \
             FROM {source} WHERE end_snapshot IS NULL GROUP BY 1, 2",
            band_case("file_size_bytes")
        ))?
        .iter()
        .map(|r| {
            (
                (as_i64(&r[0]), as_string(&r[1])),
                [as_i64(&r[2]), as_i64(&r[3])],
            )
        })
        .collect())
}

/// The partitions with the most live files, over every live table. A
/// partition is its values in key order joined by `/`, as the original
/// showed it; ties go to the older table, then the lower values.
fn top_partitions(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<Vec<(String, String, i64)>> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = tables.iter().map(|t| t.id.to_string()).collect();
    let rows = lake.rows(&format!(
        "SELECT table_id, part, count(*)::BIGINT AS files FROM ( \
           SELECT df.table_id::BIGINT AS table_id, coalesce( \
             string_agg(coalesce(pv.partition_value, '{NULL_VALUE}'), '/' ORDER BY pv.partition_key_index) \
               FILTER (WHERE pv.partition_key_index IS NOT NULL), \
             '{UNPARTITIONED}') AS part \
           FROM {} df LEFT JOIN {} pv ON pv.data_file_id = df.data_file_id \
           WHERE df.end_snapshot IS NULL AND df.table_id IN ({}) \
           GROUP BY df.data_file_id, df.table_id) \
         GROUP BY ALL ORDER BY files DESC, table_id, part LIMIT {TOP_PARTITIONS}",
        meta("ducklake_data_file"),
        meta("ducklake_file_partition_value"),
        ids.join(", ")
    ))?;
    let name: HashMap<i64, String> = tables.iter().map(|t| (t.id, t.qualified())).collect();
    Ok(rows
        .iter()
        .filter_map(|r| {
            let table = name.get(&as_i64(&r[0]))?.clone();
            Some((table, as_string(&r[1]), as_i64(&r[2])))
        })
        .collect())
}

pub fn collect(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<Shape> {
    let counts = band_counts(lake, &meta("ducklake_data_file"))?;
    let mut bands = Vec::new();
    for t in tables {
        for band in BANDS {
            let [files, bytes] = counts
                .get(&(t.id, band.to_owned()))
                .copied()
                .unwrap_or_default();
            bands.push((t.qualified(), band, files, bytes));
        }
    }
    Ok(Shape {
        bands,
        partitions: top_partitions(lake, tables)?,
    })
}

pub fn apply(shape: &Shape, m: &LakeMetrics) {
    for (table, band, files, bytes) in &shape.bands {
        let l = [table.as_str(), *band];
        m.files_per_band.with_label_values(&l).set(*files);
        m.bytes_per_band.with_label_values(&l).set(*bytes);
    }
    for (table, partition, files) in &shape.partitions {
        m.partition_files
            .with_label_values(&[table, partition])
            .set(*files);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: i64 = 1 << 20;

    /// The bands are the compaction tiers' bands, end to end from 0.
    #[test]
    fn bands_follow_the_compaction_tiers() {
        assert_eq!(TIERS.len() + 1, BANDS.len());
        assert_eq!(TIERS[0].min, 0);
        for pair in TIERS.windows(2) {
            assert_eq!(pair[0].max, pair[1].min);
        }
        assert_eq!(
            (TIERS[0].max, TIERS[1].max, TIERS[2].max),
            (1 << 20, 10 << 20, 64 << 20)
        );
    }

    /// The band SQL at each edge, run by DuckDB on sizes of our choosing.
    #[test]
    fn files_fall_in_their_band_at_each_edge() {
        let conn = duckdb::Connection::open_in_memory().unwrap();
        let sizes = [
            0,
            MIB - 1,
            MIB,
            10 * MIB - 1,
            10 * MIB,
            64 * MIB - 1,
            64 * MIB,
            5 << 30,
        ];
        let values: Vec<String> = sizes.iter().map(|s| format!("({s})")).collect();
        let sql = format!(
            "SELECT s, {} FROM (VALUES {}) v(s) ORDER BY s",
            band_case("s"),
            values.join(", ")
        );
        let mut stmt = conn.prepare(&sql).unwrap();
        let got: Vec<(i64, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let bands: Vec<&str> = got.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(
            bands,
            ["tier1", "tier1", "tier2", "tier2", "tier3", "tier3", "large", "large"]
        );
    }
}
