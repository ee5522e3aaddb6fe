//! What a tiered compaction would do, read from the catalog alone: per tier
//! and table, the live files in the tier's size band, grouped as
//! `ducklake_merge_adjacent_files` merges them (within one partition: files
//! of different partition values are never merged), and the files the
//! merges would leave. `compact --dry-run` prints the same plan;
//! `compact-probe` prints it for every tier and table.
use super::catalog::{as_i64, meta, Lake, TableRef};
use super::tiers::{Tier, TIERS};
use super::units::bytes;

/// One table's files in one tier's band.
#[derive(Debug, Clone)]
pub struct TablePlan {
    pub table: TableRef,
    /// Files in partitions holding two or more of them: merged.
    pub merged_files: i64,
    pub merged_bytes: i64,
    /// Partitions with files to merge.
    pub groups: i64,
    /// About how many files the merges make (at the tier's target size).
    pub made: i64,
    /// Files alone in their partition's band: left as they are.
    pub alone: i64,
}

/// The tier's plan for each table with anything in its band.
pub fn plan(lake: &Lake, tier: &Tier, tables: &[TableRef]) -> anyhow::Result<Vec<TablePlan>> {
    let values = format!(
        "(SELECT string_agg(coalesce(pv.partition_value, 'NULL'), '/' ORDER BY pv.partition_key_index) \
         FROM {} pv WHERE pv.data_file_id = f.data_file_id)",
        meta("ducklake_file_partition_value")
    );
    let rows = lake.rows(&format!(
        "SELECT table_id, count(*)::BIGINT, sum(size)::BIGINT FROM \
         (SELECT f.table_id::BIGINT AS table_id, f.partition_id, {values} AS part, f.file_size_bytes AS size \
          FROM {} f WHERE f.end_snapshot IS NULL AND f.file_size_bytes >= {} AND f.file_size_bytes < {}) \
         GROUP BY table_id, partition_id, part ORDER BY 1",
        meta("ducklake_data_file"),
        tier.min,
        tier.max
    ))?;
    let mut out = Vec::new();
    for t in tables {
        let groups: Vec<(i64, i64)> = rows
            .iter()
            .filter(|r| as_i64(&r[0]) == t.id)
            .map(|r| (as_i64(&r[1]), as_i64(&r[2])))
            .collect();
        if groups.is_empty() {
            continue;
        }
        let merging: Vec<&(i64, i64)> = groups.iter().filter(|g| g.0 > 1).collect();
        out.push(TablePlan {
            table: t.clone(),
            merged_files: merging.iter().map(|g| g.0).sum(),
            merged_bytes: merging.iter().map(|g| g.1).sum(),
            groups: merging.len() as i64,
            made: merging
                .iter()
                .map(|g| (g.1 as u64).div_ceil(tier.target).max(1) as i64)
                .sum(),
            alone: groups.iter().filter(|g| g.0 == 1).count() as i64,
        });
    }
    Ok(out)
}

pub fn describe(tier: &Tier, p: &TablePlan) -> String {
    format!(
        "tier {} ({} .. {} -> {}): {}: {} files, {} in {} partitions -> about {} files; {} files alone in their partition stay",
        tier.n,
        bytes(tier.min),
        bytes(tier.max),
        bytes(tier.target),
        p.table.qualified(),
        p.merged_files,
        bytes(p.merged_bytes as u64),
        p.groups,
        p.made,
        p.alone
    )
}

/// compact-probe: every tier's plan for `tables`; changes nothing.
pub fn compact_probe(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<()> {
    let (mut merged, mut made) = (0, 0);
    for tier in &TIERS {
        let plans = plan(lake, tier, tables)?;
        if plans.is_empty() {
            println!(
                "compact-probe: tier {} ({} .. {}): no live files in the band",
                tier.n,
                bytes(tier.min),
                bytes(tier.max)
            );
        }
        for p in &plans {
            println!("compact-probe: {}", describe(tier, p));
            merged += p.merged_files;
            made += p.made;
        }
    }
    let live: i64 = lake
        .live_files()?
        .iter()
        .filter(|f| tables.iter().any(|t| t.id == f.0))
        .map(|f| f.1)
        .sum();
    println!(
        "compact-probe: {live} live data files; each tier run alone would merge {merged} of them into about {made} (nothing changed)"
    );
    Ok(())
}
