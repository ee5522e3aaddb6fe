//! expire-snapshots: snapshot expiry done in the catalog's own database, in
//! batches, for catalogs too large for `ducklake_expire_snapshots` (which
//! reads the catalog's file tables into DuckDB and expires everything in
//! one transaction). On Postgres each batch is one statement string that
//! Postgres runs as one transaction; on an embedded catalog DuckDB runs it.
//!
//! Each batch does what DuckLake 1.5.5's expiry does (its
//! `DeleteSnapshots`): data and delete files no remaining snapshot reads
//! are scheduled for deletion with their statistics and partition values
//! removed; tables, schemas, views, tags and macros no remaining snapshot
//! sees lose their catalog rows (a dropped table's inlined-data tables are
//! dropped); the snapshots and their change records go. Batches run oldest
//! first, so a run stopped half-way leaves a smaller, consistent catalog.
use super::catalog::{as_i64, as_string, Lake};
use super::confirm::Ask;
use super::expire::{choose, Expire};
use super::native::CatalogSql;
use millpond_writer::lake_api::ident;

/// A dropped table's catalog rows, keyed by `table_id`.
const TABLE_ROWS: [&str; 12] = [
    "ducklake_table",
    "ducklake_table_stats",
    "ducklake_table_column_stats",
    "ducklake_partition_info",
    "ducklake_partition_column",
    "ducklake_column",
    "ducklake_column_tag",
    "ducklake_sort_info",
    "ducklake_sort_expression",
    "ducklake_schema_versions",
    "ducklake_inlined_data_tables",
    "ducklake_column_mapping",
];

/// A data file's rows besides its own, keyed by `data_file_id`.
const FILE_ROWS: [&str; 3] = [
    "ducklake_file_column_stats",
    "ducklake_file_variant_stats",
    "ducklake_file_partition_value",
];

/// Catalog entries that go once no remaining snapshot sees them.
const VERSIONED: [&str; 4] = [
    "ducklake_schema",
    "ducklake_view",
    "ducklake_tag",
    "ducklake_macro",
];

/// One batch: the oldest snapshots up to `max` (those before it went with
/// earlier batches), and the SQL that expires them.
struct Batch<'a> {
    sql: &'a CatalogSql<'a>,
    max: i64,
    data_path: &'a str,
}

impl Batch<'_> {
    /// No snapshot that stays (newer than the batch) lies in the row's
    /// range. Rows are written as `<table>.<column>`, so the SQL needs no
    /// DELETE alias.
    fn gone(&self, row: &str) -> String {
        format!(
            "({row}.end_snapshot IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {m}ducklake_snapshot sn \
             WHERE sn.snapshot_id >= {row}.begin_snapshot AND sn.snapshot_id < {row}.end_snapshot \
             AND sn.snapshot_id > {max}))",
            m = self.sql.m(),
            max = self.max
        )
    }

    /// Tables none of whose versions a remaining snapshot sees.
    fn dropped_tables(&self) -> anyhow::Result<Vec<i64>> {
        let m = self.sql.m();
        let visible = format!(
            "(t2.end_snapshot IS NULL OR EXISTS (SELECT 1 FROM {m}ducklake_snapshot sn \
             WHERE sn.snapshot_id >= t2.begin_snapshot AND sn.snapshot_id < t2.end_snapshot \
             AND sn.snapshot_id > {}))",
            self.max
        );
        let rows = self.sql.rows(&format!(
            "SELECT DISTINCT ducklake_table.table_id FROM {m}ducklake_table WHERE {} AND NOT EXISTS \
             (SELECT 1 FROM {m}ducklake_table t2 WHERE t2.table_id = ducklake_table.table_id AND {visible}) \
             ORDER BY 1",
            self.gone("ducklake_table")
        ))?;
        Ok(rows.iter().map(|r| as_i64(&r[0])).collect())
    }

    fn in_list(ids: &[i64]) -> String {
        if ids.is_empty() {
            return "NULL".into();
        }
        ids.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Data files no remaining snapshot reads. A file a snapshot of this
    /// batch read begins at or before the batch's newest id; every older
    /// file was settled by an earlier expiry.
    fn data_files(&self, dropped: &[i64]) -> String {
        let f = "ducklake_data_file";
        format!(
            "SELECT {f}.data_file_id FROM {m}{f} WHERE {f}.table_id IN ({d}) OR ({f}.begin_snapshot <= {max} AND {gone})",
            m = self.sql.m(),
            d = Self::in_list(dropped),
            max = self.max,
            gone = self.gone(f)
        )
    }

    fn delete_files(&self, dropped: &[i64]) -> String {
        let x = "ducklake_delete_file";
        format!(
            "SELECT {x}.delete_file_id FROM {m}{x} WHERE {x}.table_id IN ({d}) OR {x}.data_file_id IN ({files}) \
             OR ({x}.begin_snapshot <= {max} AND {gone})",
            m = self.sql.m(),
            d = Self::in_list(dropped),
            files = self.data_files(dropped),
            max = self.max,
            gone = self.gone(x)
        )
    }

    /// Files scheduled and their rows removed; delete files first, since
    /// which of them go depends on the data files' rows.
    fn file_statements(&self, dropped: &[i64]) -> Vec<String> {
        let m = self.sql.m();
        let schedule = |table: &str, id: &str, ids: &str| {
            let (path, rel) = self.sql.scheduled_path(table, self.data_path);
            format!(
                "INSERT INTO {m}ducklake_files_scheduled_for_deletion (data_file_id, path, path_is_relative, schedule_start) \
                 SELECT {table}.{id}, {path}, {rel}, NOW() FROM {m}{table} WHERE {table}.{id} IN ({ids})"
            )
        };
        let (deletes, data) = (self.delete_files(dropped), self.data_files(dropped));
        let mut out = vec![
            schedule("ducklake_delete_file", "delete_file_id", &deletes),
            format!("DELETE FROM {m}ducklake_delete_file WHERE delete_file_id IN ({deletes})"),
            schedule("ducklake_data_file", "data_file_id", &data),
        ];
        for t in FILE_ROWS {
            out.push(format!("DELETE FROM {m}{t} WHERE data_file_id IN ({data})"));
        }
        out.push(format!(
            "DELETE FROM {m}ducklake_data_file WHERE data_file_id IN ({data})"
        ));
        out
    }

    fn statements(&self, dropped: &[i64]) -> anyhow::Result<Vec<String>> {
        let m = self.sql.m();
        let mut out = self.file_statements(dropped);
        if !dropped.is_empty() {
            let d = Self::in_list(dropped);
            let mut inlined: Vec<String> = self
                .sql
                .rows(&format!(
                    "SELECT table_name FROM {m}ducklake_inlined_data_tables WHERE table_id IN ({d})"
                ))?
                .iter()
                .map(|r| as_string(&r[0]))
                .collect();
            inlined.extend(
                dropped
                    .iter()
                    .map(|id| format!("ducklake_inlined_delete_{id}")),
            );
            for t in TABLE_ROWS {
                out.push(format!("DELETE FROM {m}{t} WHERE table_id IN ({d})"));
            }
            for t in inlined {
                out.push(format!("DROP TABLE IF EXISTS {m}{}", ident(&t)));
            }
        }
        for t in VERSIONED {
            out.push(format!("DELETE FROM {m}{t} WHERE {}", self.gone(t)));
        }
        for (t, parent, key) in [
            ("ducklake_macro_impl", "ducklake_macro", "macro_id"),
            ("ducklake_macro_parameters", "ducklake_macro", "macro_id"),
            (
                "ducklake_name_mapping",
                "ducklake_column_mapping",
                "mapping_id",
            ),
        ] {
            out.push(format!(
                "DELETE FROM {m}{t} WHERE NOT EXISTS (SELECT 1 FROM {m}{parent} p WHERE p.{key} = {t}.{key})"
            ));
        }
        for t in ["ducklake_snapshot", "ducklake_snapshot_changes"] {
            out.push(format!(
                "DELETE FROM {m}{t} WHERE snapshot_id <= {}",
                self.max
            ));
        }
        Ok(out)
    }

    /// (data files, delete files) this batch schedules for deletion.
    fn counts(&self, dropped: &[i64]) -> anyhow::Result<(i64, i64)> {
        let data = self.sql.int(&format!(
            "SELECT count(*) FROM ({}) x",
            self.data_files(dropped)
        ))?;
        let deletes = self.sql.int(&format!(
            "SELECT count(*) FROM ({}) x",
            self.delete_files(dropped)
        ))?;
        Ok((data, deletes))
    }
}

/// Returns how many snapshots were (or would be) expired.
pub fn expire_snapshots(
    lake: &Lake,
    which: Expire,
    batch_size: usize,
    dry_run: bool,
    ask: &Ask,
) -> anyhow::Result<usize> {
    let ids = choose(lake, which)?;
    let Some((first, last)) = ids.first().zip(ids.last()) else {
        println!("expire-snapshots: nothing to expire");
        return Ok(0);
    };
    let sql = CatalogSql::new(lake);
    let data_path = lake.data_path()?;
    let batches: Vec<&[i64]> = ids.chunks(batch_size.max(1)).collect();
    let batch = |chunk: &[i64]| Batch {
        sql: &sql,
        max: *chunk.last().unwrap_or(&0),
        data_path: &data_path,
    };
    let whole = batch(&ids);
    let dropped = whole.dropped_tables()?;
    let (data, deletes) = whole.counts(&dropped)?;
    let plan = format!(
        "{} snapshots (ids {first}..{last}) in {} batches of up to {batch_size}, where the catalog lives{}: \
         {data} data files and {deletes} delete files to schedule for deletion, {} dropped tables' rows to remove",
        ids.len(),
        batches.len(),
        if sql.is_postgres() { " (Postgres)" } else { "" },
        dropped.len()
    );
    if dry_run {
        println!("expire-snapshots: would expire {plan}");
        return Ok(ids.len());
    }
    ask.confirm(&lake.cfg, &format!("expire {plan}"))?;
    let (mut data, mut deletes) = (0, 0);
    for (i, chunk) in batches.iter().enumerate() {
        let b = batch(chunk);
        let dropped = b.dropped_tables()?;
        let (d, x) = b.counts(&dropped)?;
        sql.atomic(&b.statements(&dropped)?)?;
        (data, deletes) = (data + d, deletes + x);
        println!(
            "expire-snapshots: batch {}/{}: {} snapshots (ids {}..{}), {d} data and {x} delete files scheduled for deletion",
            i + 1,
            batches.len(),
            chunk.len(),
            chunk[0],
            b.max
        );
    }
    crate::report::add(crate::report::what::SNAPSHOTS_EXPIRED, ids.len() as u64);
    crate::report::add(
        crate::report::what::FILES_SCHEDULED_FOR_DELETION,
        (data + deletes) as u64,
    );
    println!(
        "expire-snapshots: expired {} snapshots; {data} data files and {deletes} delete files scheduled for deletion (run cleanup to delete them)",
        ids.len()
    );
    Ok(ids.len())
}
