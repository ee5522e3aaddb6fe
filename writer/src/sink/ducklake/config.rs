//! DUCKLAKE_* and DUCKDB_* variables.
use std::path::{Path, PathBuf};

use millpond_shared::config::{is_safe_identifier, EnvReader, Secret};

use super::sql::ident;

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

#[derive(Debug, Clone)]
pub struct DuckLakeConfig {
    pub table: String,
    pub schema: String,
    pub data_path: String,
    /// DuckDB database the session runs in (":memory:" or a file path).
    pub connection: String,
    pub catalog: Catalog,
    pub max_retry_count: u64,
    pub partition_by: Option<String>,
    pub s3: Option<S3Config>,
    pub memory_limit: Option<String>,
    pub extension_dir: PathBuf,
    /// DUCKLAKE_ROW_GROUP_BYTES (default 16MB; `default` leaves DuckLake's
    /// own setting): Parquet row group size for the target table. DuckDB
    /// buffers a whole row group while writing, so this bounds the writer's
    /// memory per flush.
    pub row_group_bytes: Option<String>,
    /// DUCKLAKE_DEAD_LETTER_TABLE (default `<table>_dead_letters`, `off`
    /// for none): where records that cannot be rows are kept.
    pub dead_letter_table: Option<String>,
    /// DUCKLAKE_PARTITION_FENCE (default on): a writer writes a partition
    /// only while it holds the partition's lease (see fence.rs).
    pub partition_fence: bool,
    /// DUCKLAKE_PARTITION_LEASE_S (default 60, at least 3).
    pub partition_lease: std::time::Duration,
    /// Who holds leases: POD_NAME, else HOSTNAME, else a random id.
    pub lease_owner: String,
    /// DUCKLAKE_QUOTED_COLUMNS (default false): keys that are not safe
    /// identifiers become quoted columns instead of dead letters.
    pub unsafe_names: crate::sink::prepare::UnsafeNames,
    /// MILLPOND_MAX_COLUMNS: the most payload columns the table grows to;
    /// values of further new keys become dead letters.
    pub max_columns: usize,
    /// MILLPOND_VARIANT_COLUMNS: JSON text columns also written to a
    /// `{name}_variant VARIANT` companion.
    pub variant_columns: Vec<String>,
}

/// Names the sink adds itself; payload columns with these names are refused.
pub const RESERVED_COLUMNS: [&str; 5] = ["_inserted_at", "year", "month", "day", "hour"];
/// The table holding recorded Kafka offsets, beside the target table.
pub const OFFSETS_TABLE: &str = "_millpond_offsets";

fn matches(value: &str, ok: impl Fn(char) -> bool) -> bool {
    !value.is_empty() && value.chars().all(ok)
}

impl DuckLakeConfig {
    pub fn parse(r: &mut EnvReader<'_>) -> Option<Self> {
        let table_raw = r.required("DUCKLAKE_TABLE");
        let table = r.safe_identifier("DUCKLAKE_TABLE", table_raw);
        if table.as_deref() == Some(OFFSETS_TABLE) {
            r.errors.push(
                "DUCKLAKE_TABLE",
                format!("{OFFSETS_TABLE} is used by Millpond itself"),
            );
        }
        let schema_raw = Some(r.string_or("DUCKLAKE_SCHEMA", "main"));
        let schema = r.safe_identifier("DUCKLAKE_SCHEMA", schema_raw);
        let max_retry_count = r.positive_u64("DUCKLAKE_MAX_RETRY_COUNT", 100);
        let partition_by = match r
            .optional("DUCKLAKE_PARTITION_BY")
            .map(|p| partition_sql(&p))
        {
            Some(Err(e)) => {
                r.errors.push("DUCKLAKE_PARTITION_BY", e);
                None
            }
            Some(Ok(sql)) => Some(sql),
            None => None,
        };
        let memory_limit = r.optional("DUCKDB_MEMORY_LIMIT");
        if let Some(m) = &memory_limit {
            if !matches(m, |c| c.is_ascii_alphanumeric() || c == '.' || c == ' ') {
                r.errors.push(
                    "DUCKDB_MEMORY_LIMIT",
                    format!("must look like 4GB or 512MiB (got {m:?})"),
                );
            }
        }
        // Measured: 16MB row groups cut the writer's peak RSS at 100 MiB
        // flushes from ~420 MB to ~260 MB and its CPU by a quarter.
        let row_group_bytes = Some(r.string_or("DUCKLAKE_ROW_GROUP_BYTES", "16MB"))
            .filter(|v| !v.eq_ignore_ascii_case("default"));
        if let Some(m) = &row_group_bytes {
            if !matches(m, |c| c.is_ascii_alphanumeric() || c == '.') {
                r.errors.push(
                    "DUCKLAKE_ROW_GROUP_BYTES",
                    format!("must look like 32MB (got {m:?})"),
                );
            }
        }
        let dead_letter_table = crate::sink::dead_letters::table_setting(
            r,
            "DUCKLAKE_DEAD_LETTER_TABLE",
            table.as_deref(),
            &[OFFSETS_TABLE],
        );
        let partition_fence = r.bool_opt("DUCKLAKE_PARTITION_FENCE").unwrap_or(true);
        let unsafe_names = if r.bool_opt("DUCKLAKE_QUOTED_COLUMNS").unwrap_or(false) {
            crate::sink::prepare::UnsafeNames::Quote
        } else {
            crate::sink::prepare::UnsafeNames::DeadLetter
        };
        let lease_s = r.positive_u64("DUCKLAKE_PARTITION_LEASE_S", 60);
        if lease_s < 3 {
            r.errors.push(
                "DUCKLAKE_PARTITION_LEASE_S",
                format!("must be at least 3 seconds (got {lease_s})"),
            );
        }
        let partition_lease = std::time::Duration::from_secs(lease_s);
        let lease_owner = r
            .optional("POD_NAME")
            .or_else(|| r.optional("HOSTNAME"))
            .unwrap_or_else(|| format!("writer-{}", uuid::Uuid::new_v4()));
        let variant_columns = super::variant::parse(r);
        let max_columns = r.positive_u64(
            "MILLPOND_MAX_COLUMNS",
            millpond_shared::config::DEFAULT_MAX_COLUMNS as u64,
        ) as usize;
        let home = r.env().get("HOME").unwrap_or("/root").to_owned();
        let extension_dir = PathBuf::from(r.string_or(
            "DUCKDB_EXTENSION_DIR",
            &format!("{home}/.cache/millpond/duckdb-extensions"),
        ));
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
                let data = r.required("DUCKLAKE_DATA_PATH").unwrap_or_default();
                let catalog = password.map(|password| Catalog::Postgres {
                    host,
                    port,
                    database,
                    username,
                    password,
                });
                (catalog, data)
            }
        };
        if data_path.contains('\'') {
            r.errors
                .push("DUCKLAKE_DATA_PATH", "must not contain a single quote");
        }
        let s3 = parse_s3(r, data_path.starts_with("s3://"));
        Some(DuckLakeConfig {
            table: table?,
            schema: schema?,
            data_path,
            connection,
            catalog: catalog?,
            max_retry_count,
            partition_by,
            s3,
            memory_limit,
            extension_dir,
            row_group_bytes,
            dead_letter_table: dead_letter_table?,
            partition_fence,
            unsafe_names,
            partition_lease,
            lease_owner,
            max_columns,
            variant_columns,
        })
    }

    /// The target table as people write it, for logs and acknowledgements.
    pub fn qualified_table(&self) -> String {
        format!("lake.{}.{}", self.schema, self.table)
    }

    /// `name` in the lake's schema, quoted for SQL.
    pub fn sql_name(&self, name: &str) -> String {
        format!("lake.{}.{}", ident(&self.schema), ident(name))
    }

    /// The target table, quoted for SQL.
    pub fn sql_table(&self) -> String {
        self.sql_name(&self.table)
    }

    pub fn is_embedded(&self) -> bool {
        matches!(self.catalog, Catalog::Embedded { .. })
    }
}

/// DUCKLAKE_PARTITION_BY as the SQL of `SET PARTITIONED BY (...)`: a comma
/// list of keys, each a column or year/month/day/hour of a column (the
/// transforms DuckLake partitions by), every column name quoted.
fn partition_sql(value: &str) -> Result<String, String> {
    const TRANSFORMS: [&str; 4] = ["year", "month", "day", "hour"];
    let mut keys = Vec::new();
    for item in value.split(',').map(str::trim) {
        let key = match item.split_once('(') {
            None if is_safe_identifier(item) => ident(item),
            Some((f, rest)) => {
                let f = f.trim().to_ascii_lowercase();
                let col = rest.strip_suffix(')').map(str::trim).unwrap_or("");
                if !TRANSFORMS.contains(&f.as_str()) || !is_safe_identifier(col) {
                    return Err(format!(
                        "{item:?} is not a column or year(col), month(col), day(col), hour(col)"
                    ));
                }
                format!("{f}({})", ident(col))
            }
            None => {
                return Err(format!(
                    "{item:?} is not a column or year(col), month(col), day(col), hour(col)"
                ))
            }
        };
        keys.push(key);
    }
    Ok(keys.join(", "))
}

/// The embedded catalog: DUCKLAKE_CATALOG_TYPE (`sqlite`, the default, or
/// `duckdb`) and DUCKLAKE_CATALOG_PATH (default `<lake dir>/catalog.sqlite`).
/// Without an explicit type, a path ending in `.ducklake`/`.duckdb`, or a
/// lake folder that already holds an earlier version's `catalog.ducklake`,
/// keeps the DuckDB-file format, so upgrading never starts an empty lake.
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
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn parse(pairs: &[(&str, &str)]) -> Result<DuckLakeConfig, Vec<String>> {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let cfg = DuckLakeConfig::parse(&mut r);
        match r.finish() {
            Ok(()) => Ok(cfg.unwrap()),
            Err(e) => Err(e.vars().into_iter().map(str::to_owned).collect()),
        }
    }

    #[test]
    fn embedded_default_needs_only_a_table() {
        let cfg = parse(&[("DUCKLAKE_TABLE", "events")]).unwrap();
        assert!(cfg.is_embedded());
        assert_eq!(cfg.max_retry_count, 100);
        assert_eq!(cfg.qualified_table(), "lake.main.events");
        assert!(cfg.s3.is_none());
    }

    fn embedded(cfg: &DuckLakeConfig) -> (PathBuf, EmbeddedFormat) {
        match &cfg.catalog {
            Catalog::Embedded { path, format } => (path.clone(), *format),
            Catalog::Postgres { .. } => panic!("not embedded"),
        }
    }

    #[test]
    fn embedded_catalog_is_sqlite_unless_told_or_already_duckdb() {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().to_str().unwrap();
        let base = [("DUCKLAKE_TABLE", "events"), ("MILLPOND_LAKE_DIR", lake)];
        let cfg = parse(&base).unwrap();
        assert_eq!(
            embedded(&cfg),
            (dir.path().join("catalog.sqlite"), EmbeddedFormat::Sqlite)
        );
        let cfg = parse(&[base[0], base[1], ("DUCKLAKE_CATALOG_TYPE", "DuckDB")]).unwrap();
        assert_eq!(
            embedded(&cfg),
            (dir.path().join("catalog.ducklake"), EmbeddedFormat::DuckDb)
        );
        let cfg = parse(&[base[0], ("DUCKLAKE_CATALOG_PATH", "/x/old.ducklake")]).unwrap();
        assert_eq!(
            embedded(&cfg),
            (PathBuf::from("/x/old.ducklake"), EmbeddedFormat::DuckDb)
        );
        // A lake folder written by an earlier version keeps its catalog.
        std::fs::write(dir.path().join("catalog.ducklake"), b"").unwrap();
        assert_eq!(
            embedded(&parse(&base).unwrap()),
            (dir.path().join("catalog.ducklake"), EmbeddedFormat::DuckDb)
        );
    }

    #[test]
    fn dead_letter_table_defaults_beside_the_table_and_can_be_turned_off() {
        let cfg = parse(&[("DUCKLAKE_TABLE", "events")]).unwrap();
        assert_eq!(
            cfg.dead_letter_table.as_deref(),
            Some("events_dead_letters")
        );
        let cfg = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_DEAD_LETTER_TABLE", "OFF"),
        ])
        .unwrap();
        assert_eq!(cfg.dead_letter_table, None);
        for bad in ["events", "_millpond_offsets", "bad-name"] {
            let errs = parse(&[
                ("DUCKLAKE_TABLE", "events"),
                ("DUCKLAKE_DEAD_LETTER_TABLE", bad),
            ])
            .unwrap_err();
            assert_eq!(errs, ["DUCKLAKE_DEAD_LETTER_TABLE"], "{bad}");
        }
    }

    #[test]
    fn partition_keys_are_parsed_and_quoted_at_startup() {
        let cfg = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            (
                "DUCKLAKE_PARTITION_BY",
                "year(_inserted_at), MONTH( _inserted_at ),team_id",
            ),
        ])
        .unwrap();
        assert_eq!(
            cfg.partition_by.as_deref(),
            Some("year(\"_inserted_at\"), month(\"_inserted_at\"), \"team_id\"")
        );
        for bad in ["year(x); drop", "week(ts)", "year(a,b)", "a b", "year(ts"] {
            let errs =
                parse(&[("DUCKLAKE_TABLE", "events"), ("DUCKLAKE_PARTITION_BY", bad)]).unwrap_err();
            assert_eq!(errs, ["DUCKLAKE_PARTITION_BY"], "{bad:?}");
        }
    }

    #[test]
    fn catalog_type_is_checked() {
        let errs = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_CATALOG_TYPE", "postgres"),
        ])
        .unwrap_err();
        assert_eq!(errs, ["DUCKLAKE_CATALOG_TYPE"]);
        let errs = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_RDS_PASSWORD", "pw"),
            ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
            ("DUCKLAKE_CATALOG_TYPE", "sqlite"),
        ])
        .unwrap_err();
        assert_eq!(errs, ["DUCKLAKE_CATALOG_TYPE"]);
    }

    #[test]
    fn postgres_mode_reports_every_problem() {
        let errs = parse(&[
            ("DUCKLAKE_TABLE", "bad-name"),
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_DATA_PATH", "s3://bucket/x/"),
            ("DUCKLAKE_MAX_RETRY_COUNT", "0"),
            ("DUCKLAKE_PARTITION_BY", "year(x); drop"),
            ("DUCKDB_S3_URL_STYLE", "weird"),
        ])
        .unwrap_err();
        for var in [
            "DUCKLAKE_TABLE",
            "DUCKLAKE_RDS_PASSWORD",
            "DUCKLAKE_MAX_RETRY_COUNT",
            "DUCKLAKE_PARTITION_BY",
            "DUCKDB_S3_ACCESS_KEY_ID",
            "DUCKDB_S3_SECRET_ACCESS_KEY",
            "DUCKDB_S3_URL_STYLE",
        ] {
            assert!(errs.iter().any(|e| e == var), "{var} missing from {errs:?}");
        }
    }

    #[test]
    fn embedded_catalog_refuses_remote_data() {
        let errs = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_DATA_PATH", "s3://b/x/"),
        ])
        .unwrap_err();
        assert!(errs.contains(&"DUCKLAKE_RDS_HOST".to_owned()), "{errs:?}");
    }

    #[test]
    fn debug_output_hides_the_password() {
        let cfg = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_RDS_PASSWORD", "sup3rsecret"),
            ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
        ])
        .unwrap();
        assert!(!format!("{cfg:?}").contains("sup3rsecret"));
    }
}
