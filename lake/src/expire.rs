//! expire: DuckLake's own snapshot expiry, with the snapshots chosen here.
use std::time::Duration;

use super::catalog::{as_i64, as_string, meta, Lake};
use super::confirm::Ask;

/// Which snapshots `expire` removes.
#[derive(Debug, Clone, Copy)]
pub enum Expire {
    OlderThan(Duration),
    /// Everything but the newest N.
    KeepLast(u64),
}

/// The snapshots `which` names, oldest first: always the oldest ones, up
/// to the first that must stay (a snapshot with a skewed clock stops the run
/// there rather than leave a gap), never the newest, which is the lake's
/// current state.
pub fn choose(lake: &Lake, which: Expire) -> anyhow::Result<Vec<i64>> {
    let snapshots = meta("ducklake_snapshot");
    let old = match which {
        Expire::OlderThan(age) => format!("snapshot_time::TIMESTAMPTZ < {}", lake.cutoff(age)?),
        // The newest is left out below, so N - 1 more are kept here.
        Expire::KeepLast(n) => format!(
            "row_number() OVER (ORDER BY snapshot_id DESC) > {}",
            n.max(1) - 1
        ),
    };
    let rows = lake.rows(&format!(
        "SELECT snapshot_id::BIGINT, {old} FROM {snapshots} \
         WHERE snapshot_id < (SELECT max(snapshot_id) FROM {snapshots}) ORDER BY 1"
    ))?;
    Ok(rows
        .iter()
        .take_while(|r| as_i64(&r[1]) == 1)
        .map(|r| as_i64(&r[0]))
        .collect())
}

/// Returns how many snapshots were (or would be) expired. The snapshots are
/// chosen here (their times compared by DuckDB) and handed to DuckLake by
/// id: DuckLake 1.5.5 compares `older_than` inside the catalog, and on a
/// SQLite catalog that comparison takes every snapshot of the cutoff's day
/// as older, so `--older-than 1h` would expire today's snapshots too.
pub fn expire(lake: &Lake, which: Expire, dry_run: bool, ask: &Ask) -> anyhow::Result<usize> {
    let ids: Vec<String> = choose(lake, which)?.iter().map(i64::to_string).collect();
    if ids.is_empty() {
        println!("expire: nothing to expire");
        if !dry_run {
            advise(lake);
        }
        return Ok(0);
    }
    let sql = |dry: bool| {
        format!(
            "SELECT snapshot_id::BIGINT, snapshot_time::VARCHAR FROM \
             ducklake_expire_snapshots('lake', dry_run => {dry}, versions => [{}]::UBIGINT[]) ORDER BY 1",
            ids.join(", ")
        )
    };
    let plan = lake.rows(&sql(true))?;
    let describe = |rows: &[Vec<duckdb::types::Value>]| match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => format!(
            " (ids {}..{}, {} .. {})",
            as_i64(&a[0]),
            as_i64(&b[0]),
            as_string(&a[1]),
            as_string(&b[1])
        ),
        _ => String::new(),
    };
    if dry_run || plan.is_empty() {
        println!(
            "expire: would expire {} snapshots{}",
            plan.len(),
            describe(&plan)
        );
        return Ok(plan.len());
    }
    ask.confirm(
        &lake.cfg,
        &format!("expire {} snapshots{}", plan.len(), describe(&plan)),
    )?;
    let done = lake.rows(&sql(false))?;
    crate::report::add(crate::report::what::SNAPSHOTS_EXPIRED, done.len() as u64);
    println!(
        "expire: expired {} snapshots{}",
        done.len(),
        describe(&done)
    );
    advise(lake);
    Ok(done.len())
}

/// Most snapshots a SQLite catalog keeps for a flush to cost within about a
/// fifth of a new lake's (with compaction every ~1,000 flushes). DuckLake
/// begins each catalog transaction with a lookup of the newest snapshot,
/// and DuckDB's SQLite reader passes SQLite no filter, so every flush reads
/// every kept snapshot (measured: ~0.5 us each, against ~24 ms for a flush;
/// docs/operating/maintenance.md).
const SQLITE_SNAPSHOTS: i64 = 5_000;

/// After a real expiry (`expire`, `maintain`, a recipe): a SQLite catalog
/// that still keeps more than SQLITE_SNAPSHOTS is told what that costs.
/// Advice only: a count that fails leaves the expiry's outcome as it was,
/// so a chain goes on to its next step.
fn advise(lake: &Lake) {
    if !lake.is_sqlite() {
        return;
    }
    match lake.snapshots() {
        Ok(n) => {
            if let Some(advice) = sqlite_advice(n) {
                println!("{advice}");
            }
        }
        Err(e) => eprintln!("expire: could not count the snapshots kept: {e:#}"),
    }
}

fn sqlite_advice(snapshots: i64) -> Option<String> {
    (snapshots > SQLITE_SNAPSHOTS).then(|| {
        format!(
            "expire: {snapshots} snapshots kept on a SQLite catalog, and every flush reads each of them; \
             to hold a flush within about a fifth of a new lake's cost, keep at most {SQLITE_SNAPSHOTS} \
             (a shorter expiry age) and compact every ~1,000 flushes, or move the catalog to \
             Postgres (docs/operating/maintenance.md)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sqlite_catalog_past_five_thousand_snapshots_is_told_to_keep_fewer() {
        assert_eq!(sqlite_advice(0), None);
        assert_eq!(sqlite_advice(5_000), None);
        let advice = sqlite_advice(5_001).expect("advice past the limit");
        assert!(advice.contains("5001 snapshots kept"), "{advice}");
        assert!(advice.contains("keep at most 5000"), "{advice}");
    }
}
