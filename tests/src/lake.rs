//! Lakes for tests: an embedded DuckLake in a temp dir (SQLite catalog, the
//! default, or a DuckDB-file catalog), or a fresh Postgres database as
//! catalog with data in a fresh moto S3 prefix.
use std::path::PathBuf;
use std::process::Command;

use duckdb::{Config, Connection};
use millpond_writer::sink::ducklake::config::EmbeddedFormat;

use crate::{required_env, unique};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default: SQLite catalog file and a data folder.
    Embedded,
    /// The embedded lake with a DuckDB-file catalog (DUCKLAKE_CATALOG_TYPE=duckdb).
    EmbeddedDuckDb,
    PostgresS3,
}

pub struct Lake {
    pub backend: Backend,
    pub table: String,
    /// Env vars for a writer pointed at this lake.
    pub env: Vec<(String, String)>,
    pub dir: tempfile::TempDir,
    pg_database: Option<String>,
}

pub fn extension_dir() -> String {
    std::env::var("DUCKDB_EXTENSION_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/millpond/duckdb-extensions",
            std::env::var("HOME").unwrap()
        )
    })
}

fn psql(sql: &str) {
    psql_in(&required_env("MILLPOND_TEST_PG_DB"), sql);
}

/// Runs `sql` in database `db`; its rows, one per line, columns joined by `|`.
fn psql_in(db: &str, sql: &str) -> String {
    try_psql_in(db, sql).unwrap_or_else(|err| panic!("psql {sql}: {err}"))
}

fn dsn(db: &str) -> String {
    format!(
        "host={} port={} dbname={db} user={} password={} sslmode=disable",
        required_env("MILLPOND_TEST_PG_HOST"),
        required_env("MILLPOND_TEST_PG_PORT"),
        required_env("MILLPOND_TEST_PG_USER"),
        required_env("MILLPOND_TEST_PG_PASSWORD"),
    )
}

fn try_psql_in(db: &str, sql: &str) -> Result<String, String> {
    let dsn = dsn(db);
    let out = Command::new("psql")
        .args([&dsn, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .expect("run psql");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Drops a test database. `WITH (FORCE)` refuses while an autovacuum worker
/// is in the database (its role is not ours), so that refusal is retried a
/// few times, then the database is dropped without FORCE, which stops
/// autovacuum itself. Any other error fails at once.
fn drop_database(db: &str) {
    const AUTOVACUUM: &str = "must be a member of the role whose process is being terminated";
    const FORCE_ATTEMPTS: usize = 8;
    let admin = required_env("MILLPOND_TEST_PG_DB");
    let forced = format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)");
    let mut first = None;
    for _ in 0..FORCE_ATTEMPTS {
        match try_psql_in(&admin, &forced) {
            Ok(_) => return,
            Err(err) if err.contains(AUTOVACUUM) => {
                first.get_or_insert(err);
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(err) => panic!("{forced}: {err}"),
        }
    }
    if let Err(err) = try_psql_in(&admin, &format!("DROP DATABASE IF EXISTS {db}")) {
        panic!(
            "DROP DATABASE {db}: {err} (WITH (FORCE) first said: {})",
            first.unwrap_or_default()
        );
    }
}

impl Lake {
    pub fn new(backend: Backend, table: &str) -> Lake {
        let dir = tempfile::tempdir().unwrap();
        let mut env = vec![
            ("DUCKLAKE_TABLE".into(), table.into()),
            ("DUCKDB_EXTENSION_DIR".into(), extension_dir()),
            // Held by the tests' ingest send deadline (60 s) with the
            // margin (millpond_proto::WRITE_MARGIN).
            ("DUCKLAKE_WRITE_BUDGET_S".into(), "40".into()),
        ];
        let mut pg_database = None;
        match backend {
            Backend::Embedded | Backend::EmbeddedDuckDb => {
                env.push((
                    "MILLPOND_LAKE_DIR".into(),
                    dir.path().join("lake").display().to_string(),
                ));
                if backend == Backend::EmbeddedDuckDb {
                    env.push(("DUCKLAKE_CATALOG_TYPE".into(), "duckdb".into()));
                }
            }
            Backend::PostgresS3 => {
                let db = unique("lake");
                psql(&format!("CREATE DATABASE {db}"));
                pg_database = Some(db.clone());
                let bucket = required_env("MILLPOND_TEST_S3_BUCKET");
                env.extend(
                    [
                        ("DUCKLAKE_RDS_HOST", required_env("MILLPOND_TEST_PG_HOST")),
                        ("DUCKLAKE_RDS_PORT", required_env("MILLPOND_TEST_PG_PORT")),
                        ("DUCKLAKE_RDS_DATABASE", db),
                        (
                            "DUCKLAKE_RDS_USERNAME",
                            required_env("MILLPOND_TEST_PG_USER"),
                        ),
                        (
                            "DUCKLAKE_RDS_PASSWORD",
                            required_env("MILLPOND_TEST_PG_PASSWORD"),
                        ),
                        (
                            "DUCKLAKE_DATA_PATH",
                            format!("s3://{bucket}/{}/", unique("data")),
                        ),
                        (
                            "DUCKDB_S3_ACCESS_KEY_ID",
                            required_env("MILLPOND_TEST_S3_KEY_ID"),
                        ),
                        (
                            "DUCKDB_S3_SECRET_ACCESS_KEY",
                            required_env("MILLPOND_TEST_S3_SECRET"),
                        ),
                        ("DUCKDB_S3_REGION", required_env("MILLPOND_TEST_S3_REGION")),
                        (
                            "DUCKDB_S3_ENDPOINT",
                            required_env("MILLPOND_TEST_S3_ENDPOINT"),
                        ),
                        ("DUCKDB_S3_USE_SSL", "false".into()),
                        ("DUCKDB_S3_URL_STYLE", "path".into()),
                    ]
                    .map(|(k, v)| (k.to_owned(), v)),
                );
            }
        }
        Lake {
            backend,
            table: table.into(),
            env,
            dir,
            pg_database,
        }
    }

    pub fn env_value(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Lake {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
        self
    }

    /// A plain DuckDB session attached READ_ONLY to the same lake, as a user
    /// would. The embedded SQLite catalog can be read while a writer runs;
    /// the DuckDB-file catalog only once the writer stopped.
    pub fn reader(&self) -> Connection {
        self.session(true)
    }

    /// A read-write session, as a person changing the table by hand.
    pub fn admin(&self) -> Connection {
        self.session(false)
    }

    /// Runs one statement on a new admin session, again (attach and all)
    /// while a running writer holds the SQLite catalog's lock ("database
    /// is locked"), for up to 30 s. One statement, so that a retry never
    /// repeats a part that landed.
    pub fn execute(&self, statement: &str) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let run = self
                .try_session(false)
                .and_then(|conn| conn.execute_batch(statement));
            match run {
                Ok(()) => return,
                Err(e)
                    if e.to_string().contains("database is locked")
                        && std::time::Instant::now() < until =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => panic!("{statement}: {e}"),
            }
        }
    }

    fn session(&self, read_only: bool) -> Connection {
        self.try_session(read_only).unwrap()
    }

    /// A session with the lake attached; the attach's error, if any.
    fn try_session(&self, read_only: bool) -> duckdb::Result<Connection> {
        let mode = if read_only { ", READ_ONLY" } else { "" };
        let cfg = Config::default()
            .with("extension_directory", extension_dir())
            .unwrap()
            .with("autoinstall_known_extensions", "false")
            .unwrap()
            // scripts/setup-extensions.sh verified their signatures.
            .with("allow_unsigned_extensions", "true")
            .unwrap();
        let conn = Connection::open_in_memory_with_flags(cfg).unwrap();
        for ext in millpond_writer::sink::ducklake::extensions() {
            conn.execute_batch(&format!("LOAD {ext}")).unwrap();
        }
        let attach = match self.backend {
            Backend::Embedded | Backend::EmbeddedDuckDb => {
                let dir = PathBuf::from(self.env_value("MILLPOND_LAKE_DIR").unwrap());
                let format = if self.backend == Backend::Embedded {
                    EmbeddedFormat::Sqlite
                } else {
                    EmbeddedFormat::DuckDb
                };
                let catalog = match self.env_value("DUCKLAKE_CATALOG_PATH") {
                    Some(path) => PathBuf::from(path),
                    None => dir.join(format.default_file()),
                };
                format!(
                    "ATTACH '{}' AS lake (DATA_PATH '{}/data/'{mode})",
                    format.attach_target(&catalog),
                    dir.display()
                )
            }
            Backend::PostgresS3 => {
                conn.execute_batch(&format!(
                    "CREATE SECRET (TYPE S3, KEY_ID '{}', SECRET '{}', ENDPOINT '{}', URL_STYLE 'path', USE_SSL false, REGION '{}')",
                    required_env("MILLPOND_TEST_S3_KEY_ID"),
                    required_env("MILLPOND_TEST_S3_SECRET"),
                    required_env("MILLPOND_TEST_S3_ENDPOINT"),
                    required_env("MILLPOND_TEST_S3_REGION"),
                ))
                .unwrap();
                format!(
                    "ATTACH 'ducklake:postgres:host={} port={} dbname={} user={} password={} sslmode=disable' AS lake (DATA_PATH '{}'{mode})",
                    required_env("MILLPOND_TEST_PG_HOST"),
                    required_env("MILLPOND_TEST_PG_PORT"),
                    self.pg_database.as_ref().unwrap(),
                    required_env("MILLPOND_TEST_PG_USER"),
                    required_env("MILLPOND_TEST_PG_PASSWORD"),
                    self.env_value("DUCKLAKE_DATA_PATH").unwrap(),
                )
            }
        };
        conn.execute_batch(&attach)?;
        Ok(conn)
    }

    /// A second lake with a copy of this one's catalog and the same data
    /// path (files are shared, not copied): for comparing what two
    /// commands do to the same catalog. Take it while nothing has the
    /// catalog open.
    pub fn clone_catalog(&self) -> Lake {
        let mut env = self.env.clone();
        let pg_database = match self.backend {
            Backend::PostgresS3 => {
                let db = unique("lake");
                let from = self.pg_database.as_ref().unwrap();
                // Refused while a session (autovacuum too) is in the source.
                let sql = format!("CREATE DATABASE {db} TEMPLATE {from}");
                let admin = required_env("MILLPOND_TEST_PG_DB");
                let mut tries = 0;
                while let Err(err) = try_psql_in(&admin, &sql) {
                    tries += 1;
                    assert!(tries < 40, "{sql}: {err}");
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
                env.retain(|(k, _)| k != "DUCKLAKE_RDS_DATABASE");
                env.push(("DUCKLAKE_RDS_DATABASE".into(), db.clone()));
                Some(db)
            }
            _ => {
                let dir = PathBuf::from(self.env_value("MILLPOND_LAKE_DIR").unwrap());
                let format = if self.backend == Backend::Embedded {
                    EmbeddedFormat::Sqlite
                } else {
                    EmbeddedFormat::DuckDb
                };
                let copy = dir.join(format!("clone-{}", format.default_file()));
                std::fs::copy(dir.join(format.default_file()), &copy).unwrap();
                env.push(("DUCKLAKE_CATALOG_PATH".into(), copy.display().to_string()));
                None
            }
        };
        Lake {
            backend: self.backend,
            table: self.table.clone(),
            env,
            dir: tempfile::tempdir().unwrap(),
            pg_database,
        }
    }

    pub fn count(&self) -> i64 {
        self.reader()
            .query_row(
                &format!("SELECT count(*) FROM lake.main.\"{}\"", self.table),
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Rows of `SELECT <expr> FROM table ORDER BY 1`, each as text.
    pub fn column_text(&self, expr: &str) -> Vec<Option<String>> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT ({expr})::VARCHAR FROM lake.main.\"{}\" ORDER BY 1",
                self.table
            ))
            .unwrap();
        stmt.query_map([], |r| r.get::<_, Option<String>>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The snapshots whose commit message names flush `id`: for each,
    /// whether it has an author and whether it inserted rows.
    pub fn flush_snapshot(&self, id: &str) -> Vec<String> {
        self.query(&format!(
            "SELECT author IS NOT NULL, map_contains(changes, 'tables_inserted_into') \
             FROM ducklake_snapshots('lake') WHERE commit_message = 'millpond flush {id}'"
        ))
    }

    /// Each row of a query as its columns' text joined by `|` (NULL as
    /// `NULL`), for compact assertions.
    pub fn query(&self, sql: &str) -> Vec<String> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare(&format!("SELECT COLUMNS(*)::VARCHAR FROM ({sql})"))
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut out = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            let n = row.as_ref().column_count();
            let cols: Vec<String> = (0..n)
                .map(|i| {
                    row.get::<_, Option<String>>(i)
                        .unwrap()
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect();
            out.push(cols.join("|"));
        }
        out
    }

    /// Runs SQL in the Postgres catalog's own database (psql, bypassing
    /// DuckDB); its rows, one per line.
    pub fn catalog_psql(&self, sql: &str) -> String {
        let db = self
            .pg_database
            .as_ref()
            .expect("only the Postgres backend has a catalog database");
        psql_in(db, sql)
    }

    /// Starts psql running `sql` in the catalog's database in the
    /// background: a session the test holds open (a long transaction).
    pub fn catalog_psql_spawn(&self, sql: &str) -> std::process::Child {
        let db = self
            .pg_database
            .as_ref()
            .expect("only the Postgres backend has a catalog database");
        Command::new("psql")
            .args([&dsn(db), "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run psql")
    }

    /// Where the data files are: a folder or an `s3://` prefix, ending in `/`.
    pub fn data_path(&self) -> String {
        match self.backend {
            Backend::PostgresS3 => self.env_value("DUCKLAKE_DATA_PATH").unwrap().to_owned(),
            _ => format!("{}/data/", self.env_value("MILLPOND_LAKE_DIR").unwrap()),
        }
    }

    /// The files the catalog lists for the table.
    pub fn data_files(&self) -> Vec<String> {
        self.query(&format!(
            "SELECT data_file FROM ducklake_list_files('lake', '{}')",
            self.table
        ))
    }

    /// The `created_by` of each of the table's data files: `DuckDB ...`
    /// for an insert, `parquet-rs ...` for the writer's own files.
    pub fn data_file_writers(&self) -> Vec<String> {
        self.data_files()
            .iter()
            .flat_map(|f| {
                self.query(&format!(
                    "SELECT created_by FROM parquet_file_metadata('{f}')"
                ))
            })
            .collect()
    }

    /// The distinct Parquet codecs of the table's data files, sorted.
    pub fn data_file_codecs(&self) -> Vec<String> {
        let mut codecs: Vec<String> = self
            .data_files()
            .iter()
            .flat_map(|f| {
                self.query(&format!(
                    "SELECT DISTINCT compression FROM parquet_metadata('{f}')"
                ))
            })
            .collect();
        codecs.sort();
        codecs.dedup();
        codecs
    }

    /// Files in storage under the table's folder that the table does not
    /// list: never registered (or no longer).
    pub fn unregistered_table_files(&self) -> Vec<String> {
        let folder = format!("{}main/{}/", self.data_path(), self.table);
        let listed = self.data_files();
        self.storage_files()
            .into_keys()
            .filter(|f| f.starts_with(&folder) && !listed.contains(f))
            .collect()
    }

    /// Every object under the data path and its size, as storage lists it.
    pub fn storage_files(&self) -> std::collections::BTreeMap<String, i64> {
        self.files_under(&self.data_path())
    }

    /// Every object under `prefix` (a folder or an `s3://` prefix ending
    /// in `/`) and its size.
    pub fn files_under(&self, prefix: &str) -> std::collections::BTreeMap<String, i64> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT filename, size FROM read_blob('{prefix}**')"
            ))
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Writes a small Parquet file of `rows` rows at `path` (in storage,
    /// behind the catalog's back).
    pub fn write_storage_file(&self, path: &str, rows: usize) {
        self.reader()
            .execute_batch(&format!(
                "COPY (SELECT range AS x, 'padding-' || range AS y FROM range({rows})) TO '{path}' (FORMAT parquet)"
            ))
            .unwrap();
    }

    /// Copies a file byte for byte (in storage, behind the catalog's back).
    pub fn copy_storage_file(&self, from: &str, to: &str) {
        self.reader()
            .execute_batch(&format!(
                "COPY (SELECT content FROM read_blob('{from}')) TO '{to}' (FORMAT BLOB)"
            ))
            .unwrap();
    }

    /// Deletes one object from storage, behind the catalog's back.
    pub fn remove_storage_file(&self, path: &str) {
        match path.strip_prefix("s3://") {
            Some(rest) => {
                // boto3 (in the test venv with moto) signs the request.
                let (bucket, key) = rest.split_once('/').unwrap();
                let script = "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], \
                    aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], \
                    region_name=sys.argv[4]).delete_object(Bucket=sys.argv[5], Key=sys.argv[6])";
                let out = Command::new(required_env("MILLPOND_PYTHON"))
                    .args([
                        "-c",
                        script,
                        &format!("http://{}", required_env("MILLPOND_TEST_S3_ENDPOINT")),
                        &required_env("MILLPOND_TEST_S3_KEY_ID"),
                        &required_env("MILLPOND_TEST_S3_SECRET"),
                        &required_env("MILLPOND_TEST_S3_REGION"),
                        bucket,
                        key,
                    ])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "deleting {path}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::fs::remove_file(path).unwrap(),
        }
    }

    /// (column name, DuckDB type) of the table, in table order.
    pub fn columns(&self) -> Vec<(String, String)> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog='lake' AND table_name='{}' ORDER BY ordinal_position",
                self.table
            ))
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

impl Drop for Lake {
    fn drop(&mut self) {
        if let Some(db) = &self.pg_database {
            if !std::thread::panicking() {
                drop_database(db);
            }
        }
    }
}
