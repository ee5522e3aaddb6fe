//! What `millpond-lake` reads from the environment: the writer's lake
//! settings (DUCKLAKE_RDS_*, DUCKLAKE_DATA_PATH, DUCKDB_S3_*, ...) through
//! the writer's own parser, plus the metrics exporter's DUCKLAKE_METRICS_*.
use std::time::Duration;

use millpond_shared::config::{CommonConfig, ConfigErrors, Env, EnvReader, SecretUrl};
use millpond_shared::failpoint;

use millpond_writer::lake_api::table_setting;

use crate::metrics::queries::{self, Query};
use millpond_writer::lake_api::{LakeConfig, LAST_RECORDS_TABLE, OFFSETS_TABLE};

/// Default port of the exporter's /metrics (ingest 8000, writer 8001).
pub const DEFAULT_METRICS_PORT: u16 = 8002;

/// How long a run waits for another run's maintenance lock by default
/// (MILLPOND_LAKE_LOCK_WAIT): long enough for a short chain to finish, short
/// enough that a run stuck behind a long one fails its Job the same hour.
pub const DEFAULT_LOCK_WAIT: &str = "5m";

#[derive(Debug, Clone)]
pub struct ToolConfig {
    /// Logging, metric labels (`pipeline`, `broker_source`) and the HTTP
    /// port (DUCKLAKE_METRICS_PORT).
    pub common: CommonConfig,
    pub lake: LakeConfig,
    /// DUCKLAKE_SCHEMA: the schema a bare `--table name` means.
    pub schema: String,
    /// DUCKLAKE_TABLE, when set: the pipeline's table (the default
    /// `pipeline` label, and the owner of DUCKLAKE_DEAD_LETTER_TABLE).
    pub table: Option<String>,
    /// DUCKLAKE_DEAD_LETTER_TABLE for DUCKLAKE_TABLE, when both are set.
    pub dead_letter_table: Option<String>,
    pub metrics: MetricsConfig,
    /// MILLPOND_LAKE_LOCK_WAIT (default 5m; `--lock-wait` overrides it): how
    /// long a changing command waits for the catalog's maintenance lock.
    pub lock_wait: Duration,
    /// MILLPOND_FAILPOINT (test builds only).
    pub failpoint: Option<failpoint::Armed>,
    /// MILLPOND_LAKE_REPORT_PUSH_URL: where each run POSTs its report
    /// (`millpond_lake_run_*`); shown masked only.
    pub report_push_url: Option<SecretUrl>,
    /// MILLPOND_LAKE_RETENTION: the partition retention commands' default
    /// `--older-than` (at least 1h).
    pub retention: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// DUCKLAKE_METRICS_PUSH_URL: where `metrics --once` POSTs; shown
    /// masked only (it may carry a user, a password, a token).
    pub push_url: Option<SecretUrl>,
    /// DUCKLAKE_METRICS_INTERVAL_S (default 60): how often the exporter
    /// reads the catalog.
    pub interval: Duration,
    /// DUCKLAKE_METRICS_SMALL_FILE_BYTES (default 10MiB): files under this
    /// count as compaction debt.
    pub small_file_bytes: u64,
    /// DUCKLAKE_METRICS_CONFIG: the queries of the file it names, checked
    /// (empty when unset).
    pub queries: Vec<Query>,
    /// DUCKLAKE_METRICS_MAX_FAILED_READS (default 3): failed reads in a row
    /// after which /healthz answers 503.
    pub max_failed_reads: u64,
}

/// The default of DUCKLAKE_METRICS_MAX_FAILED_READS: one failed read is a
/// blip (a catalog failover, a Postgres restart); three at the default 60 s
/// interval are three minutes of gauges that no longer move, time for a
/// restart to reconnect from scratch.
pub const DEFAULT_MAX_FAILED_READS: u64 = 3;

impl ToolConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigErrors> {
        let mut r = EnvReader::new(env);
        let table = r.optional("DUCKLAKE_TABLE");
        let table = table.and_then(|t| r.safe_identifier("DUCKLAKE_TABLE", Some(t)));
        let schema_raw = Some(r.string_or("DUCKLAKE_SCHEMA", "main"));
        let schema = r
            .safe_identifier("DUCKLAKE_SCHEMA", schema_raw)
            .unwrap_or_default();
        let common = CommonConfig::parse(
            &mut r,
            "DUCKLAKE_METRICS_PORT",
            DEFAULT_METRICS_PORT,
            table.as_deref().unwrap_or("ducklake"),
        );
        let dead_letter_table = match &table {
            Some(t) => table_setting(
                &mut r,
                "DUCKLAKE_DEAD_LETTER_TABLE",
                Some(t),
                &[OFFSETS_TABLE, LAST_RECORDS_TABLE],
            )
            .flatten(),
            None => None,
        };
        // Always checked here: `shell` runs any SQL it is given, LOAD
        // included, and a tool run does not need the writer's fast start.
        let lake = LakeConfig::parse(&mut r).map(|mut lake| {
            lake.check_extension_signatures = true;
            lake
        });
        let push_url = r.optional("DUCKLAKE_METRICS_PUSH_URL").and_then(|u| {
            SecretUrl::parse(&u)
                .map_err(|e| r.errors.push("DUCKLAKE_METRICS_PUSH_URL", e))
                .ok()
        });
        let interval = Duration::from_secs(r.positive_u64("DUCKLAKE_METRICS_INTERVAL_S", 60));
        let small_file_bytes = match r.optional("DUCKLAKE_METRICS_SMALL_FILE_BYTES") {
            None => 10 << 20,
            Some(v) => parse_size::parse_size(&v).unwrap_or_else(|e| {
                r.errors.push(
                    "DUCKLAKE_METRICS_SMALL_FILE_BYTES",
                    format!("{v:?} is not a size like 10MiB: {e}"),
                );
                0
            }),
        };
        let queries = match r.optional("DUCKLAKE_METRICS_CONFIG") {
            None => Vec::new(),
            Some(path) => queries::load(std::path::Path::new(&path)).unwrap_or_else(|errors| {
                for e in errors {
                    r.errors.push("DUCKLAKE_METRICS_CONFIG", e);
                }
                Vec::new()
            }),
        };
        let max_failed_reads = r.positive_u64(
            "DUCKLAKE_METRICS_MAX_FAILED_READS",
            DEFAULT_MAX_FAILED_READS,
        );
        let wait = r.string_or("MILLPOND_LAKE_LOCK_WAIT", DEFAULT_LOCK_WAIT);
        let lock_wait = crate::units::parse_duration(&wait).unwrap_or_else(|e| {
            r.errors.push("MILLPOND_LAKE_LOCK_WAIT", e);
            Duration::ZERO
        });
        let report_push_url = r.optional("MILLPOND_LAKE_REPORT_PUSH_URL").and_then(|u| {
            SecretUrl::parse(&u)
                .map_err(|e| r.errors.push("MILLPOND_LAKE_REPORT_PUSH_URL", e))
                .ok()
        });
        let retention = r.optional("MILLPOND_LAKE_RETENTION").and_then(|v| {
            crate::units::parse_duration(&v)
                .and_then(crate::retention::check_retention)
                .map_err(|e| r.errors.push("MILLPOND_LAKE_RETENTION", e))
                .ok()
        });
        let failpoint = r.optional("MILLPOND_FAILPOINT").and_then(|spec| {
            failpoint::parse(&spec, failpoint::Process::Lake)
                .map_err(|e| r.errors.push("MILLPOND_FAILPOINT", e))
                .ok()
        });
        r.finish()?;
        Ok(ToolConfig {
            common,
            lake: lake.expect("no errors means the lake config parsed"),
            schema,
            table,
            dead_letter_table,
            metrics: MetricsConfig {
                push_url,
                interval,
                small_file_bytes,
                queries,
                max_failed_reads,
            },
            lock_wait,
            failpoint,
            report_push_url,
            retention,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_no_table_and_reads_the_writers_lake_settings() {
        let cfg = ToolConfig::from_env(&Env::from_pairs([
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_RDS_PASSWORD", "pw"),
            ("DUCKLAKE_DATA_PATH", "s3://lake/events/"),
            ("DUCKDB_S3_ACCESS_KEY_ID", "k"),
            ("DUCKDB_S3_SECRET_ACCESS_KEY", "s"),
        ]))
        .unwrap();
        assert!(!cfg.lake.is_embedded());
        assert_eq!(cfg.lake.data_path, "s3://lake/events/");
        assert_eq!(cfg.common.pipeline, "ducklake");
        assert_eq!(cfg.common.http_port, DEFAULT_METRICS_PORT);
        assert_eq!(cfg.metrics.small_file_bytes, 10 << 20);
        assert_eq!(cfg.dead_letter_table, None);
        assert_eq!(cfg.lock_wait, Duration::from_secs(300));
    }

    #[test]
    fn every_error_is_reported_together() {
        let errs = ToolConfig::from_env(&Env::from_pairs([
            ("DUCKLAKE_TABLE", "bad-name"),
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_METRICS_PUSH_URL", "pushgateway:9091"),
            ("DUCKLAKE_METRICS_SMALL_FILE_BYTES", "10 parsecs"),
            ("DUCKLAKE_METRICS_INTERVAL_S", "0"),
            ("MILLPOND_LAKE_LOCK_WAIT", "soon"),
            ("MILLPOND_LAKE_RETENTION", "30m"),
        ]))
        .unwrap_err();
        let vars = errs.vars();
        for v in [
            "DUCKLAKE_TABLE",
            "DUCKLAKE_RDS_PASSWORD",
            "DUCKLAKE_DATA_PATH",
            "DUCKLAKE_METRICS_PUSH_URL",
            "DUCKLAKE_METRICS_SMALL_FILE_BYTES",
            "DUCKLAKE_METRICS_INTERVAL_S",
            "MILLPOND_LAKE_LOCK_WAIT",
            "MILLPOND_LAKE_RETENTION",
        ] {
            assert!(vars.contains(&v), "{v} missing from {vars:?}");
        }
    }

    #[test]
    fn the_queries_file_is_read_and_its_errors_name_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(
            &good,
            "[[query]]\nname = \"kinds\"\nsql = \"SELECT 'a' AS kind, 1 AS n\"\nvalue = \"n\"\nlabels = [\"kind\"]\n",
        )
        .unwrap();
        let path = good.display().to_string();
        let cfg = ToolConfig::from_env(&Env::from_pairs([(
            "DUCKLAKE_METRICS_CONFIG",
            path.as_str(),
        )]))
        .unwrap();
        assert_eq!(cfg.metrics.queries.len(), 1);
        assert_eq!(cfg.metrics.queries[0].labels, ["kind"]);
        assert_eq!(cfg.metrics.max_failed_reads, DEFAULT_MAX_FAILED_READS);

        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "[[query]]\nname = \"lost\"\nsql = \"SELECT 1 AS n\"\n",
        )
        .unwrap();
        let path = bad.display().to_string();
        let errs = ToolConfig::from_env(&Env::from_pairs([
            ("DUCKLAKE_METRICS_CONFIG", path.as_str()),
            ("DUCKLAKE_METRICS_MAX_FAILED_READS", "0"),
        ]))
        .unwrap_err();
        assert_eq!(
            errs.vars(),
            [
                "DUCKLAKE_METRICS_CONFIG",
                "DUCKLAKE_METRICS_MAX_FAILED_READS"
            ]
        );
        let text = errs.to_string();
        assert!(text.contains("query `lost`: `value` is missing"), "{text}");
        let missing = ToolConfig::from_env(&Env::from_pairs([(
            "DUCKLAKE_METRICS_CONFIG",
            "/nonexistent/q.toml",
        )]))
        .unwrap_err();
        assert_eq!(missing.vars(), ["DUCKLAKE_METRICS_CONFIG"]);
    }

    #[test]
    fn the_tool_always_checks_extension_signatures() {
        for set in ["false", "true"] {
            let env = Env::from_pairs([("DUCKDB_CHECK_EXTENSION_SIGNATURES", set)]);
            let cfg = ToolConfig::from_env(&env).unwrap();
            assert!(cfg.lake.check_extension_signatures, "{set}");
        }
        let unset: [(&str, &str); 0] = [];
        let cfg = ToolConfig::from_env(&Env::from_pairs(unset)).unwrap();
        assert!(cfg.lake.check_extension_signatures);
    }

    #[test]
    fn the_pipelines_table_names_its_dead_letter_table() {
        let cfg = ToolConfig::from_env(&Env::from_pairs([("DUCKLAKE_TABLE", "events")])).unwrap();
        assert_eq!(cfg.common.pipeline, "events");
        assert_eq!(
            cfg.dead_letter_table.as_deref(),
            Some("events_dead_letters")
        );
    }
}
