//! Tiered compaction over `ducklake_merge_adjacent_files`: small files are
//! merged often into medium ones, medium ones less often into large ones.
//! Each tier picks the live files in its size band and merges them towards
//! its target size. Merging keeps every snapshot readable (DuckLake lets a
//! snapshot read part of a merged file); the replaced files are scheduled
//! for deletion, which `cleanup` then frees.
//!
//! The target size is set as this session's `ducklake_target_file_size`,
//! which in DuckLake 1.5.5 outranks the catalog's `target_file_size`
//! options (global, schema and table scope; checked by the compaction
//! test). The session's own value is saved before and restored after the
//! run; the catalog's options, which the writers' inserts follow, are never
//! touched, so a run killed half-way leaves nothing to put back.
use anyhow::Context;

use super::catalog::{as_i64, as_string, Lake, TableRef};
use super::confirm::Ask;
use super::probe;
use super::tiers::{Tier, TIERS};
use millpond_writer::lake_api::literal;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Tier numbers to run, in order (empty: all).
    pub tiers: Vec<u8>,
    pub dry_run: bool,
    pub threads: Option<u32>,
    pub memory_limit: Option<String>,
    /// `max_compacted_files`: bounds one merge call's work per table.
    pub max_files: Option<u64>,
}

/// Live data files of the chosen tables before and after the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub files_before: i64,
    pub files_after: i64,
}

fn live_count(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<i64> {
    let files = lake.live_files()?;
    Ok(files
        .iter()
        .filter(|f| tables.iter().any(|t| t.id == f.0))
        .map(|f| f.1)
        .sum())
}

pub fn compact(
    lake: &Lake,
    tables: &[TableRef],
    opts: &Options,
    ask: &Ask,
) -> anyhow::Result<Outcome> {
    let tiers: Vec<Tier> = if opts.tiers.is_empty() {
        TIERS.to_vec()
    } else {
        opts.tiers
            .iter()
            .map(|n| {
                TIERS
                    .iter()
                    .find(|t| t.n == *n)
                    .copied()
                    .context("tiers are 1, 2 and 3")
            })
            .collect::<anyhow::Result<_>>()?
    };
    let files_before = live_count(lake, tables)?;
    let mut planned = 0;
    for tier in &tiers {
        for p in probe::plan(lake, tier, tables)? {
            planned += p.merged_files;
            println!("compact: {}", probe::describe(tier, &p));
        }
    }
    if opts.dry_run || planned == 0 {
        let what = if opts.dry_run {
            "dry run"
        } else {
            "nothing to merge"
        };
        println!("compact: {what}; {files_before} live data files");
        return Ok(Outcome {
            files_before,
            files_after: files_before,
        });
    }
    ask.confirm(
        &lake.cfg,
        &format!("compact {planned} data files (tiers {})", tier_list(&tiers)),
    )?;
    if let Some(n) = opts.threads {
        lake.exec(&format!("SET threads = {n}"))?;
    }
    if let Some(m) = &opts.memory_limit {
        lake.exec(&format!("SET memory_limit = {}", literal(m)))?;
    }
    let saved = lake
        .rows("SELECT value FROM duckdb_settings() WHERE name = 'ducklake_target_file_size'")?
        .first()
        .map(|r| as_string(&r[0]))
        .filter(|v| !v.is_empty());
    let run = (|| {
        for tier in &tiers {
            lake.exec(&format!(
                "SET ducklake_target_file_size = '{}B'",
                tier.target
            ))?;
            for p in probe::plan(lake, tier, tables)? {
                if p.merged_files > 0 {
                    merge(lake, tier, &p.table, opts.max_files)?;
                }
            }
        }
        Ok::<_, anyhow::Error>(())
    })();
    let restored = match &saved {
        Some(v) => lake.exec(&format!("SET ducklake_target_file_size = {}", literal(v))),
        None => lake.exec("RESET ducklake_target_file_size"),
    };
    run?;
    restored?;
    let files_after = live_count(lake, tables)?;
    println!("compact: {files_before} -> {files_after} live data files");
    crate::report::add(
        crate::report::what::FILES_COMPACTED_AWAY,
        (files_before - files_after).max(0) as u64,
    );
    Ok(Outcome {
        files_before,
        files_after,
    })
}

fn tier_list(tiers: &[Tier]) -> String {
    tiers
        .iter()
        .map(|t| t.n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One merge call for one table and tier.
fn merge(lake: &Lake, tier: &Tier, t: &TableRef, max_files: Option<u64>) -> anyhow::Result<()> {
    let limit = max_files
        .map(|n| format!(", max_compacted_files => {n}"))
        .unwrap_or_default();
    let merged = lake.rows(&format!(
        "SELECT coalesce(sum(files_processed), 0)::BIGINT, coalesce(sum(files_created), 0)::BIGINT \
         FROM ducklake_merge_adjacent_files('lake', {}, schema => {}, min_file_size => {}, max_file_size => {}{limit})",
        literal(&t.name),
        literal(&t.schema),
        tier.min,
        tier.max
    ))?;
    let (processed, created) = merged
        .first()
        .map(|r| (as_i64(&r[0]), as_i64(&r[1])))
        .unwrap_or((0, 0));
    println!(
        "compact: tier {}: {}: merged {processed} files into {created}",
        tier.n,
        t.qualified()
    );
    Ok(())
}
