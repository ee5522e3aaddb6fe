//! Opening a DuckDB session with the DuckLake attached as `lake`.
use duckdb::Connection;
use millpond_shared::retry::Ladder;

use super::session::Session;
use super::sql::literal;

use super::lake_config::{Catalog, LakeConfig, RootCert, SslMode};
use crate::sink::SinkError;

/// The extension list, shared with scripts/setup-extensions.sh.
const EXTENSIONS_FILE: &str = include_str!("../../../duckdb-extensions.txt");

/// Every extension installed in the local extension directory (the first
/// word of each non-comment line of duckdb-extensions.txt); a lake loads
/// the ones it needs (`LakeConfig::extensions`).
pub fn extensions() -> impl Iterator<Item = &'static str> {
    EXTENSIONS_FILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
}

/// How to fix a missing extension, naming the folder this DuckDB looks in.
fn setup_hint(conn: &Connection, dir: &str) -> String {
    let found = conn.query_row(
        "SELECT library_version, (SELECT platform FROM pragma_platform()) FROM pragma_version()",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    );
    let folder = match found {
        Ok((version, platform)) => format!("{dir}/{version}/{platform}"),
        Err(_) => format!("{dir}/<version>/<platform>"),
    };
    format!("run scripts/setup-extensions.sh, or set DUCKDB_EXTENSION_DIR to a folder whose {folder}/ holds <name>.duckdb_extension")
}

/// A libpq keyword value, quoted so spaces, quotes and backslashes survive.
fn libpq_value(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The libpq connection string of a Postgres catalog, every value quoted.
fn postgres_conninfo(catalog: &Catalog) -> String {
    let Catalog::Postgres {
        host,
        port,
        database,
        username,
        password,
        tls,
    } = catalog
    else {
        unreachable!("only a Postgres catalog has a connection string")
    };
    let mut out = format!(
        "host={} port={port} dbname={} user={} password={} sslmode={}",
        libpq_value(host),
        libpq_value(database),
        libpq_value(username),
        libpq_value(password.expose()),
        tls.mode.as_str(),
    );
    match &tls.root_cert {
        Some(RootCert::File(path)) => {
            out.push_str(" sslrootcert=");
            out.push_str(&libpq_value(&path.to_string_lossy()));
        }
        Some(RootCert::System) => out.push_str(" sslrootcert=system"),
        None => {}
    }
    out
}

/// What an operator checks when the Postgres catalog cannot be reached:
/// the TLS settings in force, and, when libpq refused the server's
/// certificate, which setting decides it.
fn tls_hint(catalog: &Catalog, msg: &str) -> String {
    let Catalog::Postgres { host, tls, .. } = catalog else {
        return String::new();
    };
    let lower = msg.to_ascii_lowercase();
    let refused = ["certificate", "ssl error", "does not support ssl"]
        .iter()
        .any(|w| lower.contains(w));
    let fix = match (refused, tls.mode) {
        (false, _) => String::new(),
        (true, SslMode::VerifyFull) => format!(
            ": the catalog server's certificate must be signed by a CA in DUCKLAKE_RDS_SSLROOTCERT and name DUCKLAKE_RDS_HOST ({host})"
        ),
        (true, SslMode::VerifyCa) => {
            ": the catalog server's certificate must be signed by a CA in DUCKLAKE_RDS_SSLROOTCERT"
                .to_owned()
        }
        (true, _) => ": check DUCKLAKE_RDS_SSLMODE against the server's TLS setup".to_owned(),
    };
    format!(" (Postgres catalog TLS: {}{fix})", tls.describe())
}

/// Masks the value after every `password=` (quoted or not).
fn mask_passwords(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find("password=") {
        let (head, tail) = rest.split_at(i + "password=".len());
        out.push_str(head);
        let end = if let Some(quoted) = tail.strip_prefix('\'') {
            let mut j = 0;
            let b = quoted.as_bytes();
            while j < b.len() && !(b[j] == b'\'' && (j == 0 || b[j - 1] != b'\\')) {
                j += 1;
            }
            (j + 2).min(tail.len())
        } else {
            tail.find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(tail.len())
        };
        out.push_str("***");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Removes every secret of the config from a message.
pub fn scrub(cfg: &LakeConfig, msg: &str) -> String {
    let mut out = mask_passwords(msg);
    if let Catalog::Postgres { password, .. } = &cfg.catalog {
        out = password.scrub(&out);
    }
    if let Some(s3) = &cfg.s3 {
        out = s3.secret.scrub(&s3.key_id.scrub(&out));
    }
    out
}

pub fn open(cfg: &LakeConfig) -> Result<Session, SinkError> {
    let dir = cfg.extension_dir.to_string_lossy().into_owned();
    let unsigned = if cfg.check_extension_signatures {
        "false"
    } else {
        "true"
    };
    let session = Session::open(
        &cfg.connection,
        &[
            ("extension_directory", dir.as_str()),
            ("autoinstall_known_extensions", "false"),
            ("autoload_known_extensions", "false"),
            ("allow_unsigned_extensions", unsigned),
        ],
    )
    .map_err(|e| SinkError::transient(format!("open duckdb {:?}: {e}", cfg.connection)))?;
    let conn = &session.conn;

    for ext in cfg.extensions() {
        debug_assert!(extensions().any(|e| e == ext), "{ext} not installed");
        conn.execute_batch(&format!("LOAD {ext}")).map_err(|e| {
            SinkError::permanent(format!(
                "DuckDB extension {ext} could not be loaded from {dir}: {e}. To fix: {}",
                setup_hint(conn, &dir)
            ))
        })?;
    }
    let mut setup = vec![
        "SET GLOBAL preserve_insertion_order = false".to_owned(),
        // Calendar fields of a TIMESTAMPTZ (hour(_inserted_at) partitions,
        // text cast by DuckDB) in UTC, whatever zone the machine is in.
        "SET GLOBAL TimeZone = 'UTC'".to_owned(),
    ];
    if let Some(n) = cfg.threads {
        setup.push(format!("SET GLOBAL threads = {n}"));
    }
    if let Some(limit) = &cfg.memory_limit {
        setup.push(format!("SET GLOBAL memory_limit = {}", literal(limit)));
    }
    if let Some(s3) = &cfg.s3 {
        setup.push(format!(
            "SET GLOBAL s3_access_key_id = {}",
            literal(s3.key_id.expose())
        ));
        setup.push(format!(
            "SET GLOBAL s3_secret_access_key = {}",
            literal(s3.secret.expose())
        ));
        if let Some(v) = &s3.region {
            setup.push(format!("SET GLOBAL s3_region = {}", literal(v)));
        }
        if let Some(v) = &s3.endpoint {
            setup.push(format!("SET GLOBAL s3_endpoint = {}", literal(v)));
        }
        if let Some(v) = s3.use_ssl {
            setup.push(format!("SET GLOBAL s3_use_ssl = {v}"));
        }
        if let Some(v) = &s3.url_style {
            setup.push(format!("SET GLOBAL s3_url_style = {}", literal(v)));
        }
    }
    for stmt in &setup {
        conn.execute_batch(stmt).map_err(|e| {
            SinkError::permanent(format!(
                "session setup failed: {}",
                scrub(cfg, &e.to_string())
            ))
        })?;
    }
    attach(cfg, conn)?;
    conn.execute_batch(&format!(
        "SET GLOBAL ducklake_max_retry_count = {}",
        cfg.max_retry_count
    ))
    .map_err(|e| SinkError::permanent(format!("SET ducklake_max_retry_count: {e}")))?;
    Ok(session)
}

/// Detaches the lake and attaches it again on the same connection: the
/// way out after a SQLite catalog answered a commit "database is locked",
/// which leaves DuckDB's connection to it inside a transaction that never
/// ends (every later statement is "locked" too). Detaching closes that
/// connection, and SQLite rolls the transaction back.
pub fn reattach(cfg: &LakeConfig, conn: &Connection) -> Result<(), SinkError> {
    conn.execute_batch("DETACH DATABASE IF EXISTS lake")
        .map_err(|e| {
            SinkError::transient(format!("detach the lake: {}", scrub(cfg, &e.to_string())))
        })?;
    attach(cfg, conn)
}

fn attach(cfg: &LakeConfig, conn: &Connection) -> Result<(), SinkError> {
    let target = match &cfg.catalog {
        Catalog::Embedded { path, format } => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    SinkError::permanent(format!("create catalog folder {}: {e}", parent.display()))
                })?;
            }
            if !cfg.data_path.contains("://") {
                std::fs::create_dir_all(&cfg.data_path).map_err(|e| {
                    SinkError::permanent(format!("create data folder {}: {e}", cfg.data_path))
                })?;
            }
            format.attach_target(path)
        }
        Catalog::Postgres { .. } => {
            format!("ducklake:postgres:{}", postgres_conninfo(&cfg.catalog))
        }
    };
    let sql = format!(
        "ATTACH IF NOT EXISTS {} AS lake (DATA_PATH {})",
        literal(&target),
        literal(&cfg.data_path)
    );
    // Two writers attaching an empty catalog for the first time race on
    // creating the metadata tables; the loser retries once the winner is done.
    ATTACH_RACE
        .retry_blocking(
            || {
                conn.execute_batch(&sql)
                    .map_err(|e| scrub(cfg, &e.to_string()))
            },
            |msg| msg.contains("already exists") || msg.contains("duplicate key"),
        )
        .map_err(|msg| {
            SinkError::transient(format!(
                "attach DuckLake catalog failed: {msg}{}",
                tls_hint(&cfg.catalog, &msg)
            ))
        })
}

/// Attaches a Postgres catalog's database again as `name`, read-only or
/// not, with the libpq `options` given (none when empty).
pub fn attach_again(
    cfg: &LakeConfig,
    conn: &Connection,
    name: &str,
    options: &str,
    read_only: bool,
) -> Result<(), SinkError> {
    let mut conninfo = postgres_conninfo(&cfg.catalog);
    if !options.is_empty() {
        conninfo.push_str(" options=");
        conninfo.push_str(&libpq_value(options));
    }
    let mode = if read_only { ", READ_ONLY" } else { "" };
    conn.execute_batch(&format!(
        "ATTACH IF NOT EXISTS {} AS {name} (TYPE postgres{mode})",
        literal(&conninfo)
    ))
    .map_err(|e| {
        let msg = scrub(cfg, &e.to_string());
        SinkError::transient(format!(
            "attach the catalog database as {name}: {msg}{}",
            tls_hint(&cfg.catalog, &msg)
        ))
    })
}

/// Attaching an empty catalog that another writer is creating: 5 attempts,
/// 0.2 s doubling.
const ATTACH_RACE: Ladder = Ladder {
    attempts: 5,
    base: std::time::Duration::from_millis(200),
    jitter: 0.25,
};

#[cfg(test)]
mod tests {
    use super::{extensions, mask_passwords, postgres_conninfo, tls_hint};
    use crate::sink::ducklake::lake_config::{Catalog, PgTls, RootCert, SslMode};
    use millpond_shared::config::Secret;

    fn postgres(password: &str, mode: SslMode, root_cert: Option<RootCert>) -> Catalog {
        Catalog::Postgres {
            host: "db.internal".into(),
            port: 5433,
            database: "lake db".into(),
            username: "o'brien".into(),
            password: Secret::new(password),
            tls: PgTls { mode, root_cert },
        }
    }

    #[test]
    fn the_conninfo_quotes_every_value_and_carries_the_tls_settings() {
        assert_eq!(
            postgres_conninfo(&postgres("pw", SslMode::Prefer, None)),
            "host='db.internal' port=5433 dbname='lake db' user='o\\'brien' password='pw' sslmode=prefer"
        );
        let file = RootCert::File(r"/certs/rds ca's\bundle.pem".into());
        assert_eq!(
            postgres_conninfo(&postgres("p w", SslMode::VerifyFull, Some(file))),
            "host='db.internal' port=5433 dbname='lake db' user='o\\'brien' password='p w' \
             sslmode=verify-full sslrootcert='/certs/rds ca\\'s\\\\bundle.pem'"
        );
        assert!(
            postgres_conninfo(&postgres("pw", SslMode::VerifyFull, Some(RootCert::System)))
                .ends_with(" sslmode=verify-full sslrootcert=system")
        );
        assert!(postgres_conninfo(&postgres("pw", SslMode::Disable, None))
            .ends_with(" sslmode=disable"));
    }

    #[test]
    fn a_refused_certificate_names_the_tls_settings() {
        let root = Some(RootCert::File("/etc/rds/ca.pem".into()));
        let catalog = postgres("pw", SslMode::VerifyFull, root);
        let hint = tls_hint(
            &catalog,
            "IO Error: Unable to connect to Postgres at \"host=... password=***\": SSL error: certificate verify failed",
        );
        assert_eq!(
            hint,
            " (Postgres catalog TLS: DUCKLAKE_RDS_SSLMODE=verify-full, DUCKLAKE_RDS_SSLROOTCERT=/etc/rds/ca.pem: \
             the catalog server's certificate must be signed by a CA in DUCKLAKE_RDS_SSLROOTCERT and name DUCKLAKE_RDS_HOST (db.internal))"
        );
        // Another failure says the settings in force, and no fix.
        assert_eq!(
            tls_hint(&catalog, "FATAL: password authentication failed for user"),
            " (Postgres catalog TLS: DUCKLAKE_RDS_SSLMODE=verify-full, DUCKLAKE_RDS_SSLROOTCERT=/etc/rds/ca.pem)"
        );
        let require = postgres("pw", SslMode::Require, None);
        assert!(tls_hint(
            &require,
            "server does not support SSL, but SSL was required"
        )
        .ends_with(": check DUCKLAKE_RDS_SSLMODE against the server's TLS setup)"));
    }

    /// A real session on an embedded lake runs with the configured threads.
    #[test]
    fn the_session_runs_the_configured_threads() {
        use millpond_shared::config::{Env, EnvReader};
        let dir = tempfile::tempdir().unwrap();
        let lake_dir = dir.path().join("lake").display().to_string();
        std::fs::create_dir_all(dir.path().join("lake/data")).unwrap();
        let home = std::env::var("HOME").unwrap();
        let ext = std::env::var("DUCKDB_EXTENSION_DIR")
            .unwrap_or_else(|_| format!("{home}/.cache/millpond/duckdb-extensions"));
        for (threads, want) in [(None, None), (Some("3"), Some(3i64))] {
            let mut pairs = vec![
                ("MILLPOND_LAKE_DIR", lake_dir.as_str()),
                ("DUCKDB_EXTENSION_DIR", ext.as_str()),
            ];
            if let Some(t) = threads {
                pairs.push(("DUCKDB_THREADS", t));
            }
            let env = Env::from_pairs(pairs);
            let mut r = EnvReader::new(&env);
            let cfg = crate::sink::ducklake::config::LakeConfig::parse(&mut r).unwrap();
            r.finish().unwrap();
            let session = super::open(&cfg).map_err(|e| e.message).unwrap();
            let got: i64 = session
                .conn
                .query_row("SELECT current_setting('threads')::BIGINT", [], |row| {
                    row.get(0)
                })
                .unwrap();
            match want {
                Some(n) => assert_eq!(got, n),
                // Unset: DuckDB's own default, every core.
                None => assert_eq!(
                    got,
                    std::thread::available_parallelism().unwrap().get() as i64
                ),
            }
        }
    }

    #[test]
    fn extension_list_is_read_from_the_shared_file() {
        assert_eq!(
            extensions().collect::<Vec<_>>(),
            ["ducklake", "postgres_scanner", "httpfs", "sqlite_scanner"]
        );
    }

    #[test]
    fn passwords_are_masked_quoted_or_not() {
        assert_eq!(
            mask_passwords("at \"host='h' password='a\\'b' sslmode=prefer\" x password=pw y"),
            "at \"host='h' password=*** sslmode=prefer\" x password=*** y"
        );
        assert_eq!(mask_passwords("no secrets"), "no secrets");
    }
}
