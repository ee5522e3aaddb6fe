//! DUCKLAKE_* variables of the writer: the target table, its layout and
//! the writer's own settings. Where the lake is (catalog, data path, S3,
//! DuckDB settings) is `LakeConfig`, shared with the maintenance tool.
use millpond_shared::config::EnvReader;

use super::lake_config::matches;
pub use super::lake_config::{Catalog, EmbeddedFormat, LakeConfig, S3Config};
pub use super::names::{LAST_RECORDS_TABLE, OFFSETS_TABLE, RESERVED_COLUMNS};
use super::partition_by::PartitionBy;
use super::spool::private_dir;
use super::sql::ident;

#[derive(Debug, Clone)]
pub struct DuckLakeConfig {
    pub table: String,
    pub schema: String,
    /// Where the lake is and how a session reaches it.
    pub lake: LakeConfig,
    /// DUCKLAKE_PARTITION_BY, applied with `SET PARTITIONED BY` on the
    /// first write of every session (partition_by.rs has the grammar).
    pub partition_by: Option<PartitionBy>,
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
    /// Who holds leases: this process start (see lease_owner.rs).
    pub lease_owner: super::lease_owner::LeaseOwner,
    /// DUCKLAKE_QUOTED_COLUMNS (default false): keys that are not safe
    /// identifiers become quoted columns instead of dead letters.
    pub unsafe_names: crate::sink::prepare::UnsafeNames,
    /// MILLPOND_MAX_COLUMNS: the most payload columns the table grows to;
    /// values of further new keys become dead letters.
    pub max_columns: usize,
    /// MILLPOND_VARIANT_COLUMNS: JSON text columns also written to a
    /// `{name}_variant VARIANT` companion.
    pub variant_columns: Vec<String>,
    /// DUCKLAKE_FILES_FROM_BYTES (default 8MB): Arrow bytes of a streamed
    /// flush held before the rest goes to Parquet files as it arrives
    /// (`streamed`); a smaller flush is inserted by DuckDB.
    pub files_from_bytes: usize,
    /// DUCKLAKE_COMMIT_LOCK_WAIT_MS (default 10000, 0 for none): how long a
    /// write transaction on a Postgres catalog waits for its turn to
    /// commit before going on without it (commit_lock.rs).
    pub commit_lock_wait: Option<std::time::Duration>,
    /// MILLPOND_SPOOL_DIR (default `$TMPDIR/millpond-writer-spool-<uid>`):
    /// where a streamed flush's files wait for their upload to an S3 data
    /// path; a private folder of the writer's (spool/private_dir.rs).
    pub spool_dir: std::path::PathBuf,
    /// DUCKLAKE_WRITE_BUDGET_S (default 300): the whole write's deadline.
    /// The retry ladders start no attempt and no wait past it; ingest's
    /// send deadline must hold it (millpond_proto::WriterBudget).
    pub write_budget: std::time::Duration,
}

/// What gives a DuckLake write its deadline, for the errors that name it.
pub const WRITE_BUDGET_SET_BY: &str =
    "DUCKLAKE_WRITE_BUDGET_S: no retry or wait of a DuckLake write starts past it";

impl DuckLakeConfig {
    pub fn parse(r: &mut EnvReader<'_>) -> Option<Self> {
        let table_raw = r.required("DUCKLAKE_TABLE");
        let table = r.safe_identifier("DUCKLAKE_TABLE", table_raw);
        if let Some(own) = [OFFSETS_TABLE, LAST_RECORDS_TABLE]
            .into_iter()
            .find(|t| table.as_deref() == Some(*t))
        {
            r.errors.push(
                "DUCKLAKE_TABLE",
                format!("{own} is used by Millpond itself"),
            );
        }
        let schema_raw = Some(r.string_or("DUCKLAKE_SCHEMA", "main"));
        let schema = r.safe_identifier("DUCKLAKE_SCHEMA", schema_raw);
        let partition_by = match r
            .optional("DUCKLAKE_PARTITION_BY")
            .map(|p| PartitionBy::parse(&p))
        {
            Some(Err(e)) => {
                r.errors.push("DUCKLAKE_PARTITION_BY", e);
                None
            }
            Some(Ok(sql)) => Some(sql),
            None => None,
        };
        // Measured: 16MB row groups cut the writer's peak RSS at 100 MiB
        // flushes from ~420 MB to ~260 MB and its CPU by a quarter.
        let row_group_bytes = Some(r.string_or("DUCKLAKE_ROW_GROUP_BYTES", "16MB"))
            .filter(|v| !v.eq_ignore_ascii_case("default"));
        if let Some(m) = &row_group_bytes {
            // DuckDB reads it for its inserts, the spool for its files.
            if !matches(m, |c| c.is_ascii_alphanumeric() || c == '.')
                || parse_size::parse_size(m).is_err()
                || parse_size::parse_size(m) == Ok(0)
            {
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
            &[OFFSETS_TABLE, LAST_RECORDS_TABLE],
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
        let lease_owner = super::lease_owner::LeaseOwner::new(
            r.optional("POD_NAME").or_else(|| r.optional("HOSTNAME")),
            r.optional("POD_UID"),
        );
        let variant_columns = super::variant::parse(r);
        let files_from_bytes =
            r.size("DUCKLAKE_FILES_FROM_BYTES", "8MB", 0..=u64::MAX, "") as usize;
        let commit_lock_wait = r.parse_or("DUCKLAKE_COMMIT_LOCK_WAIT_MS", 10_000u64, |_| Ok(()));
        let commit_lock_wait =
            (commit_lock_wait > 0).then(|| std::time::Duration::from_millis(commit_lock_wait));
        let spool_dir = spool_dir(r);
        let write_budget_s = r.positive_u64("DUCKLAKE_WRITE_BUDGET_S", 300);
        let liveness = crate::sink::hoglake::config::LIVENESS_BUDGET.as_secs();
        if write_budget_s >= liveness {
            r.errors.push(
                "DUCKLAKE_WRITE_BUDGET_S",
                format!("must be below the {liveness} s liveness budget (got {write_budget_s})"),
            );
        }
        let max_columns = r.positive_u64(
            "MILLPOND_MAX_COLUMNS",
            millpond_shared::config::DEFAULT_MAX_COLUMNS as u64,
        ) as usize;
        // One DuckDB thread unless told otherwise: the pod's other core is
        // ingest's, and on the anchor workload two threads cost 15 % more
        // CPU and ~40 MB more memory per insert for a faster write.
        let lake = LakeConfig::parse(r).map(|mut lake| {
            lake.threads.get_or_insert(1);
            lake
        });
        Some(DuckLakeConfig {
            table: table?,
            schema: schema?,
            lake: lake?,
            partition_by,
            row_group_bytes,
            dead_letter_table: dead_letter_table?,
            partition_fence,
            unsafe_names,
            partition_lease,
            lease_owner,
            max_columns,
            variant_columns,
            files_from_bytes,
            commit_lock_wait,
            spool_dir,
            write_budget: std::time::Duration::from_secs(write_budget_s),
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
        self.lake.is_embedded()
    }
}

/// MILLPOND_SPOOL_DIR, an absolute path; one already there must be a
/// private folder of this user. Unset: a folder of this user's own in
/// TMPDIR. Either is made, or checked again, when the sink starts on an
/// S3 data path.
fn spool_dir(r: &mut EnvReader<'_>) -> std::path::PathBuf {
    const VAR: &str = "MILLPOND_SPOOL_DIR";
    let Some(set) = r.optional(VAR).filter(|v| !v.trim().is_empty()) else {
        let tmp = r.optional("TMPDIR").filter(|v| !v.is_empty());
        return private_dir::default_base(std::path::Path::new(tmp.as_deref().unwrap_or("/tmp")));
    };
    let path = std::path::PathBuf::from(set);
    if !path.is_absolute() {
        r.errors.push(
            VAR,
            format!("must be an absolute path (got {:?})", path.display()),
        );
    } else if std::fs::symlink_metadata(&path).is_ok() {
        if let Err(why) = private_dir::check(&path) {
            r.errors.push(VAR, why);
        }
    }
    path
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

    /// MILLPOND_SPOOL_DIR is checked with the other settings: a relative
    /// path, or a folder there that is not the writer's alone, is refused
    /// naming the variable and the path. Unset, the spool is this user's
    /// own folder in TMPDIR.
    #[test]
    fn the_spool_folder_is_private_or_refused_at_startup() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().to_str().unwrap();
        let cfg = parse(&[("DUCKLAKE_TABLE", "events"), ("TMPDIR", t)]).unwrap();
        assert_eq!(cfg.spool_dir, private_dir::default_base(tmp.path()));
        assert!(cfg.spool_dir.starts_with(tmp.path()));

        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let env = Env::from_pairs([
            ("DUCKLAKE_TABLE", "events"),
            ("MILLPOND_SPOOL_DIR", open.to_str().unwrap()),
        ]);
        let mut r = EnvReader::new(&env);
        DuckLakeConfig::parse(&mut r);
        let errs = r.finish().unwrap_err();
        assert_eq!(errs.vars(), ["MILLPOND_SPOOL_DIR"]);
        let shown = errs.to_string();
        assert!(shown.contains(open.to_str().unwrap()), "{shown}");
        assert!(shown.contains("mode 0777"), "{shown}");

        assert_eq!(
            parse(&[
                ("DUCKLAKE_TABLE", "events"),
                ("MILLPOND_SPOOL_DIR", "spool")
            ])
            .unwrap_err(),
            ["MILLPOND_SPOOL_DIR"]
        );
        // Not there yet: made when the writer starts on an S3 data path.
        let later = tmp.path().join("later");
        let cfg = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("MILLPOND_SPOOL_DIR", later.to_str().unwrap()),
        ])
        .unwrap();
        assert_eq!(cfg.spool_dir, later);
    }

    #[test]
    fn the_writer_runs_one_duckdb_thread_unless_told() {
        let cfg = parse(&[("DUCKLAKE_TABLE", "events")]).unwrap();
        assert_eq!(cfg.lake.threads, Some(1));
        let four = parse(&[("DUCKLAKE_TABLE", "events"), ("DUCKDB_THREADS", "4")]).unwrap();
        assert_eq!(four.lake.threads, Some(4));
        assert_eq!(
            parse(&[("DUCKLAKE_TABLE", "events"), ("DUCKDB_THREADS", "0")]).unwrap_err(),
            ["DUCKDB_THREADS"]
        );
    }

    #[test]
    fn streamed_flushes_go_to_files_past_a_size() {
        let cfg = parse(&[("DUCKLAKE_TABLE", "events")]).unwrap();
        assert_eq!(cfg.files_from_bytes, 8_000_000);
        let cfg = parse(&[
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_FILES_FROM_BYTES", "0"),
        ])
        .unwrap();
        assert_eq!(cfg.files_from_bytes, 0);
        assert_eq!(
            parse(&[
                ("DUCKLAKE_TABLE", "events"),
                ("DUCKLAKE_FILES_FROM_BYTES", "lots"),
                ("DUCKLAKE_ROW_GROUP_BYTES", "16XB"),
            ])
            .unwrap_err(),
            ["DUCKLAKE_ROW_GROUP_BYTES", "DUCKLAKE_FILES_FROM_BYTES"]
        );
        assert_eq!(
            parse(&[
                ("DUCKLAKE_TABLE", "events"),
                ("DUCKLAKE_ROW_GROUP_BYTES", "0")
            ])
            .unwrap_err(),
            ["DUCKLAKE_ROW_GROUP_BYTES"]
        );
    }

    #[test]
    fn embedded_default_needs_only_a_table() {
        let cfg = parse(&[("DUCKLAKE_TABLE", "events")]).unwrap();
        assert!(cfg.is_embedded());
        assert_eq!(cfg.lake.max_retry_count, 100);
        assert_eq!(cfg.qualified_table(), "lake.main.events");
        assert!(cfg.lake.s3.is_none());
    }

    #[test]
    fn the_commit_lock_waits_ten_seconds_unless_told() {
        let wait = |v: Option<&str>| {
            let mut env = vec![("DUCKLAKE_TABLE", "events")];
            env.extend(v.map(|v| ("DUCKLAKE_COMMIT_LOCK_WAIT_MS", v)));
            parse(&env).map(|c| c.commit_lock_wait)
        };
        assert_eq!(wait(None), Ok(Some(std::time::Duration::from_secs(10))));
        assert_eq!(
            wait(Some("250")),
            Ok(Some(std::time::Duration::from_millis(250)))
        );
        assert_eq!(wait(Some("0")), Ok(None));
        assert_eq!(
            wait(Some("-1")),
            Err(vec!["DUCKLAKE_COMMIT_LOCK_WAIT_MS".to_owned()])
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
                "year(_inserted_at), MONTH( _inserted_at ),team_id, bucket(8, distinct_id)",
            ),
        ])
        .unwrap();
        assert_eq!(
            cfg.partition_by.map(|p| p.sql()).as_deref(),
            Some(
                "year(\"_inserted_at\"), month(\"_inserted_at\"), \"team_id\", bucket(8, \"distinct_id\")"
            )
        );
        for bad in [
            "year(x); drop",
            "week(ts)",
            "year(a,b)",
            "a b",
            "year(ts",
            "bucket(a, 4)",
        ] {
            let errs =
                parse(&[("DUCKLAKE_TABLE", "events"), ("DUCKLAKE_PARTITION_BY", bad)]).unwrap_err();
            assert_eq!(errs, ["DUCKLAKE_PARTITION_BY"], "{bad:?}");
        }
        let env = Env::from_pairs([
            ("DUCKLAKE_TABLE", "events"),
            ("DUCKLAKE_PARTITION_BY", "year(ts), minute(ts)"),
        ]);
        let mut r = EnvReader::new(&env);
        DuckLakeConfig::parse(&mut r);
        let text = r.finish().unwrap_err().to_string();
        assert!(
            text.contains("DUCKLAKE_PARTITION_BY") && text.contains("\"minute(ts)\""),
            "{text}"
        );
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
