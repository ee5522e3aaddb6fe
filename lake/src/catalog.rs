//! A DuckDB session attached to the lake with the writer's own setup, and
//! the catalog's metadata tables, which DuckLake attaches beside the lake as
//! `__ducklake_metadata_lake` for every catalog backend.
use std::time::Duration;

use anyhow::{bail, Context};
use duckdb::types::Value;
use duckdb::Connection;

use millpond_shared::retry::Ladder;
use millpond_writer::lake_api::{
    self, ident, literal, Catalog, EmbeddedFormat, LakeConfig, Session,
};

/// A statement a writer's commit got in the way of (on a SQLite catalog,
/// any writer commit during a maintenance transaction): 10 attempts, 0.2 s
/// doubling (at most 30 s), one to two minutes in all.
/// DuckDB's word for a transaction that failed part-way (see `retrying`).
const ABORTED: &str = "Current transaction is aborted";

/// DuckLake's own commit retries in a maintenance session, at most.
const COMMIT_RETRIES: u64 = 10;

const CONTENDED: Ladder = Ladder {
    attempts: 10,
    base: Duration::from_millis(200),
    jitter: 0.5,
};

/// The metadata catalog of the lake attached as `lake`.
pub const META: &str = "__ducklake_metadata_lake";

/// `META.<table>`, for SQL.
pub fn meta(table: &str) -> String {
    format!("{META}.{}", ident(table))
}

pub struct Lake {
    session: Session,
    pub cfg: LakeConfig,
}

/// A live table of the lake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub id: i64,
    pub schema: String,
    pub name: String,
}

impl TableRef {
    /// `schema.table`, as labels and output show it.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The table, quoted for SQL.
    pub fn sql(&self) -> String {
        format!("lake.{}.{}", ident(&self.schema), ident(&self.name))
    }
}

impl Lake {
    /// Opens a session on an existing lake. An embedded catalog that does
    /// not exist is refused rather than created: a maintenance command
    /// pointed at the wrong folder must not start an empty lake.
    pub fn open(cfg: &LakeConfig) -> anyhow::Result<Lake> {
        if let Catalog::Embedded { path, .. } = &cfg.catalog {
            if !path.exists() {
                bail!(
                    "no DuckLake catalog at {} (set MILLPOND_LAKE_DIR or DUCKLAKE_CATALOG_PATH, or DUCKLAKE_RDS_HOST for Postgres)",
                    path.display()
                );
            }
        }
        let session = lake_api::open(cfg).map_err(|e| anyhow::anyhow!("{}", e.message))?;
        let lake = Lake {
            session,
            cfg: cfg.clone(),
        };
        // Times print and compare in UTC whatever the machine's zone.
        lake.exec("SET TimeZone = 'UTC'")?;
        // DuckLake sleeps wait * 1.5^i before its i-th commit retry, with no
        // cap: at the writer's 100 retries a compaction that keeps losing
        // to writers' commits sleeps for hours (seen: a maintain run asleep
        // for 15 minutes beside a writer committing 14 times a second). At
        // most 10 (9-11 s of sleeps at DuckLake's 100 ms), then
        // [`CONTENDED`] runs the statement again and in the end says why it
        // gave up.
        lake.exec(&format!(
            "SET GLOBAL ducklake_max_retry_count = {}",
            cfg.max_retry_count.min(COMMIT_RETRIES)
        ))?;
        Ok(lake)
    }

    pub fn conn(&self) -> &Connection {
        &self.session.conn
    }

    /// Runs SQL; errors are scrubbed of the catalog password and S3 keys.
    pub fn exec(&self, sql: &str) -> anyhow::Result<()> {
        self.retrying(sql, || self.conn().execute_batch(sql))
    }

    /// Every row of a query, each column as a DuckDB value.
    pub fn rows(&self, sql: &str) -> anyhow::Result<Vec<Vec<Value>>> {
        self.retrying(sql, || {
            let mut stmt = self.conn().prepare(sql)?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let n = row.as_ref().column_count();
                out.push((0..n).map(|i| row.get(i)).collect::<Result<_, _>>()?);
            }
            Ok(out)
        })
    }

    /// Runs `run`, and again while a writer's commit gets in its way
    /// ([`CONTENDED`]): a statement in its own transaction is rolled back
    /// whole, so running it again is safe. The lake is attached again
    /// before each new attempt ([`lake_api::reattach`]: a SQLite catalog
    /// that said "database is locked" leaves the attachment stuck). Inside
    /// a transaction the caller opened, the first error is the answer.
    /// Besides the catalog's conflicts, a SQLite catalog can refuse a
    /// statement in the middle of one of DuckLake's own operations, which
    /// then reports only [`ABORTED`] (seen in `ducklake_flush_inlined_data`
    /// while a writer committed); nothing of it was committed.
    fn retrying<T>(&self, sql: &str, run: impl Fn() -> duckdb::Result<T>) -> anyhow::Result<T> {
        let alone = self.conn().is_autocommit();
        let tries = std::cell::Cell::new(0u32);
        let again = |e: &duckdb::Error| {
            let message = e.to_string();
            if !alone || !(lake_api::contended(&message) || message.contains(ABORTED)) {
                return false;
            }
            eprintln!(
                "millpond-lake: a writer's commit got in the way (attempt {}): {}; running the statement again",
                tries.get(),
                lake_api::scrub(&self.cfg, &message)
            );
            match lake_api::reattach(&self.cfg, self.conn()) {
                Ok(()) => true,
                Err(e) => {
                    eprintln!(
                        "millpond-lake: could not attach the lake again, not retrying: {}",
                        e.message
                    );
                    false
                }
            }
        };
        CONTENDED
            .retry_blocking(
                || {
                    tries.set(tries.get() + 1);
                    run()
                },
                again,
            )
            .map_err(|e| {
                let message = e.to_string();
                let starved = tries.get() >= CONTENDED.attempts
                    && (lake_api::contended(&message) || message.contains(ABORTED));
                let e = self.error(e, sql);
                match starved {
                    true => e.context(format!(
                        "a writer's commit got in the way of each of {} tries: run this when the \
                         writers commit less often (a longer FLUSH_INTERVAL_MS), or stop them meanwhile",
                        CONTENDED.attempts
                    )),
                    false => e,
                }
            })
    }

    /// The single integer a query returns (0 for NULL).
    pub fn int(&self, sql: &str) -> anyhow::Result<i64> {
        let rows = self.rows(sql)?;
        Ok(rows
            .first()
            .and_then(|r| r.first())
            .map(as_i64)
            .unwrap_or(0))
    }

    fn error(&self, e: duckdb::Error, sql: &str) -> anyhow::Error {
        let first = sql.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        anyhow::anyhow!(
            "{} (running: {first} ...)",
            lake_api::scrub(&self.cfg, &e.to_string())
        )
    }

    /// Live tables, in schema and name order.
    pub fn tables(&self) -> anyhow::Result<Vec<TableRef>> {
        let rows = self.rows(&format!(
            "SELECT t.table_id::BIGINT, s.schema_name, t.table_name \
             FROM {} t JOIN {} s ON s.schema_id = t.schema_id \
             WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL ORDER BY 2, 3",
            meta("ducklake_table"),
            meta("ducklake_schema")
        ))?;
        Ok(rows
            .iter()
            .map(|r| TableRef {
                id: as_i64(&r[0]),
                schema: as_string(&r[1]),
                name: as_string(&r[2]),
            })
            .collect())
    }

    /// The live tables a `--table` argument names (`name` in the default
    /// schema, or `schema.name`), or all of them.
    pub fn select_tables(
        &self,
        wanted: Option<&str>,
        default_schema: &str,
    ) -> anyhow::Result<Vec<TableRef>> {
        let all = self.tables()?;
        let Some(w) = wanted else { return Ok(all) };
        let (schema, name) = w.split_once('.').unwrap_or((default_schema, w));
        let picked: Vec<TableRef> = all
            .into_iter()
            .filter(|t| t.schema == schema && t.name == name)
            .collect();
        if picked.is_empty() {
            bail!("no live table {schema}.{name} in the lake");
        }
        Ok(picked)
    }

    /// Live data files and their bytes, per table id.
    pub fn live_files(&self) -> anyhow::Result<Vec<(i64, i64, i64)>> {
        let rows = self.rows(&format!(
            "SELECT table_id::BIGINT, count(*)::BIGINT, coalesce(sum(file_size_bytes), 0)::BIGINT \
             FROM {} WHERE end_snapshot IS NULL GROUP BY 1 ORDER BY 1",
            meta("ducklake_data_file")
        ))?;
        Ok(rows
            .iter()
            .map(|r| (as_i64(&r[0]), as_i64(&r[1]), as_i64(&r[2])))
            .collect())
    }

    /// Snapshots and files scheduled for deletion, for before/after lines.
    pub fn summary(&self) -> anyhow::Result<String> {
        let files: i64 = self.live_files()?.iter().map(|f| f.1).sum();
        let snapshots = self.snapshots()?;
        let scheduled = self.int(&format!(
            "SELECT count(*) FROM {}",
            meta("ducklake_files_scheduled_for_deletion")
        ))?;
        Ok(format!(
            "{snapshots} snapshots, {files} live data files, {scheduled} files scheduled for deletion"
        ))
    }

    /// Snapshots the catalog keeps.
    pub fn snapshots(&self) -> anyhow::Result<i64> {
        self.int(&format!(
            "SELECT count(*) FROM {}",
            meta("ducklake_snapshot")
        ))
    }

    /// The catalog is an embedded SQLite file.
    pub fn is_sqlite(&self) -> bool {
        matches!(
            self.cfg.catalog,
            Catalog::Embedded {
                format: EmbeddedFormat::Sqlite,
                ..
            }
        )
    }

    /// The data path DuckLake itself uses (as stored in the catalog),
    /// ending in `/`.
    pub fn data_path(&self) -> anyhow::Result<String> {
        let rows = self.rows("SELECT data_path FROM ducklake_settings('lake')")?;
        let mut path = rows
            .first()
            .and_then(|r| r.first())
            .map(as_string)
            .filter(|p| !p.is_empty())
            .context("the catalog names no data path")?;
        if !path.ends_with('/') {
            path.push('/');
        }
        Ok(path)
    }

    /// `now - age` as a TIMESTAMPTZ literal. DuckLake's functions get a
    /// constant: they compare it inside the catalog, and an expression
    /// there is not worth trusting (see `lifecycle`).
    pub fn cutoff(&self, age: Duration) -> anyhow::Result<String> {
        let rows = self.rows(&format!(
            "SELECT (now() - to_microseconds({}::BIGINT))::VARCHAR",
            age.as_micros()
        ))?;
        let text = rows.first().map(|r| as_string(&r[0])).unwrap_or_default();
        Ok(format!("TIMESTAMPTZ {}", literal(&text)))
    }
}

pub fn as_i64(v: &Value) -> i64 {
    match v {
        Value::BigInt(n) => *n,
        Value::Int(n) => *n as i64,
        Value::SmallInt(n) => *n as i64,
        Value::TinyInt(n) => *n as i64,
        Value::UBigInt(n) => *n as i64,
        Value::UInt(n) => *n as i64,
        Value::HugeInt(n) => *n as i64,
        Value::Double(f) => *f as i64,
        Value::Boolean(b) => *b as i64,
        Value::Text(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

pub fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Double(f) => *f,
        Value::Float(f) => *f as f64,
        other => as_i64(other) as f64,
    }
}

pub fn as_string(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        Value::Null => String::new(),
        other => format!("{other:?}"),
    }
}
