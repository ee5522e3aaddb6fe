//! Ingest configuration: the core variables of the spec, read once.
use std::time::Duration;

use millpond_shared::config::{CommonConfig, ConfigErrors, Env, EnvReader};
use millpond_shared::failpoint;

mod flush;
mod kafka;
mod kafka_overrides;
mod msk_iam;

pub use flush::FlushConfig;
pub use kafka::{KafkaConfig, OffsetReset};
pub use msk_iam::MskIamConfig;

#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub common: CommonConfig,
    /// Where records come from.
    pub kafka: KafkaConfig,
    /// When a flush is cut.
    pub flush: FlushConfig,
    /// The record stages (limits, coercion, filters, sort).
    pub stages: crate::stages::StageConfig,
    pub replica_count: i32,
    pub ordinal: i32,
    pub destination: String,
    pub table: String,
    /// The writer's Flight address (host:port).
    pub writer_addr: String,
    /// MILLPOND_WRITER_METRICS_URL: the writer's /metrics, appended to
    /// ingest's; `None` when set to `off`.
    pub writer_metrics_url: Option<millpond_shared::config::SecretUrl>,
    /// How long one flush may keep being resent before ingest gives up and
    /// exits; stays under the 480 s liveness budget.
    pub send_deadline: Duration,
    /// MILLPOND_TOPIC_EPOCH: the lake records this topic's offsets apart
    /// from an earlier topic of the same name (see [`crate::epoch`]).
    pub topic_epoch: Option<String>,
    /// Test hook (MILLPOND_FAILPOINT, builds with the feature `failpoints`
    /// only): `kill_after_ack` (see `millpond_shared::failpoint`).
    pub failpoint: Option<failpoint::Armed>,
}

/// Liveness: unhealthy when the last poll is older than this.
pub const LIVENESS: Duration = Duration::from_secs(480);

/// `millpond-3` -> 3; None without a trailing number.
pub fn ordinal_from(name: &str) -> Option<i32> {
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    if digits.is_empty() || !name[..name.len() - digits.len()].ends_with('-') {
        return None;
    }
    digits.chars().rev().collect::<String>().parse().ok()
}

fn destination_table(r: &mut EnvReader<'_>, destination: &str) -> String {
    let var = if destination == "hoglake" {
        "HOGLAKE_TABLE"
    } else {
        "DUCKLAKE_TABLE"
    };
    r.required(var).unwrap_or_default()
}

impl IngestConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigErrors> {
        let mut r = EnvReader::new(env);
        let bootstrap_servers = r.required("KAFKA_BOOTSTRAP_SERVERS").unwrap_or_default();
        let topic = r.required("KAFKA_TOPIC").unwrap_or_default();
        let replica_count = match r.required("REPLICA_COUNT") {
            Some(_) => r.parse_or("REPLICA_COUNT", 1i32, |v| {
                if *v > 0 {
                    Ok(())
                } else {
                    Err("must be a positive integer".into())
                }
            }),
            None => 1,
        };
        let destination = r.choice("MILLPOND_DESTINATION", "ducklake", &["ducklake", "hoglake"]);
        let table = destination_table(&mut r, &destination);
        let common = CommonConfig::parse(&mut r, "MILLPOND_HTTP_PORT", 8000, &table);
        let pod = r
            .optional("POD_NAME")
            .or_else(|| r.optional("HOSTNAME"))
            .unwrap_or_else(|| "millpond-0".into());
        let ordinal = match ordinal_from(&pod) {
            Some(o) if o < replica_count => o,
            Some(o) => {
                r.errors.push(
                    "POD_NAME",
                    format!("ordinal {o} of {pod:?} must be below REPLICA_COUNT ({replica_count})"),
                );
                0
            }
            None => {
                r.errors.push(
                    "POD_NAME",
                    format!("{pod:?} does not end in -<ordinal> (from POD_NAME or HOSTNAME)"),
                );
                0
            }
        };
        let flush = FlushConfig::from_env(&mut r);
        let stages = crate::stages::StageConfig::from_env(&mut r);
        let default_group = if destination == "ducklake" {
            format!("millpond-{topic}-{table}")
        } else {
            format!("millpond-{destination}-{topic}-{table}")
        };
        let kafka = KafkaConfig::from_env(&mut r, bootstrap_servers, topic, &default_group);
        if flush.run_to_latest && kafka.auto_offset_reset == OffsetReset::Latest {
            // A partition with no committed offset would start at its end,
            // skip what arrives meanwhile, and never reach the mark.
            r.errors.push(
                "MILLPOND_RUN_TO_LATEST",
                "cannot be combined with KAFKA_AUTO_OFFSET_RESET=latest (there is nothing to run to); use earliest",
            );
        }
        let writer_addr = r.string_or("MILLPOND_WRITER_ADDR", millpond_proto::DEFAULT_WRITER_ADDR);
        let port_ok = writer_addr
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !port_ok {
            r.errors.push(
                "MILLPOND_WRITER_ADDR",
                format!("must be host:port (got {writer_addr:?})"),
            );
        }
        let writer_metrics_url = crate::writer_metrics::url_from_env(&mut r);
        let send_deadline =
            Duration::from_secs(r.parse_or("MILLPOND_WRITER_SEND_DEADLINE_S", 420u64, |v| {
                if *v > 0 && *v < LIVENESS.as_secs() {
                    Ok(())
                } else {
                    Err(format!(
                        "must be between 1 and {} (the liveness budget)",
                        LIVENESS.as_secs() - 1
                    ))
                }
            }));
        let topic_epoch = r.optional("MILLPOND_TOPIC_EPOCH");
        if let Some(why) = topic_epoch.as_deref().and_then(crate::epoch::invalid) {
            r.errors.push("MILLPOND_TOPIC_EPOCH", why);
        }
        let failpoint = r.optional("MILLPOND_FAILPOINT").and_then(|spec| {
            failpoint::parse(&spec, failpoint::Process::Ingest)
                .map_err(|why| r.errors.push("MILLPOND_FAILPOINT", why))
                .ok()
        });
        r.finish()?;
        Ok(IngestConfig {
            common,
            kafka,
            flush,
            stages,
            replica_count,
            ordinal,
            destination,
            table,
            writer_addr,
            writer_metrics_url,
            send_deadline,
            topic_epoch,
            failpoint,
        })
    }

    /// The topic's name in Kafka and in the lake's offsets.
    pub fn lake_topic(&self) -> crate::epoch::LakeTopic {
        crate::epoch::LakeTopic::new(&self.kafka.topic, self.topic_epoch.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Secret;

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            ("KAFKA_TOPIC", "events"),
            ("REPLICA_COUNT", "2"),
            ("DUCKLAKE_TABLE", "events_t"),
            ("POD_NAME", "millpond-1"),
        ]
    }

    #[test]
    fn a_topic_epoch_must_be_a_plain_name() {
        let with = |v: &'static str| {
            let mut env = base();
            env.push(("MILLPOND_TOPIC_EPOCH", v));
            IngestConfig::from_env(&Env::from_pairs(env))
        };
        assert_eq!(with("2").unwrap().topic_epoch.as_deref(), Some("2"));
        let err = with("two words").unwrap_err().to_string();
        assert!(err.contains("MILLPOND_TOPIC_EPOCH"), "{err}");
    }

    #[test]
    fn defaults_follow_the_spec() {
        let cfg = IngestConfig::from_env(&Env::from_pairs(base())).unwrap();
        assert_eq!(cfg.ordinal, 1);
        assert_eq!(cfg.flush.size, 104_857_600);
        assert_eq!(cfg.flush.interval, Duration::from_secs(60));
        assert_eq!(cfg.kafka.group_id, "millpond-events-events_t");
        assert_eq!(cfg.kafka.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(cfg.kafka.consume_batch_size, 1000);
        assert_eq!(cfg.common.http_port, 8000);
    }

    #[test]
    fn hoglake_group_id_names_the_destination() {
        let mut env = base();
        env.retain(|(k, _)| *k != "DUCKLAKE_TABLE");
        env.push(("MILLPOND_DESTINATION", "HogLake"));
        env.push(("HOGLAKE_TABLE", "ev"));
        let cfg = IngestConfig::from_env(&Env::from_pairs(env)).unwrap();
        assert_eq!(cfg.kafka.group_id, "millpond-hoglake-events-ev");
    }

    #[test]
    fn every_error_is_reported_naming_its_variable() {
        let env = Env::from_pairs([
            ("REPLICA_COUNT", "0"),
            ("FLUSH_SIZE", "big"),
            ("KAFKA_CONSUMER_AUTO_OFFSET_RESET", "latest"),
            ("KAFKA_AUTO_OFFSET_RESET", "middle"),
            ("POD_NAME", "web"),
            ("MILLPOND_DESTINATION", "s3"),
        ]);
        let errs = IngestConfig::from_env(&env).unwrap_err();
        let vars = errs.vars();
        for v in [
            "KAFKA_BOOTSTRAP_SERVERS",
            "KAFKA_TOPIC",
            "REPLICA_COUNT",
            "FLUSH_SIZE",
            "KAFKA_CONSUMER_AUTO_OFFSET_RESET",
            "KAFKA_AUTO_OFFSET_RESET",
            "POD_NAME",
            "MILLPOND_DESTINATION",
            "DUCKLAKE_TABLE",
        ] {
            assert!(vars.contains(&v), "{v} missing from {vars:?}");
        }
    }

    #[test]
    fn debug_output_hides_kafka_credentials() {
        let mut env = base();
        env.push(("KAFKA_CONSUMER_SASL_PASSWORD", "hunter2-sasl"));
        env.push(("KAFKA_CONSUMER_SASL_USERNAME", "svc"));
        let cfg = IngestConfig::from_env(&Env::from_pairs(env)).unwrap();
        let shown = format!("{cfg:?}");
        assert!(shown.contains("sasl.password"), "{shown}");
        assert!(!shown.contains("hunter2-sasl"), "{shown}");
    }

    #[test]
    fn oauthbearer_signs_msk_iam_tokens_and_needs_a_region() {
        for var in [
            "KAFKA_CONSUMER_SASL_MECHANISM",
            "KAFKA_CONSUMER_SASL_MECHANISMS",
        ] {
            let mut env = base();
            env.push((var, "OAUTHBEARER"));
            let errs = IngestConfig::from_env(&Env::from_pairs(env.clone())).unwrap_err();
            assert_eq!(errs.vars(), vec!["AWS_REGION"], "{var}");
            env.push(("AWS_REGION", "eu-west-1"));
            env.push(("AWS_ROLE_SESSION_NAME", "millpond-events"));
            env.push(("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"));
            env.push(("AWS_ACCESS_KEY_ID", "AKIDTEST"));
            env.push(("AWS_ENDPOINT", "http://s3.local"));
            let cfg = IngestConfig::from_env(&Env::from_pairs(env)).unwrap();
            let m = cfg.kafka.msk_iam.clone().expect("msk iam");
            assert_eq!(m.region, "eu-west-1");
            assert_eq!(m.role_session_name.as_deref(), Some("millpond-events"));
            let vars: Vec<_> = m.chain_env.iter().map(|(k, _)| *k).collect();
            assert_eq!(
                vars,
                vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
                "S3 settings stay out"
            );
            let shown = format!("{cfg:?}");
            assert!(!shown.contains("s3cr3t-value"), "{shown}");
        }
        let mut env = base();
        env.push(("KAFKA_CONSUMER_SASL_MECHANISM", "OAUTHBEARER"));
        env.push(("AWS_REGION", "EU West 1"));
        let errs = IngestConfig::from_env(&Env::from_pairs(env)).unwrap_err();
        assert_eq!(errs.vars(), vec!["AWS_REGION"]);
        // Other mechanisms, and librdkafka's own token sources, need no AWS.
        for extra in [
            vec![("KAFKA_CONSUMER_SASL_MECHANISM", "SCRAM-SHA-512")],
            vec![
                ("KAFKA_CONSUMER_SASL_MECHANISM", "OAUTHBEARER"),
                ("KAFKA_CONSUMER_SASL_OAUTHBEARER_METHOD", "oidc"),
            ],
            vec![
                ("KAFKA_CONSUMER_SASL_MECHANISMS", "OAUTHBEARER"),
                (
                    "KAFKA_CONSUMER_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT",
                    "true",
                ),
            ],
        ] {
            let mut env = base();
            env.extend(extra);
            let cfg = IngestConfig::from_env(&Env::from_pairs(env)).unwrap();
            assert!(cfg.kafka.msk_iam.is_none());
        }
    }

    #[test]
    fn startup_timeout_is_positive_seconds() {
        let cfg = IngestConfig::from_env(&Env::from_pairs(base())).unwrap();
        assert_eq!(cfg.kafka.startup_timeout, Duration::from_secs(30));
        let mut env = base();
        env.push(("KAFKA_STARTUP_TIMEOUT_S", "0"));
        let errs = IngestConfig::from_env(&Env::from_pairs(env)).unwrap_err();
        assert_eq!(errs.vars(), vec!["KAFKA_STARTUP_TIMEOUT_S"]);
    }

    #[test]
    fn passthrough_and_ordinals() {
        let mut env = base();
        env.push(("KAFKA_CONSUMER_SECURITY_PROTOCOL", "SASL_SSL"));
        let cfg = IngestConfig::from_env(&Env::from_pairs(env)).unwrap();
        assert_eq!(
            cfg.kafka.consumer_overrides,
            vec![("security.protocol".into(), Secret::new("SASL_SSL"))]
        );
        assert_eq!(ordinal_from("millpond-events-12"), Some(12));
        assert_eq!(ordinal_from("millpond"), None);
        let mut env = base();
        env.push(("POD_NAME", "millpond-2"));
        let env = Env::from_pairs(env);
        assert!(
            IngestConfig::from_env(&env).is_err(),
            "ordinal 2 with 2 replicas"
        );
    }

    #[test]
    fn run_to_latest_refuses_the_latest_reset() {
        let env = Env::from_pairs([
            ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            ("KAFKA_TOPIC", "events"),
            ("DUCKLAKE_TABLE", "events"),
            ("REPLICA_COUNT", "1"),
            ("POD_NAME", "millpond-0"),
            ("MILLPOND_RUN_TO_LATEST", "true"),
            ("KAFKA_AUTO_OFFSET_RESET", "latest"),
        ]);
        let errs = IngestConfig::from_env(&env).unwrap_err();
        assert_eq!(errs.vars(), ["MILLPOND_RUN_TO_LATEST"]);
    }
}
