//! SQL on the catalog's own tables, run where the catalog lives. On a
//! Postgres catalog it runs in Postgres (`postgres_query`,
//! `postgres_execute` on the metadata connection), so a repair over
//! millions of catalog rows never pulls them into DuckDB and its statements
//! commit together in one Postgres transaction. On an embedded catalog
//! DuckDB runs the same SQL on the attached metadata database, in one
//! DuckDB transaction. The SQL is written once, each catalog table named
//! behind [`CatalogSql::m`].
use duckdb::types::Value;

use super::catalog::{Lake, META};
use millpond_writer::lake_api::literal;
use millpond_writer::lake_api::Catalog;

pub struct CatalogSql<'a> {
    lake: &'a Lake,
    postgres: bool,
}

impl<'a> CatalogSql<'a> {
    pub fn new(lake: &'a Lake) -> Self {
        CatalogSql {
            lake,
            postgres: matches!(lake.cfg.catalog, Catalog::Postgres { .. }),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.postgres
    }

    /// What goes before a catalog table's name: nothing in Postgres (the
    /// catalog's schema is the connection's), the metadata database in
    /// DuckDB.
    pub fn m(&self) -> String {
        if self.postgres {
            String::new()
        } else {
            format!("{META}.")
        }
    }

    /// Every row of a query over the catalog's tables.
    pub fn rows(&self, sql: &str) -> anyhow::Result<Vec<Vec<Value>>> {
        if self.postgres {
            self.lake.rows(&format!(
                "SELECT * FROM postgres_query({}, {})",
                literal(META),
                literal(sql)
            ))
        } else {
            self.lake.rows(sql)
        }
    }

    /// The single integer a query returns (0 for NULL or no row).
    pub fn int(&self, sql: &str) -> anyhow::Result<i64> {
        Ok(self
            .rows(sql)?
            .first()
            .and_then(|r| r.first())
            .map(super::catalog::as_i64)
            .unwrap_or(0))
    }

    /// Runs the statements as one transaction: all of them or none.
    pub fn atomic(&self, statements: &[String]) -> anyhow::Result<()> {
        if statements.is_empty() {
            return Ok(());
        }
        if self.postgres {
            // One simple-query string without BEGIN/COMMIT: Postgres runs
            // it as one implicit transaction, rolled back whole on an error.
            return self.lake.exec(&format!(
                "CALL postgres_execute({}, {}, use_transaction => false)",
                literal(META),
                literal(&statements.join(";\n"))
            ));
        }
        self.lake.exec("BEGIN TRANSACTION")?;
        for s in statements {
            if let Err(e) = self.lake.exec(s) {
                let _ = self.lake.exec("ROLLBACK");
                return Err(e);
            }
        }
        self.lake.exec("COMMIT")
    }

    /// A file row's path in SQL, as DuckLake resolves it: relative to its
    /// table's folder, which is relative to its schema's, which is relative
    /// to the data path (`data_path`, ending in `/`). `f` is the file row's
    /// alias (columns `table_id`, `path`, `path_is_relative`).
    pub fn full_path(&self, f: &str, data_path: &str) -> String {
        let m = self.m();
        let rel = |col: &str| format!("coalesce(CAST({col} AS BOOLEAN), true)");
        // The table's and its schema's newest rows.
        let table = |col: &str| {
            format!(
                "(SELECT {col} FROM {m}ducklake_table t WHERE t.table_id = {f}.table_id \
                 ORDER BY t.begin_snapshot DESC LIMIT 1)"
            )
        };
        let schema = |col: &str| {
            format!(
                "(SELECT {col} FROM {m}ducklake_schema s WHERE s.schema_id = {} \
                 ORDER BY s.begin_snapshot DESC LIMIT 1)",
                table("t.schema_id")
            )
        };
        let schema_path = format!(
            "(CASE WHEN {} THEN {} || coalesce({}, '') ELSE {} END)",
            schema(&rel("s.path_is_relative")),
            literal(data_path),
            schema("s.path"),
            schema("s.path")
        );
        let table_path = format!(
            "(CASE WHEN {} THEN {schema_path} || coalesce({}, '') ELSE {} END)",
            table(&rel("t.path_is_relative")),
            table("t.path"),
            table("t.path")
        );
        format!(
            "(CASE WHEN {} THEN {table_path} || {f}.path ELSE {f}.path END)",
            rel(&format!("{f}.path_is_relative"))
        )
    }

    /// `(path, path_is_relative)` of a file row as DuckLake records it in
    /// `ducklake_files_scheduled_for_deletion`: relative to the data path
    /// when under it, else absolute.
    pub fn scheduled_path(&self, f: &str, data_path: &str) -> (String, String) {
        let full = self.full_path(f, data_path);
        let dp = literal(data_path);
        let under = format!("left({full}, length({dp})) = {dp}");
        (
            format!("(CASE WHEN {under} THEN substr({full}, length({dp}) + 1) ELSE {full} END)"),
            format!("(CASE WHEN {under} THEN true ELSE false END)"),
        )
    }
}
