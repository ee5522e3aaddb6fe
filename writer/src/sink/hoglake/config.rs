//! HOGLAKE_* variables (millpond.md, "Hoglake" configuration table).
use std::time::Duration;

use millpond_hoglake::layout::{parse_partition_by, Layout};
use millpond_shared::config::{EnvReader, Secret, SecretUrl};
use millpond_shared::retry::Ladder;

use crate::sink::dead_letters;

/// The liveness probe fails a pod after this long without a poll; one
/// flush inside `write` (all attempts, their timeouts and the waits between
/// them) must fit under it. [`HoglakeConfig::write_budget`] holds it.
pub const LIVENESS_BUDGET: Duration = Duration::from_secs(480);

/// What gives a write its deadline, for the error that says it was spent.
pub const WRITE_BUDGET_SET_BY: &str = "HOGLAKE_MAX_RETRY_COUNT x HOGLAKE_REQUEST_TIMEOUT_S plus the waits between attempts, at most the 480 s liveness budget";

/// The ladder of the publish path with `attempts` attempts
/// (HOGLAKE_MAX_RETRY_COUNT): 1 s doubling, capped at 30 s
/// ([`millpond_shared::retry::MAX_DELAY`]), up to +25%.
pub fn ladder(attempts: u32) -> Ladder {
    Ladder {
        attempts,
        base: Duration::from_secs(1),
        jitter: 0.25,
    }
}

#[derive(Debug, Clone)]
pub struct HoglakeConfig {
    /// Control-plane base URL (HOGLAKE_URL; `/v1` is appended by the client),
    /// shown masked only.
    pub url: SecretUrl,
    pub catalog: String,
    pub namespace: String,
    pub table: String,
    /// HOGLAKE_DATA_PATH: a missing catalog is created with it.
    pub data_path: Option<String>,
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    /// Both keys or neither (neither = the SDK's default credential chain).
    pub s3_keys: Option<(Secret, Secret)>,
    /// HOGLAKE_MAX_RETRY_COUNT: attempts of one publish, the first included.
    pub max_retry_count: u32,
    /// HOGLAKE_REQUEST_TIMEOUT_S.
    pub request_timeout: Duration,
    /// HOGLAKE_PARTITION_BY and MILLPOND_SORT_BY, declared on the table.
    pub layout: Layout,
    /// HOGLAKE_DEAD_LETTER_TABLE (default `<table>_dead_letters`, `off`
    /// to count and discard dead letters instead).
    pub dead_letter_table: Option<String>,
    /// HOGLAKE_PARTITION_FENCE (default on): every commit is guarded by the
    /// offsets tables of its Kafka partitions, so two owners of a partition
    /// (a replica-count change, a stuck old pod) never publish an offset
    /// twice. Needs a server with `idempotent-mutation-v1`.
    pub partition_fence: bool,
}

/// Empty or whitespace-only counts as unset (a chart renders `""` for an
/// absent value).
fn non_empty(r: &EnvReader<'_>, name: &str) -> Option<String> {
    r.optional(name).filter(|v| !v.trim().is_empty())
}

fn required_name(r: &mut EnvReader<'_>, name: &str) -> Option<String> {
    let v = r.required(name)?;
    if v.trim().is_empty() {
        r.errors.push(name, "must not be empty");
        return None;
    }
    if v.contains('/') || v.contains('.') || v.chars().any(char::is_control) {
        r.errors.push(
            name,
            format!("must be a plain name without '/', '.' or control characters (got {v:?})"),
        );
        return None;
    }
    Some(v)
}

/// The longest one publish can take with `attempts` tries of `timeout`
/// each and the ladder's largest waits between them.
pub fn worst_case_publish(attempts: u32, timeout: Duration) -> Duration {
    let ladder = ladder(attempts);
    (0..attempts)
        .filter_map(|failed| ladder.longest_delay(failed))
        .fold(timeout.saturating_mul(attempts), Duration::saturating_add)
}

impl HoglakeConfig {
    pub fn parse(r: &mut EnvReader<'_>) -> Option<Self> {
        let url = r.required("HOGLAKE_URL").and_then(|u| {
            SecretUrl::parse(&u)
                .map_err(|e| {
                    r.errors.push(
                        "HOGLAKE_URL",
                        format!("{e}: the URL of the hoglake control plane"),
                    )
                })
                .ok()
        });
        let catalog = required_name(r, "HOGLAKE_CATALOG");
        let namespace = required_name(r, "HOGLAKE_NAMESPACE");
        let table = required_name(r, "HOGLAKE_TABLE");
        let data_path = non_empty(r, "HOGLAKE_DATA_PATH");
        if let Some(p) = &data_path {
            // Frozen into the catalog row at creation: refuse typos early.
            if millpond_hoglake::store::split_s3_uri(p).is_none() {
                r.errors.push(
                    "HOGLAKE_DATA_PATH",
                    format!("must be an s3://bucket/prefix URI (got {p:?})"),
                );
            }
        }
        let s3_endpoint = non_empty(r, "HOGLAKE_S3_ENDPOINT");
        let s3_region = non_empty(r, "HOGLAKE_S3_REGION");
        let access = non_empty(r, "HOGLAKE_S3_ACCESS_KEY").map(Secret::new);
        let secret = non_empty(r, "HOGLAKE_S3_SECRET_KEY").map(Secret::new);
        let s3_keys = match (access, secret) {
            (Some(a), Some(s)) => Some((a, s)),
            (None, None) => None,
            (Some(_), None) => {
                r.errors.push(
                    "HOGLAKE_S3_SECRET_KEY",
                    "is required when HOGLAKE_S3_ACCESS_KEY is set (set both keys, or neither to use the default credential chain)",
                );
                None
            }
            (None, Some(_)) => {
                r.errors.push(
                    "HOGLAKE_S3_ACCESS_KEY",
                    "is required when HOGLAKE_S3_SECRET_KEY is set (set both keys, or neither to use the default credential chain)",
                );
                None
            }
        };
        // 7, not the original's 8: with HOGLAKE_REQUEST_TIMEOUT_S's 45 s the
        // budget (384 s) fits ingest's default send deadline (420 s) with
        // the margin (millpond_proto::WRITE_MARGIN); 8 came to 459 s.
        let max_retry_count = r.positive_u64("HOGLAKE_MAX_RETRY_COUNT", 7);
        let timeout_s = r.positive_u64(
            "HOGLAKE_REQUEST_TIMEOUT_S",
            millpond_hoglake::catalog::DEFAULT_REQUEST_TIMEOUT.as_secs(),
        );
        let max_retry_count = match u32::try_from(max_retry_count) {
            Ok(n) => n,
            Err(_) => {
                r.errors.push("HOGLAKE_MAX_RETRY_COUNT", "is too large");
                1
            }
        };
        let request_timeout = Duration::from_secs(timeout_s);
        let worst = worst_case_publish(max_retry_count, request_timeout);
        if worst > LIVENESS_BUDGET {
            r.errors.push(
                "HOGLAKE_MAX_RETRY_COUNT",
                format!(
                    "HOGLAKE_MAX_RETRY_COUNT ({max_retry_count}) x HOGLAKE_REQUEST_TIMEOUT_S ({timeout_s}) plus the waits between attempts can hold one flush for {}s, over the {}s liveness budget; lower one of them",
                    worst.as_secs(),
                    LIVENESS_BUDGET.as_secs()
                ),
            );
        }
        if non_empty(r, "MILLPOND_VARIANT_COLUMNS").is_some() {
            r.errors.push(
                "MILLPOND_VARIANT_COLUMNS",
                "hoglake has no variant type; unset it for MILLPOND_DESTINATION=hoglake",
            );
        }
        let partition_by = match non_empty(r, "HOGLAKE_PARTITION_BY") {
            None => Vec::new(),
            Some(text) => parse_partition_by(&text).unwrap_or_else(|e| {
                r.errors.push("HOGLAKE_PARTITION_BY", e);
                Vec::new()
            }),
        };
        let sort_by = millpond_shared::config::sort_by(r);
        let dead_letter_table =
            dead_letters::table_setting(r, "HOGLAKE_DEAD_LETTER_TABLE", table.as_deref(), &[]);
        let partition_fence = r.bool_opt("HOGLAKE_PARTITION_FENCE").unwrap_or(true);
        Some(HoglakeConfig {
            url: url?,
            catalog: catalog?,
            namespace: namespace?,
            table: table?,
            data_path,
            s3_endpoint,
            s3_region,
            s3_keys,
            max_retry_count,
            request_timeout,
            layout: Layout {
                partition_by,
                sort_by,
            },
            dead_letter_table: dead_letter_table?,
            partition_fence,
        })
    }

    /// How long one flush's write may take, everything included (table
    /// resolution, uploads, the commit, every retry of the publisher's and
    /// the writer's): the worst case the config check allowed, so the check
    /// holds for real.
    pub fn write_budget(&self) -> Duration {
        worst_case_publish(self.max_retry_count, self.request_timeout).min(LIVENESS_BUDGET)
    }

    /// `namespace.table`, for logs and receipts.
    pub fn qualified_table(&self) -> String {
        format!("{}.{}", self.namespace, self.table)
    }

    /// The publisher's ladder (HOGLAKE_MAX_RETRY_COUNT attempts).
    pub fn ladder(&self) -> Ladder {
        ladder(self.max_retry_count)
    }

    pub fn s3(&self) -> millpond_hoglake::store::S3Config {
        millpond_hoglake::store::S3Config {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            access_key_id: self.s3_keys.as_ref().map(|(a, _)| a.expose().to_string()),
            secret_access_key: self.s3_keys.as_ref().map(|(_, s)| s.expose().to_string()),
        }
    }

    /// Removes the static keys from a message (libraries sometimes echo them).
    pub fn scrub(&self, text: &str) -> String {
        match &self.s3_keys {
            Some((a, s)) => s.scrub(&a.scrub(text)),
            None => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn parse(pairs: &[(&str, &str)]) -> Result<HoglakeConfig, Vec<String>> {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let cfg = HoglakeConfig::parse(&mut r);
        match r.finish() {
            Ok(()) => Ok(cfg.unwrap()),
            Err(e) => Err(e.vars().iter().map(|v| v.to_string()).collect()),
        }
    }

    const BASE: [(&str, &str); 4] = [
        ("HOGLAKE_URL", "http://hoglake:8080"),
        ("HOGLAKE_CATALOG", "main"),
        ("HOGLAKE_NAMESPACE", "analytics"),
        ("HOGLAKE_TABLE", "events"),
    ];

    #[test]
    fn minimal_config_has_the_documented_defaults() {
        let cfg = parse(&BASE).unwrap();
        assert_eq!(cfg.max_retry_count, 7);
        assert_eq!(cfg.request_timeout, Duration::from_secs(45));
        assert!(cfg.s3_keys.is_none() && cfg.data_path.is_none());
        assert_eq!(cfg.qualified_table(), "analytics.events");
        // 7 x 45 s plus the ladder's longest waits (1.25 + 2.5 + 5 + 10 +
        // 20 + 30 s); a write's deadline is that worst case.
        let worst = worst_case_publish(7, Duration::from_secs(45));
        assert_eq!(worst, Duration::from_millis(383_750));
        assert_eq!(cfg.write_budget(), worst);
        // Ingest's default send deadline holds it (the default pair starts).
        millpond_proto::WriterBudget::new(worst, WRITE_BUDGET_SET_BY)
            .held_by(Duration::from_secs(420))
            .unwrap();
        assert!(WRITE_BUDGET_SET_BY.contains(&format!("{} s", LIVENESS_BUDGET.as_secs())));
    }

    /// The publish ladder: 1 s doubling, capped at 30 s, jittered up by at
    /// most 25% and never past the cap.
    #[test]
    fn the_ladder_doubles_caps_and_jitters_up() {
        let l = ladder(8);
        let s = Duration::from_secs;
        for _ in 0..100 {
            for (failed, low) in [(0, s(1)), (1, s(2)), (4, s(16)), (5, s(30)), (6, s(30))] {
                let d = l.delay(failed, None).unwrap();
                assert!(
                    d >= low && d <= low.mul_f64(1.25).min(s(30)),
                    "{failed}: {d:?}"
                );
            }
        }
        assert_eq!(l.delay(7, None), None, "8 attempts in all");
    }

    #[test]
    fn every_required_variable_is_named() {
        let errs = parse(&[]).unwrap_err();
        for v in [
            "HOGLAKE_URL",
            "HOGLAKE_CATALOG",
            "HOGLAKE_NAMESPACE",
            "HOGLAKE_TABLE",
        ] {
            assert!(errs.contains(&v.to_string()), "{v} not in {errs:?}");
        }
    }

    #[test]
    fn bad_values_name_their_variable() {
        let mut env = BASE.to_vec();
        env[0] = ("HOGLAKE_URL", "hoglake:8080");
        env.push(("HOGLAKE_DATA_PATH", "bucket/prefix"));
        env.push(("HOGLAKE_S3_ACCESS_KEY", "AKIA123"));
        env.push(("HOGLAKE_MAX_RETRY_COUNT", "0"));
        env.push(("MILLPOND_VARIANT_COLUMNS", "properties"));
        let errs = parse(&env).unwrap_err();
        for v in [
            "HOGLAKE_URL",
            "HOGLAKE_DATA_PATH",
            "HOGLAKE_S3_SECRET_KEY",
            "HOGLAKE_MAX_RETRY_COUNT",
            "MILLPOND_VARIANT_COLUMNS",
        ] {
            assert!(errs.contains(&v.to_string()), "{v} not in {errs:?}");
        }
    }

    #[test]
    fn retries_times_timeout_over_the_liveness_budget_is_refused() {
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_MAX_RETRY_COUNT", "10"));
        assert_eq!(parse(&env).unwrap_err(), vec!["HOGLAKE_MAX_RETRY_COUNT"]);
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_REQUEST_TIMEOUT_S", "10"));
        env.push(("HOGLAKE_MAX_RETRY_COUNT", "12"));
        assert!(parse(&env).is_ok());
    }

    #[test]
    fn keys_are_a_pair_and_never_shown() {
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_S3_ACCESS_KEY", "AKIAEXAMPLEKEY"));
        env.push(("HOGLAKE_S3_SECRET_KEY", "s3cr3t-value"));
        env.push(("HOGLAKE_S3_ENDPOINT", " "));
        env.push(("HOGLAKE_DATA_PATH", "s3://bucket/lake"));
        let cfg = parse(&env).unwrap();
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("AKIAEXAMPLEKEY") && !shown.contains("s3cr3t-value"),
            "{shown}"
        );
        assert!(cfg.s3_endpoint.is_none(), "whitespace counts as unset");
        assert_eq!(
            cfg.scrub("key AKIAEXAMPLEKEY / s3cr3t-value"),
            "key *** / ***"
        );
        // Empty keys count as unset: the default credential chain.
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_S3_ACCESS_KEY", ""));
        env.push(("HOGLAKE_S3_SECRET_KEY", ""));
        assert!(parse(&env).unwrap().s3_keys.is_none());
    }

    #[test]
    fn layout_and_dead_letter_table_are_read_and_checked() {
        let mut env = BASE.to_vec();
        env.push((
            "HOGLAKE_PARTITION_BY",
            "team_id, month(_inserted_at), bucket(user_id, 16)",
        ));
        env.push(("MILLPOND_SORT_BY", "team_id,timestamp"));
        let cfg = parse(&env).unwrap();
        assert_eq!(
            millpond_hoglake::layout::render(&cfg.layout.partition_by),
            "team_id,month(_inserted_at),bucket(user_id, 16)"
        );
        assert_eq!(cfg.layout.sort_by, ["team_id", "timestamp"]);
        assert_eq!(
            cfg.dead_letter_table.as_deref(),
            Some(format!("{}_dead_letters", cfg.table).as_str())
        );
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_DEAD_LETTER_TABLE", "OFF"));
        assert_eq!(parse(&env).unwrap().dead_letter_table, None);
        let mut env = BASE.to_vec();
        env.push(("HOGLAKE_PARTITION_BY", "week(ts)"));
        env.push(("MILLPOND_SORT_BY", "a-b"));
        env.push(("HOGLAKE_DEAD_LETTER_TABLE", "bad name"));
        assert_eq!(
            parse(&env).unwrap_err(),
            vec![
                "HOGLAKE_PARTITION_BY",
                "MILLPOND_SORT_BY",
                "HOGLAKE_DEAD_LETTER_TABLE"
            ]
        );
    }
}
