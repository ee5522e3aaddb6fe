//! heal-orphans: files in a table's folder that no catalog row references
//! (a commit lost after the upload, a catalog edit that dropped a file's
//! rows). A Parquet file whose columns fit the table and none of whose rows
//! the table already holds is registered again with
//! `ducklake_add_data_files`; any other is moved aside to the quarantine
//! folder, outside the data path, under the same relative path. Nothing is
//! deleted. Files outside every table's folder are only counted.
//!
//! Millpond's own tables are never healed: a writer killed mid-commit
//! leaves the files of its transaction (rows, dead letters, offsets, last
//! records) unregistered and writes them again, under a new flush id, when
//! the flush is sent again. A file in a `_millpond_*` table's folder is
//! left where it is and reported. A dead-letter file is registered only
//! when none of its records (topic, partition, offset) is in the table
//! under any flush id and the lake recorded every one of their offsets (a
//! record past the recorded offsets is read again and its letter written
//! by the pipeline); any other is left and reported, to delete or keep.
use std::time::Duration;

use anyhow::bail;

use super::catalog::{as_i64, as_string, Lake, TableRef};
use super::confirm::Ask;
use super::native::CatalogSql;
use super::orphans::find_orphans;
use super::storage::Storage;
use millpond_writer::lake_api::{
    ident, is_own_table, literal, COORDINATES, FLUSH_ID, OFFSETS_TABLE,
};

/// The column every Millpond row gets when written: a rewrite of the same
/// records differs there, so it is left out when looking for them.
const WRITE_TIME: &str = "_inserted_at";

enum Verdict {
    Register {
        rows: i64,
    },
    Quarantine {
        why: String,
    },
    /// Never registered, never moved: reported. `problem`: one the run
    /// could not settle (exit 1).
    Leave {
        why: String,
        problem: bool,
    },
}

/// What a table is to heal-orphans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A target table (or any other): its rows compared on every column.
    Rows,
    /// A dead-letter table: its letters compared on their Kafka record.
    DeadLetters,
    /// `_millpond_offsets`, `_millpond_last_records`, a lease or fence
    /// table: never registered into.
    Own,
}

/// A dead-letter table: the pipeline's (DUCKLAKE_DEAD_LETTER_TABLE), any
/// `<table>_dead_letters`, or any table with the dead letters' record
/// coordinates and flush id.
fn kind(table: &TableRef, columns: &[(String, String)], dead_letter_table: Option<&str>) -> Kind {
    let has = |c: &str| columns.iter().any(|(n, _)| n == c);
    if is_own_table(&table.name) {
        Kind::Own
    } else if Some(table.name.as_str()) == dead_letter_table
        || table.name.ends_with("_dead_letters")
        || (COORDINATES.iter().all(|c| has(c)) && has(FLUSH_ID))
    {
        Kind::DeadLetters
    } else {
        Kind::Rows
    }
}

/// Where a table's files live: its folder, ending in `/`.
fn folders(
    lake: &Lake,
    tables: &[TableRef],
    data_path: &str,
) -> anyhow::Result<Vec<(TableRef, String)>> {
    let sql = CatalogSql::new(lake);
    let m = sql.m();
    let rows = sql.rows(&format!(
        "SELECT f.table_id, {} FROM (SELECT DISTINCT table_id, '' AS path, true AS path_is_relative \
         FROM {m}ducklake_table WHERE end_snapshot IS NULL) f",
        sql.full_path("f", data_path)
    ))?;
    Ok(tables
        .iter()
        .filter_map(|t| {
            let r = rows.iter().find(|r| as_i64(&r[0]) == t.id)?;
            let mut folder = as_string(&r[1]);
            if !folder.ends_with('/') {
                folder.push('/');
            }
            Some((t.clone(), folder))
        })
        .collect())
}

/// (name, type) of each column of a query's result.
fn columns(lake: &Lake, from: &str) -> anyhow::Result<Vec<(String, String)>> {
    Ok(lake
        .rows(&format!("DESCRIBE SELECT * FROM {from}"))?
        .iter()
        .map(|r| (as_string(&r[0]), as_string(&r[1])))
        .collect())
}

fn judge(lake: &Lake, table: &TableRef, path: &str, dead_letter_table: Option<&str>) -> Verdict {
    let quarantine = |why: String| Verdict::Quarantine { why };
    let want = match columns(lake, &table.sql()) {
        Ok(w) => w,
        Err(_) if is_own_table(&table.name) => Vec::new(),
        Err(e) => return quarantine(format!("reading the table's columns: {e:#}")),
    };
    let kind = kind(table, &want, dead_letter_table);
    if kind == Kind::Own {
        return Verdict::Leave {
            why: format!(
                "a file of Millpond's own table {} (offsets, last records, leases or a fence): \
                 never registered (a writer killed mid-commit leaves these and wrote its rows again); \
                 delete it or keep it",
                table.qualified()
            ),
            problem: false,
        };
    }
    let file = format!("read_parquet({})", literal(path));
    let Ok(have) = columns(lake, &file) else {
        return quarantine("not a Parquet file DuckDB can read".into());
    };
    let misfits: Vec<String> = have
        .iter()
        .filter(|c| !want.contains(c))
        .map(|(n, t)| format!("{n} {t}"))
        .collect();
    if !misfits.is_empty() {
        return quarantine(format!(
            "columns the table does not have (or with another type): {}",
            misfits.join(", ")
        ));
    }
    if kind == Kind::DeadLetters {
        return judge_dead_letters(lake, table, &file, &have);
    }
    let compared: Vec<String> = have
        .iter()
        .filter(|(n, _)| n != WRITE_TIME)
        .map(|(n, _)| ident(n))
        .collect();
    let cols = compared.join(", ");
    let counts = lake.rows(&format!(
        "SELECT (SELECT count(*) FROM {file}), \
         (SELECT count(*) FROM (SELECT {cols} FROM {file} INTERSECT SELECT {cols} FROM {}))",
        table.sql()
    ));
    match counts.as_deref() {
        Ok([r, ..]) => match (as_i64(&r[0]), as_i64(&r[1])) {
            (0, _) => quarantine("it holds no rows".into()),
            (rows, 0) => Verdict::Register { rows },
            (rows, dup) => quarantine(format!("{dup} of its {rows} rows are already in the table")),
        },
        Ok([]) => quarantine("no answer comparing its rows".into()),
        Err(e) => quarantine(format!("comparing its rows with the table's: {e:#}")),
    }
}

/// A dead-letter file: registered only when none of its records (topic,
/// partition, offset) has a letter in the table already, under any flush
/// id (its letters differ from those only in `flush_id` and the write
/// time), and the lake recorded the offsets of all of them: a record past
/// the recorded offsets will be read again, and its letter written, by the
/// pipeline.
fn judge_dead_letters(
    lake: &Lake,
    table: &TableRef,
    file: &str,
    have: &[(String, String)],
) -> Verdict {
    let name = table.qualified();
    if !COORDINATES.iter().all(|c| have.iter().any(|(n, _)| n == c)) {
        return Verdict::Leave {
            why: format!(
                "a file in the dead-letter table {name} without the records' {}: \
                 it cannot be told apart from letters already there; not registered",
                COORDINATES.join(", ")
            ),
            problem: true,
        };
    }
    let same = COORDINATES
        .iter()
        .map(|c| format!("t.{0} = f.{0}", ident(c)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let flush_ids = |from: &str| {
        if have.iter().any(|(n, _)| n == FLUSH_ID) {
            format!(
                "(SELECT string_agg(DISTINCT {}, ', ') FROM {from})",
                ident(FLUSH_ID)
            )
        } else {
            "NULL".to_owned()
        }
    };
    let table_sql = table.sql();
    let offsets = format!("lake.{}.{}", ident(&table.schema), ident(OFFSETS_TABLE));
    let sql = format!(
        "SELECT (SELECT count(*) FROM {file}), \
         (SELECT count(*) FROM {file} f WHERE EXISTS (SELECT 1 FROM {table_sql} t WHERE {same})), \
         {}, {}, \
         (SELECT count(*) FROM {file} f WHERE f.kafka_offset > coalesce((SELECT max(o.last_offset) \
          FROM {offsets} o WHERE o.topic = f.topic AND o.kafka_partition = f.kafka_partition), -1))",
        flush_ids(&format!(
            "(SELECT t.* FROM {table_sql} t WHERE EXISTS (SELECT 1 FROM {file} f WHERE {same}))"
        )),
        flush_ids(file)
    );
    let counts = match lake.rows(&sql) {
        Ok(rows) => rows,
        Err(e) => {
            return Verdict::Leave {
                why: format!("comparing its dead letters with {name}'s: {e:#}; not registered"),
                problem: true,
            }
        }
    };
    let Some(r) = counts.first() else {
        return Verdict::Leave {
            why: "no answer comparing its dead letters; not registered".into(),
            problem: true,
        };
    };
    let (rows, dup, unrecorded) = (as_i64(&r[0]), as_i64(&r[1]), as_i64(&r[4]));
    let (theirs, mine) = (as_string(&r[2]), as_string(&r[3]));
    match (rows, dup) {
        (0, _) => Verdict::Quarantine {
            why: "it holds no rows".into(),
        },
        (rows, 0) if unrecorded > 0 => Verdict::Leave {
            why: format!(
                "{unrecorded} of its {rows} dead letters (flush {mine}) are at offsets the lake has not \
                 recorded: the pipeline reads those records again and writes their letters itself; \
                 not registered: delete it or keep it"
            ),
            problem: false,
        },
        (rows, 0) => Verdict::Register { rows },
        (rows, dup) if dup == rows => Verdict::Leave {
            why: format!(
                "a duplicate: all {rows} of its dead letters (flush {mine}) are already in {name} \
                 under flush {theirs}; not registered: delete it or keep it"
            ),
            problem: false,
        },
        (rows, dup) => Verdict::Leave {
            why: format!(
                "{dup} of its {rows} dead letters (flush {mine}) are already in {name} under flush \
                 {theirs}: registering it would write them twice; not registered"
            ),
            problem: true,
        },
    }
}

/// Where quarantined files go: `--quarantine`, or beside the data path
/// (`<data path>-quarantine/`), never under it (orphan deletion would
/// take them).
fn quarantine_root(data_path: &str, chosen: Option<&str>) -> anyhow::Result<String> {
    let trimmed = data_path.trim_end_matches('/');
    let mut root = match chosen {
        Some(q) => q.to_owned(),
        None if trimmed.matches('/').count() <= 2 && trimmed.starts_with("s3://") => {
            bail!("the data path {data_path} is a bucket's root: name a folder outside it with --quarantine")
        }
        None => format!("{trimmed}-quarantine"),
    };
    if !root.ends_with('/') {
        root.push('/');
    }
    if root.starts_with(data_path) {
        bail!("--quarantine {root} lies inside the data path {data_path}: orphan deletion would delete it");
    }
    let bucket = |p: &str| {
        p.strip_prefix("s3://")
            .map(|r| r.split('/').next().unwrap_or("").to_owned())
    };
    if bucket(&root) != bucket(data_path) {
        bail!("--quarantine {root} must be in the same storage (and bucket) as the data path {data_path}");
    }
    Ok(root)
}

/// Ok(false): a file could be neither registered nor moved.
pub fn heal_orphans(
    lake: &Lake,
    tables: &[TableRef],
    dead_letter_table: Option<&str>,
    older_than: Duration,
    quarantine: Option<&str>,
    dry_run: bool,
    ask: &Ask,
) -> anyhow::Result<bool> {
    let data_path = lake.data_path()?;
    let root = quarantine_root(&data_path, quarantine)?;
    let folders = folders(lake, tables, &data_path)?;
    let mut plan = Vec::new();
    let mut outside = 0;
    for path in find_orphans(lake, older_than)? {
        let owner = folders
            .iter()
            .filter(|(_, f)| path.starts_with(f.as_str()))
            .max_by_key(|(_, f)| f.len());
        let Some((table, _)) = owner else {
            outside += 1;
            continue;
        };
        let verdict = judge(lake, table, &path, dead_letter_table);
        match &verdict {
            Verdict::Register { rows } => {
                println!(
                    "heal-orphans: {path}: register in {} ({rows} rows)",
                    table.qualified()
                )
            }
            Verdict::Quarantine { why } => println!("heal-orphans: {path}: move aside: {why}"),
            Verdict::Leave { why, .. } => println!("heal-orphans: {path}: left in place: {why}"),
        }
        plan.push((table.clone(), path, verdict));
    }
    let count = |f: fn(&Verdict) -> bool| plan.iter().filter(|p| f(&p.2)).count();
    let registering = count(|v| matches!(v, Verdict::Register { .. }));
    let moving = count(|v| matches!(v, Verdict::Quarantine { .. }));
    let left = count(|v| matches!(v, Verdict::Leave { .. }));
    let unsettled = count(|v| matches!(v, Verdict::Leave { problem: true, .. }));
    let summary = format!(
        "{} orphaned files in the tables' folders: {registering} to register, {moving} to move to {root}, \
         {left} left in place (never registered: duplicates of rows already written, dead letters the pipeline will write again, files of Millpond's own tables; \
         {unsettled} that need a person); {outside} elsewhere (outside the tables' folders) left alone",
        plan.len(),
    );
    if dry_run || registering + moving == 0 {
        println!(
            "heal-orphans: {summary}{}",
            if dry_run { " (dry run)" } else { "" }
        );
        return Ok(unsettled == 0);
    }
    ask.confirm(&lake.cfg, &format!("heal orphans: {summary}"))?;
    let storage = Storage::for_lake(&lake.cfg)?;
    let (mut registered, mut moved, mut failed) = (0, 0, 0);
    for (table, path, verdict) in &plan {
        let done = match verdict {
            Verdict::Register { .. } => lake
                .exec(&format!(
                    "CALL ducklake_add_data_files('lake', {}, {}, schema => {}, allow_missing => true)",
                    literal(&table.name),
                    literal(path),
                    literal(&table.schema)
                ))
                .map(|_| registered += 1),
            Verdict::Quarantine { .. } => {
                let to = format!("{root}{}", path.strip_prefix(data_path.as_str()).unwrap_or(path));
                storage.move_file(path, &to).map(|_| moved += 1)
            }
            Verdict::Leave { .. } => Ok(()),
        };
        if let Err(e) = done {
            println!("heal-orphans: {path}: failed: {e:#}");
            failed += 1;
        }
    }
    crate::report::add(crate::report::what::ORPHANS_REGISTERED, registered);
    crate::report::add(crate::report::what::ORPHANS_MOVED_ASIDE, moved);
    println!(
        "heal-orphans: {registered} registered, {moved} moved to {root}, {left} left in place, {failed} failed"
    );
    Ok(failed == 0 && unsettled == 0)
}
