//! Where the lake is and how a DuckDB session reaches it: the catalog
//! (DUCKLAKE_RDS_*, their TLS part in pg_tls.rs; MILLPOND_LAKE_DIR,
//! DUCKLAKE_CATALOG_*), the data path, DUCKDB_S3_* and the DuckDB session
//! settings. The writer's sink and the
//! `millpond-lake` maintenance tool both parse and open the lake through
//! this one module.
use std::path::{Path, PathBuf};

use millpond_shared::config::{EnvReader, Secret};

pub use super::pg_tls::{PgTls, RootCert, SslMode};

/// Where the DuckLake catalog lives.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// A local catalog file: no services needed.
    Embedded {
        path: PathBuf,
        format: EmbeddedFormat,
    },
    /// Postgres, the production catalog.
    Postgres {
        host: String,
        port: u16,
        database: String,
        username: String,
        password: Secret,
        /// DUCKLAKE_RDS_SSLMODE and DUCKLAKE_RDS_SSLROOTCERT.
        tls: PgTls,
    },
}

/// The file format of an embedded catalog (DUCKLAKE_CATALOG_TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddedFormat {
    /// SQLite: other processes can attach it READ_ONLY while the writer
    /// writes, so a person can query the lake live. The default.
    Sqlite,
    /// A DuckDB database file: locked by the writer while it runs.
    DuckDb,
}

impl EmbeddedFormat {
    /// The catalog file name used when DUCKLAKE_CATALOG_PATH is unset.
    pub fn default_file(self) -> &'static str {
        match self {
            EmbeddedFormat::Sqlite => "catalog.sqlite",
            EmbeddedFormat::DuckDb => "catalog.ducklake",
        }
    }

    /// The path a DuckLake ATTACH names: `ducklake:sqlite:<file>` or
    /// `ducklake:<file>`.
    pub fn attach_target(self, path: &std::path::Path) -> String {
        match self {
            EmbeddedFormat::Sqlite => format!("ducklake:sqlite:{}", path.display()),
            EmbeddedFormat::DuckDb => format!("ducklake:{}", path.display()),
        }
    }

    /// Earlier versions made DuckDB-file catalogs named `*.ducklake`; a path
    /// ending so (or in `.duckdb`) keeps that format unless told otherwise.
    fn implied_by(path: &std::path::Path) -> EmbeddedFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("ducklake" | "duckdb") => EmbeddedFormat::DuckDb,
            _ => EmbeddedFormat::Sqlite,
        }
    }
}

#[derive(Debug, Clone)]
pub struct S3Config {
    pub key_id: Secret,
    pub secret: Secret,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub use_ssl: Option<bool>,
    pub url_style: Option<String>,
}

/// The lake a session attaches as `lake`, and the DuckDB settings it runs with.
#[derive(Debug, Clone)]
pub struct LakeConfig {
    pub catalog: Catalog,
    pub data_path: String,
    /// DuckDB database the session runs in (":memory:" or a file path).
    pub connection: String,
    pub max_retry_count: u64,
    pub s3: Option<S3Config>,
    pub memory_limit: Option<String>,
    pub extension_dir: PathBuf,
    /// DUCKDB_CHECK_EXTENSION_SIGNATURES: DuckDB verifies each extension's
    /// signature on every LOAD (SHA-256 over the whole file, ~0.1 CPU-s per
    /// extension). Off by default: scripts/setup-extensions.sh verifies them
    /// once when it installs them (the image build runs it), and the files
    /// are then as trusted as the writer binary beside them.
    pub check_extension_signatures: bool,
    /// DUCKDB_THREADS: DuckDB's worker threads. Unset, DuckDB uses every
    /// core; the writer defaults to 1 (see `DuckLakeConfig::parse`).
    pub threads: Option<u64>,
}

/// A size for DuckDB's memory_limit (`4GB`, `512MiB`), handed to DuckDB
/// as bytes, so nothing unchecked reaches SQL and the writer and
/// `millpond-lake` read it alike.
pub fn memory_limit(text: &str) -> Result<String, String> {
    match parse_size::parse_size(text) {
        Ok(0) => Err(format!("{text:?}: the memory limit must be above zero")),
        Ok(n) => Ok(format!("{n}B")),
        Err(e) => Err(format!("{text:?} is not a size like 4GB or 512MiB: {e}")),
    }
}

pub(super) fn matches(value: &str, ok: impl Fn(char) -> bool) -> bool {
    !value.is_empty() && value.chars().all(ok)
}

impl LakeConfig {
    pub fn parse(r: &mut EnvReader<'_>) -> Option<Self> {
        let max_retry_count = r.positive_u64("DUCKLAKE_MAX_RETRY_COUNT", 100);
        let memory_limit = r
            .optional("DUCKDB_MEMORY_LIMIT")
            .and_then(|m| match memory_limit(&m) {
                Ok(bytes) => Some(bytes),
                Err(why) => {
                    r.errors.push("DUCKDB_MEMORY_LIMIT", why);
                    None
                }
            });
        let home = r.env().get("HOME").unwrap_or("/root").to_owned();
        let extension_dir = PathBuf::from(r.string_or(
            "DUCKDB_EXTENSION_DIR",
            &format!("{home}/.cache/millpond/duckdb-extensions"),
        ));
        let check_extension_signatures = r
            .bool_opt("DUCKDB_CHECK_EXTENSION_SIGNATURES")
            .unwrap_or(false);
        let threads = r
            .optional("DUCKDB_THREADS")
            .is_some()
            .then(|| r.positive_u64("DUCKDB_THREADS", 1));
        let connection = r.string_or("DUCKLAKE_CONNECTION", ":memory:");

        let catalog_type = r.optional("DUCKLAKE_CATALOG_TYPE");
        let (catalog, data_path) = match r.optional("DUCKLAKE_RDS_HOST") {
            None if r
                .optional("DUCKLAKE_DATA_PATH")
                .is_some_and(|d| d.contains("://")) =>
            {
                // A local catalog over remote data is almost certainly a
                // missing host: the catalog would vanish with the container.
                r.errors.push(
                    "DUCKLAKE_RDS_HOST",
                    "is required when DUCKLAKE_DATA_PATH is remote (the embedded catalog is for local data only)",
                );
                (None, String::new())
            }
            None => {
                refuse_scratch_lake(r);
                let dir = r.string_or("MILLPOND_LAKE_DIR", "./millpond-lake");
                let catalog = embedded_catalog(r, &dir, catalog_type.as_deref());
                let data = r.string_or("DUCKLAKE_DATA_PATH", &format!("{dir}/data/"));
                (catalog, data)
            }
            Some(_) if catalog_type.is_some() => {
                r.errors.push(
                    "DUCKLAKE_CATALOG_TYPE",
                    "applies to the embedded catalog only; DUCKLAKE_RDS_HOST selects the Postgres catalog",
                );
                (None, String::new())
            }
            Some(host) => {
                let port = r.u16_port("DUCKLAKE_RDS_PORT", 5432);
                let database = r.string_or("DUCKLAKE_RDS_DATABASE", "ducklake");
                let username = r.string_or("DUCKLAKE_RDS_USERNAME", "ducklake");
                let password = r.required_secret("DUCKLAKE_RDS_PASSWORD");
                let tls = PgTls::parse(r);
                let data = r.required("DUCKLAKE_DATA_PATH").unwrap_or_default();
                let catalog = password.zip(tls).map(|(password, tls)| Catalog::Postgres {
                    host,
                    port,
                    database,
                    username,
                    password,
                    tls,
                });
                (catalog, data)
            }
        };
        if data_path.contains('\'') {
            r.errors
                .push("DUCKLAKE_DATA_PATH", "must not contain a single quote");
        }
        let s3 = parse_s3(r, data_path.starts_with("s3://"));
        Some(LakeConfig {
            catalog: catalog?,
            data_path,
            connection,
            max_retry_count,
            s3,
            memory_limit,
            extension_dir,
            check_extension_signatures,
            threads,
        })
    }

    /// The DuckDB extensions this lake needs, in LOAD order: ducklake, the
    /// catalog's scanner (none for a DuckDB-file catalog), and httpfs for
    /// remote data or when S3 settings are given (the session sets them).
    /// Each one costs startup time, so no others are loaded.
    pub fn extensions(&self) -> Vec<&'static str> {
        let mut out = vec!["ducklake"];
        match &self.catalog {
            Catalog::Postgres { .. } => out.push("postgres_scanner"),
            Catalog::Embedded {
                format: EmbeddedFormat::Sqlite,
                ..
            } => out.push("sqlite_scanner"),
            Catalog::Embedded {
                format: EmbeddedFormat::DuckDb,
                ..
            } => {}
        }
        if self.is_remote() {
            out.push("httpfs");
        }
        out
    }

    /// Data on object storage (httpfs), not in a local folder.
    pub fn is_remote(&self) -> bool {
        self.data_path.contains("://") || self.s3.is_some()
    }

    pub fn is_embedded(&self) -> bool {
        matches!(self.catalog, Catalog::Embedded { .. })
    }

    /// The catalog and data path in words, never the password: what an
    /// operator checks before a destructive command.
    pub fn describe(&self) -> String {
        match &self.catalog {
            Catalog::Embedded { path, format } => format!(
                "embedded {} catalog {} (data {})",
                match format {
                    EmbeddedFormat::Sqlite => "SQLite",
                    EmbeddedFormat::DuckDb => "DuckDB-file",
                },
                path.display(),
                self.data_path
            ),
            Catalog::Postgres {
                host,
                port,
                database,
                username,
                ..
            } => format!(
                "Postgres catalog {username}@{host}:{port}/{database} (data {})",
                self.data_path
            ),
        }
    }
}

/// The embedded catalog: DUCKLAKE_CATALOG_TYPE (`sqlite`, the default, or
/// `duckdb`) and DUCKLAKE_CATALOG_PATH (default `<lake dir>/catalog.sqlite`).
/// Without an explicit type, a path ending in `.ducklake`/`.duckdb`, or a
/// lake folder that already holds an earlier version's `catalog.ducklake`,
/// keeps the DuckDB-file format, so upgrading never starts an empty lake.
/// The embedded lake by default (`./millpond-lake`) is for the demo and
/// tests. In Kubernetes (`KUBERNETES_SERVICE_HOST`, set in every pod) or in
/// a Millpond image (`MILLPOND_IMAGE`, set by the Dockerfile) that folder is
/// the container's writable layer: the lake and its recorded offsets would
/// vanish with the container while Kafka keeps the committed offsets. There
/// the embedded lake must be asked for by its place: `MILLPOND_LAKE_DIR`, or
/// both `DUCKLAKE_CATALOG_PATH` and `DUCKLAKE_DATA_PATH`.
fn refuse_scratch_lake(r: &mut EnvReader<'_>) {
    let placed = r.optional("MILLPOND_LAKE_DIR").is_some()
        || (r.optional("DUCKLAKE_CATALOG_PATH").is_some()
            && r.optional("DUCKLAKE_DATA_PATH").is_some());
    let container = if r.optional("KUBERNETES_SERVICE_HOST").is_some() {
        Some("in Kubernetes (KUBERNETES_SERVICE_HOST is set)".to_owned())
    } else {
        r.optional("MILLPOND_IMAGE")
            .map(|image| format!("in the {image} image (MILLPOND_IMAGE)"))
    };
    if let (false, Some(container)) = (placed, container) {
        r.errors.push(
            "DUCKLAKE_RDS_HOST",
            format!(
                "is required {container}: without it the embedded lake goes to ./millpond-lake inside the \
                 container and vanishes with it, while Kafka keeps the committed offsets. Set DUCKLAKE_RDS_HOST \
                 (with the other DUCKLAKE_RDS_* settings) for the Postgres catalog, or MILLPOND_LAKE_DIR to a \
                 persistent volume to keep an embedded lake"
            ),
        );
    }
}

fn embedded_catalog(r: &mut EnvReader<'_>, dir: &str, kind: Option<&str>) -> Option<Catalog> {
    let explicit = match kind.map(str::to_ascii_lowercase).as_deref() {
        None => None,
        Some("sqlite") => Some(EmbeddedFormat::Sqlite),
        Some("duckdb") => Some(EmbeddedFormat::DuckDb),
        Some(other) => {
            r.errors.push(
                "DUCKLAKE_CATALOG_TYPE",
                format!("must be sqlite or duckdb (got {other:?})"),
            );
            return None;
        }
    };
    let (path, format) = match (r.optional("DUCKLAKE_CATALOG_PATH"), explicit) {
        (Some(path), Some(format)) => (PathBuf::from(path), format),
        (Some(path), None) => {
            let path = PathBuf::from(path);
            let format = EmbeddedFormat::implied_by(&path);
            (path, format)
        }
        (None, Some(format)) => (Path::new(dir).join(format.default_file()), format),
        (None, None) => {
            let legacy = Path::new(dir).join(EmbeddedFormat::DuckDb.default_file());
            let sqlite = Path::new(dir).join(EmbeddedFormat::Sqlite.default_file());
            if legacy.exists() && !sqlite.exists() {
                (legacy, EmbeddedFormat::DuckDb)
            } else {
                (sqlite, EmbeddedFormat::Sqlite)
            }
        }
    };
    if path.to_string_lossy().contains('\'') {
        r.errors
            .push("DUCKLAKE_CATALOG_PATH", "must not contain a single quote");
    }
    Some(Catalog::Embedded { path, format })
}

/// DUCKDB_S3_*: required when the data path is on S3.
fn parse_s3(r: &mut EnvReader<'_>, on_s3: bool) -> Option<S3Config> {
    let key_id = r.optional_secret("DUCKDB_S3_ACCESS_KEY_ID");
    let secret = r.optional_secret("DUCKDB_S3_SECRET_ACCESS_KEY");
    if on_s3 {
        if key_id.is_none() {
            r.errors.push(
                "DUCKDB_S3_ACCESS_KEY_ID",
                "is required when DUCKLAKE_DATA_PATH is on s3://",
            );
        }
        if secret.is_none() {
            r.errors.push(
                "DUCKDB_S3_SECRET_ACCESS_KEY",
                "is required when DUCKLAKE_DATA_PATH is on s3://",
            );
        }
    }
    for (var, value) in [
        ("DUCKDB_S3_ACCESS_KEY_ID", &key_id),
        ("DUCKDB_S3_SECRET_ACCESS_KEY", &secret),
    ] {
        if let Some(v) = value {
            if !matches(v.expose(), |c| c.is_ascii_graphic() && c != '\'') {
                r.errors
                    .push(var, "contains characters that are not allowed");
            }
        }
    }
    let region = r.optional("DUCKDB_S3_REGION");
    if let Some(v) = &region {
        if !matches(v, |c| c.is_ascii_alphanumeric() || c == '-') {
            r.errors.push(
                "DUCKDB_S3_REGION",
                format!("must look like us-east-1 (got {v:?})"),
            );
        }
    }
    let endpoint = r.optional("DUCKDB_S3_ENDPOINT");
    if let Some(v) = &endpoint {
        if !matches(v, |c| c.is_ascii_alphanumeric() || ".:-_/".contains(c)) {
            r.errors.push(
                "DUCKDB_S3_ENDPOINT",
                format!("must be host[:port] (got {v:?})"),
            );
        }
    }
    let use_ssl = r.bool_opt("DUCKDB_S3_USE_SSL");
    let url_style = r.optional("DUCKDB_S3_URL_STYLE");
    if let Some(v) = &url_style {
        if v != "vhost" && v != "path" {
            r.errors.push(
                "DUCKDB_S3_URL_STYLE",
                format!("must be vhost or path (got {v:?})"),
            );
        }
    }
    Some(S3Config {
        key_id: key_id?,
        secret: secret?,
        region,
        endpoint,
        use_ssl,
        url_style,
    })
}

#[cfg(test)]
#[path = "lake_config_tests.rs"]
mod tests;
