//! Tiered compaction over `ducklake_merge_adjacent_files`: small files are
//! merged often into medium ones, medium ones less often into large ones.
//! Each tier picks the live files in its size band and merges them towards
//! its target size. Merging keeps every snapshot readable (DuckLake lets a
//! snapshot read part of a merged file); the replaced files are scheduled
//! for deletion, which `cleanup` then frees.
//!
//! The target size is DuckLake's `target_file_size`. A session setting
//! carries it for this run only, but a table- or schema-scoped catalog
//! option outranks the session: for such a table the option is set to the
//! tier's target around its merge and then restored to the saved value.
use anyhow::Context;

use super::catalog::{as_i64, as_string, meta, Lake, TableRef};
use super::confirm::Ask;
use super::units::bytes;
use crate::sink::ducklake::sql::literal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub n: u8,
    /// Files of at least `min` and under `max` bytes are merged ...
    pub min: u64,
    pub max: u64,
    /// ... towards files of this size.
    pub target: u64,
}

const MIB: u64 = 1 << 20;

pub const TIERS: [Tier; 3] = [
    Tier {
        n: 1,
        min: 0,
        max: MIB,
        target: 5 * MIB,
    },
    Tier {
        n: 2,
        min: MIB,
        max: 10 * MIB,
        target: 32 * MIB,
    },
    Tier {
        n: 3,
        min: 10 * MIB,
        max: 64 * MIB,
        target: 128 * MIB,
    },
];

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

/// A scoped `target_file_size` option that outranks the session setting.
#[derive(Debug, Clone)]
struct ScopedTarget {
    scope: String,
    entry: String,
    bytes: String,
}

impl ScopedTarget {
    fn set_sql(&self, value: &str) -> String {
        let (schema, table) = match self.entry.split_once('.') {
            Some((s, t)) if self.scope == "TABLE" => (s, Some(t)),
            _ => (self.entry.as_str(), None),
        };
        let table = table
            .map(|t| format!(", table_name => {}", literal(t)))
            .unwrap_or_default();
        format!(
            "CALL ducklake_set_option('lake', 'target_file_size', {}, schema => {}{table})",
            literal(&format!("{value}B")),
            literal(schema)
        )
    }
}

fn scoped_targets(lake: &Lake) -> anyhow::Result<Vec<ScopedTarget>> {
    Ok(lake
        .rows(
            "SELECT upper(scope), scope_entry, value FROM ducklake_options('lake') \
             WHERE option_name = 'target_file_size' AND upper(scope) IN ('TABLE', 'SCHEMA')",
        )?
        .iter()
        .map(|r| ScopedTarget {
            scope: as_string(&r[0]),
            entry: as_string(&r[1]),
            bytes: as_string(&r[2]),
        })
        .collect())
}

/// The option that decides `t`'s target, if a scoped one does.
fn governing<'a>(targets: &'a [ScopedTarget], t: &TableRef) -> Option<&'a ScopedTarget> {
    targets
        .iter()
        .find(|o| o.scope == "TABLE" && o.entry == t.qualified())
        .or_else(|| {
            targets
                .iter()
                .find(|o| o.scope == "SCHEMA" && o.entry == t.schema)
        })
}

/// Files of each table in the tier's band: (table, files, bytes).
fn candidates(
    lake: &Lake,
    tier: &Tier,
    tables: &[TableRef],
) -> anyhow::Result<Vec<(TableRef, i64, i64)>> {
    let rows = lake.rows(&format!(
        "SELECT table_id::BIGINT, count(*)::BIGINT, sum(file_size_bytes)::BIGINT FROM {} \
         WHERE end_snapshot IS NULL AND file_size_bytes >= {} AND file_size_bytes < {} \
         GROUP BY 1 HAVING count(*) > 1",
        meta("ducklake_data_file"),
        tier.min,
        tier.max
    ))?;
    Ok(tables
        .iter()
        .filter_map(|t| {
            rows.iter()
                .find(|r| as_i64(&r[0]) == t.id)
                .map(|r| (t.clone(), as_i64(&r[1]), as_i64(&r[2])))
        })
        .collect())
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
        for (t, files, size) in candidates(lake, tier, tables)? {
            planned += files;
            println!(
                "compact: tier {} ({} .. {} -> {}): {}: {files} files, {} -> about {} files",
                tier.n,
                bytes(tier.min),
                bytes(tier.max),
                bytes(tier.target),
                t.qualified(),
                bytes(size as u64),
                (size as u64).div_ceil(tier.target).max(1)
            );
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
    let scoped = scoped_targets(lake)?;
    for o in &scoped {
        println!(
            "compact: saved target_file_size {} B ({} scope, {}); it is restored after each merge",
            o.bytes,
            o.scope.to_lowercase(),
            o.entry
        );
    }
    let run = (|| {
        for tier in &tiers {
            lake.exec(&format!(
                "SET ducklake_target_file_size = '{}B'",
                tier.target
            ))?;
            for (t, _, _) in candidates(lake, tier, tables)? {
                merge(lake, tier, &t, governing(&scoped, &t), opts.max_files)?;
            }
        }
        Ok::<_, anyhow::Error>(())
    })();
    let reset = lake.exec("RESET ducklake_target_file_size");
    run?;
    reset?;
    let files_after = live_count(lake, tables)?;
    println!("compact: {files_before} -> {files_after} live data files");
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

/// One merge call for one table, with its scoped target (if any) set to the
/// tier's and put back afterwards, whether or not the merge succeeded.
fn merge(
    lake: &Lake,
    tier: &Tier,
    t: &TableRef,
    scoped: Option<&ScopedTarget>,
    max_files: Option<u64>,
) -> anyhow::Result<()> {
    if let Some(o) = scoped {
        lake.exec(&o.set_sql(&tier.target.to_string()))?;
    }
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
    ));
    let restored = match scoped {
        Some(o) => lake.exec(&o.set_sql(&o.bytes)),
        None => Ok(()),
    };
    let merged = merged?;
    restored.with_context(|| {
        format!(
            "restoring target_file_size of {} to {} B failed; set it back by hand",
            t.qualified(),
            scoped.map(|o| o.bytes.as_str()).unwrap_or("?")
        )
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_hand_their_output_to_the_next_band() {
        for pair in TIERS.windows(2) {
            assert_eq!(pair[0].max, pair[1].min);
            assert!(pair[0].target >= pair[1].min && pair[0].target < pair[1].max);
        }
    }

    #[test]
    fn scoped_targets_are_set_at_their_own_scope() {
        let table = ScopedTarget {
            scope: "TABLE".into(),
            entry: "main.events".into(),
            bytes: "1000".into(),
        };
        assert_eq!(
            table.set_sql("5242880"),
            "CALL ducklake_set_option('lake', 'target_file_size', '5242880B', schema => 'main', table_name => 'events')"
        );
        let schema = ScopedTarget {
            scope: "SCHEMA".into(),
            entry: "main".into(),
            bytes: "7000".into(),
        };
        assert_eq!(
            schema.set_sql(&schema.bytes),
            "CALL ducklake_set_option('lake', 'target_file_size', '7000B', schema => 'main')"
        );
        let t = TableRef {
            id: 1,
            schema: "main".into(),
            name: "events".into(),
        };
        let both = [schema.clone(), table.clone()];
        assert_eq!(governing(&both, &t).unwrap().scope, "TABLE");
        assert_eq!(governing(&[schema], &t).unwrap().scope, "SCHEMA");
        assert!(governing(&[], &t).is_none());
    }
}
