//! Writer configuration, read once at startup.
use std::net::SocketAddr;

use millpond_shared::config::{CommonConfig, ConfigErrors, Env, EnvReader};
use millpond_shared::failpoint;

use crate::flight::DEFAULT_MAX_MESSAGE_BYTES;
#[cfg(feature = "ducklake")]
use crate::sink::ducklake::config::DuckLakeConfig;
use crate::sink::hoglake::config::HoglakeConfig;

pub use millpond_proto::DEFAULT_WRITER_ADDR;

/// Where flushes go (MILLPOND_DESTINATION: `ducklake`, the default, or
/// `hoglake`).
#[derive(Debug, Clone)]
pub enum Destination {
    #[cfg(feature = "ducklake")]
    DuckLake(Box<DuckLakeConfig>),
    Hoglake(Box<HoglakeConfig>),
}

impl Destination {
    /// `schema.table` / `namespace.table`, for logs.
    pub fn qualified_table(&self) -> String {
        match self {
            #[cfg(feature = "ducklake")]
            Destination::DuckLake(c) => c.qualified_table(),
            Destination::Hoglake(c) => c.qualified_table(),
        }
    }

    /// The longest one flush's write may take, retries and waits
    /// included, and the settings that give it: what ingest's send
    /// deadline must hold (the answer to "ingest-started").
    pub fn write_budget(&self) -> millpond_proto::WriterBudget {
        match self {
            #[cfg(feature = "ducklake")]
            Destination::DuckLake(c) => millpond_proto::WriterBudget::new(
                c.write_budget,
                crate::sink::ducklake::config::WRITE_BUDGET_SET_BY,
            ),
            Destination::Hoglake(c) => millpond_proto::WriterBudget::new(
                c.write_budget(),
                crate::sink::hoglake::config::WRITE_BUDGET_SET_BY,
            ),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            #[cfg(feature = "ducklake")]
            Destination::DuckLake(_) => "ducklake",
            Destination::Hoglake(_) => "hoglake",
        }
    }
}

/// MILLPOND_WRITER_MAX_FLUSH_BYTES by default: 1 GiB, ten times ingest's
/// default FLUSH_SIZE (a flush passes FLUSH_SIZE by at most one batch).
pub const DEFAULT_MAX_FLUSH_BYTES: u64 = 1 << 30;

/// MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES by default: two flushes at their
/// bound, so a resent flush fits while the writer still holds the one whose
/// ack was lost, and N local clients cannot hold N flushes.
pub fn in_flight_default(max_flush_bytes: u64) -> u64 {
    max_flush_bytes.saturating_mul(2)
}

/// MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S by default: well above ingest's
/// default FLUSH_INTERVAL_MS (60 s), the longest a streamed flush waits for
/// its next batch.
pub const DEFAULT_UPLOAD_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub common: CommonConfig,
    /// Flight listen address; loopback by default (the pod's sidecar link).
    pub addr: SocketAddr,
    pub max_message_bytes: usize,
    /// Most Arrow bytes one DoPut (a whole flush) may carry
    /// (MILLPOND_WRITER_MAX_FLUSH_BYTES); beyond, RESOURCE_EXHAUSTED.
    pub max_flush_bytes: u64,
    /// Most Arrow bytes all DoPuts may hold at once
    /// (MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES); beyond, RESOURCE_EXHAUSTED.
    pub max_in_flight_bytes: u64,
    /// An upload that sends nothing for this long is cut
    /// (MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S).
    pub upload_idle_timeout: std::time::Duration,
    /// The HTTP/2 window of a DoPut (MILLPOND_WRITER_FLOW_WINDOW_BYTES): how
    /// much of a flush the writer lets its ingest send ahead of what it has
    /// read, held in memory meanwhile.
    pub flow_window_bytes: u32,
    pub sink: Destination,
    /// Test hook (MILLPOND_FAILPOINT, builds with the feature `failpoints`
    /// only): see `millpond_shared::failpoint` for the writer's.
    pub failpoint: Option<failpoint::Armed>,
    /// After SIGTERM, the longest the writer keeps serving its ingest's
    /// final flush (MILLPOND_WRITER_SHUTDOWN_GRACE_S, default 60).
    pub shutdown_grace: std::time::Duration,
}

#[cfg(feature = "ducklake")]
fn ducklake(r: &mut EnvReader<'_>) -> Option<Destination> {
    DuckLakeConfig::parse(r).map(|c| Destination::DuckLake(Box::new(c)))
}

/// The hoglake writer image carries no DuckDB: refuse rather than guess.
#[cfg(not(feature = "ducklake"))]
fn ducklake(r: &mut EnvReader<'_>) -> Option<Destination> {
    r.errors.push(
        "MILLPOND_DESTINATION",
        "this writer was built without DuckLake (the hoglake writer image); set MILLPOND_DESTINATION=hoglake or run the DuckLake writer image",
    );
    None
}

/// MILLPOND_WRITER_FLOW_WINDOW_BYTES: HTTP/2 allows 65535 bytes to 2^31-1.
fn flow_window(r: &mut EnvReader<'_>) -> u32 {
    r.size(
        "MILLPOND_WRITER_FLOW_WINDOW_BYTES",
        "32MiB",
        65_535..=i32::MAX as u64,
        "must be from 65535 bytes to 2GiB less one (HTTP/2's window)",
    ) as u32
}

impl WriterConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigErrors> {
        let mut r = EnvReader::new(env);
        let destination = r.choice("MILLPOND_DESTINATION", "ducklake", &["ducklake", "hoglake"]);
        let table_var = if destination == "hoglake" {
            "HOGLAKE_TABLE"
        } else {
            "DUCKLAKE_TABLE"
        };
        let table = r.optional(table_var).unwrap_or_default();
        let common = CommonConfig::parse(&mut r, "MILLPOND_WRITER_HTTP_PORT", 8001, &table);
        let addr = r.parse_or(
            "MILLPOND_WRITER_ADDR",
            DEFAULT_WRITER_ADDR.parse().unwrap(),
            |_| Ok(()),
        );
        let max_message_bytes = r.parse_or(
            "MILLPOND_WRITER_MAX_MESSAGE_BYTES",
            DEFAULT_MAX_MESSAGE_BYTES,
            |v: &usize| {
                if *v >= 4 << 20 {
                    Ok(())
                } else {
                    Err("must be at least 4194304".into())
                }
            },
        );
        let max_flush_bytes = r.size(
            "MILLPOND_WRITER_MAX_FLUSH_BYTES",
            "1GiB",
            4 << 20..=u64::MAX,
            "must be at least 4MiB",
        );
        let max_in_flight_bytes = r.size(
            "MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES",
            &in_flight_default(max_flush_bytes).to_string(),
            4 << 20..=u64::MAX,
            "must be at least 4MiB",
        );
        let upload_idle_timeout = std::time::Duration::from_secs(r.positive_u64(
            "MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S",
            DEFAULT_UPLOAD_IDLE_TIMEOUT.as_secs(),
        ));
        let flow_window_bytes = flow_window(&mut r);
        let sink = if destination == "hoglake" {
            HoglakeConfig::parse(&mut r).map(|c| Destination::Hoglake(Box::new(c)))
        } else {
            ducklake(&mut r)
        };
        let failpoint = r.optional("MILLPOND_FAILPOINT").and_then(|spec| {
            let armed = failpoint::parse(&spec, failpoint::Process::Writer);
            let armed = armed.and_then(|a| match destination == "hoglake" {
                true if a.point.ducklake_only() => Err(format!(
                    "{} is a pause of the DuckLake sink; this writer writes hoglake",
                    a.point.name()
                )),
                _ => Ok(a),
            });
            armed
                .map_err(|why| r.errors.push("MILLPOND_FAILPOINT", why))
                .ok()
        });
        let shutdown_grace = std::time::Duration::from_secs(r.parse_or(
            "MILLPOND_WRITER_SHUTDOWN_GRACE_S",
            60u64,
            |_| Ok(()),
        ));
        r.finish()?;
        Ok(WriterConfig {
            common,
            addr,
            max_message_bytes,
            max_flush_bytes,
            max_in_flight_bytes,
            upload_idle_timeout,
            flow_window_bytes,
            sink: sink.expect("no errors means the sink config parsed"),
            failpoint,
            shutdown_grace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "ducklake")]
    fn all_errors_reported_together() {
        let env = Env::from_pairs([
            ("MILLPOND_DESTINATION", "s3"),
            ("MILLPOND_WRITER_ADDR", "nowhere"),
            ("LOG_LEVEL", "loud"),
        ]);
        let errs = WriterConfig::from_env(&env).unwrap_err();
        let vars = errs.vars();
        for v in [
            "MILLPOND_DESTINATION",
            "MILLPOND_WRITER_ADDR",
            "LOG_LEVEL",
            "DUCKLAKE_TABLE",
        ] {
            assert!(vars.contains(&v), "{v} not in {vars:?}");
        }
    }

    #[test]
    #[cfg(feature = "ducklake")]
    fn defaults_bind_loopback() {
        let env = Env::from_pairs([("DUCKLAKE_TABLE", "events")]);
        let cfg = WriterConfig::from_env(&env).unwrap();
        assert_eq!(cfg.addr.to_string(), DEFAULT_WRITER_ADDR);
        assert_eq!(cfg.common.pipeline, "events");
        assert!(matches!(cfg.sink, Destination::DuckLake(_)));
        assert_eq!(cfg.flow_window_bytes, millpond_proto::FLOW_WINDOW_BYTES);
    }

    #[test]
    #[cfg(feature = "ducklake")]
    fn the_flow_window_is_a_size_http2_allows() {
        let with = |v: &str| {
            WriterConfig::from_env(&Env::from_pairs([
                ("DUCKLAKE_TABLE", "events"),
                ("MILLPOND_WRITER_FLOW_WINDOW_BYTES", v),
            ]))
        };
        assert_eq!(with("4MiB").unwrap().flow_window_bytes, 4 << 20);
        assert_eq!(with("65535").unwrap().flow_window_bytes, 65_535);
        for bad in ["1KiB", "2GiB", "lots"] {
            let errs = with(bad).unwrap_err();
            assert_eq!(errs.vars(), ["MILLPOND_WRITER_FLOW_WINDOW_BYTES"], "{bad}");
        }
    }

    #[test]
    #[cfg(feature = "ducklake")]
    fn the_in_flight_bound_follows_the_flush_bound_unless_set() {
        let with = |pairs: &[(&str, &str)]| {
            let mut env = vec![("DUCKLAKE_TABLE", "events")];
            env.extend_from_slice(pairs);
            WriterConfig::from_env(&Env::from_pairs(env))
        };
        let d = with(&[]).unwrap();
        assert_eq!(d.max_in_flight_bytes, 2 << 30);
        assert_eq!(d.upload_idle_timeout, DEFAULT_UPLOAD_IDLE_TIMEOUT);
        let c = with(&[("MILLPOND_WRITER_MAX_FLUSH_BYTES", "64MiB")]).unwrap();
        assert_eq!(c.max_in_flight_bytes, 128 << 20);
        let c = with(&[
            ("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES", "300MiB"),
            ("MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S", "7"),
        ])
        .unwrap();
        assert_eq!(c.max_in_flight_bytes, 300 << 20);
        assert_eq!(c.upload_idle_timeout.as_secs(), 7);
        let errs = with(&[
            ("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES", "1KiB"),
            ("MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S", "0"),
        ])
        .unwrap_err();
        assert_eq!(
            errs.vars(),
            [
                "MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES",
                "MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S"
            ]
        );
    }

    #[test]
    fn hoglake_destination_reads_the_hoglake_table() {
        let env = Env::from_pairs([
            ("MILLPOND_DESTINATION", "hoglake"),
            ("HOGLAKE_URL", "http://127.0.0.1:8080"),
            ("HOGLAKE_CATALOG", "main"),
            ("HOGLAKE_NAMESPACE", "analytics"),
            ("HOGLAKE_TABLE", "events"),
        ]);
        let cfg = WriterConfig::from_env(&env).unwrap();
        assert_eq!(cfg.common.pipeline, "events");
        assert_eq!(cfg.sink.name(), "hoglake");
        assert_eq!(cfg.sink.qualified_table(), "analytics.events");
        // DUCKLAKE_TABLE is not asked for; the hoglake variables are.
        let errs = WriterConfig::from_env(&Env::from_pairs([("MILLPOND_DESTINATION", "hoglake")]))
            .unwrap_err();
        let vars = errs.vars();
        assert!(!vars.contains(&"DUCKLAKE_TABLE"), "{vars:?}");
        assert!(
            vars.contains(&"HOGLAKE_URL") && vars.contains(&"HOGLAKE_TABLE"),
            "{vars:?}"
        );
    }

    #[test]
    #[cfg(not(feature = "ducklake"))]
    fn the_hoglake_only_build_refuses_ducklake_by_name() {
        let errs =
            WriterConfig::from_env(&Env::from_pairs([("DUCKLAKE_TABLE", "events")])).unwrap_err();
        assert_eq!(errs.vars(), ["MILLPOND_DESTINATION"]);
        assert!(
            errs.to_string().contains("built without DuckLake"),
            "{errs}"
        );
    }
}
