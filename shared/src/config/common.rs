use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::env::EnvReader;

/// MILLPOND_HEAP_TRIM_MS unless set.
pub const HEAP_TRIM_MS: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// Settings both processes read: logging, metric labels and the HTTP port.
#[derive(Debug, Clone)]
pub struct CommonConfig {
    pub log_level: String,
    pub log_format: LogFormat,
    /// `pipeline` label on every metric.
    pub pipeline: String,
    /// `broker_source` label on every metric.
    pub broker_source: String,
    pub http_port: u16,
    /// MILLPOND_HTTP_HOST: the address the HTTP server listens on.
    pub http_host: IpAddr,
    /// POSTHOG_PROJECT_TOKEN and friends: OTLP log export, when set.
    pub log_export: Option<crate::logging::LogExport>,
    /// MILLPOND_HEAP_TRIM_MS: how often freed heap memory is handed back
    /// to the kernel (`heap.rs`); `None` when 0.
    pub heap_trim: Option<Duration>,
}

impl CommonConfig {
    /// The process's metric registry: every metric carries the `pipeline`
    /// and `broker_source` labels.
    pub fn registry(&self) -> prometheus::Registry {
        crate::metrics::new_registry(&self.pipeline, &self.broker_source)
    }

    /// `default_port` differs per process: ingest 8000 (the chart's probe
    /// port), writer 8001, so both fit in one pod.
    pub fn parse(
        r: &mut EnvReader<'_>,
        port_var: &str,
        default_port: u16,
        default_pipeline: &str,
    ) -> Self {
        let level = r.choice(
            "LOG_LEVEL",
            "info",
            &["trace", "debug", "info", "warning", "warn", "error"],
        );
        let log_level = if level == "warning" {
            "warn".to_owned()
        } else {
            level
        };
        let log_format = match r
            .choice("MILLPOND_LOG_FORMAT", "json", &["json", "text"])
            .as_str()
        {
            "text" => LogFormat::Text,
            _ => LogFormat::Json,
        };
        CommonConfig {
            log_level,
            log_format,
            pipeline: r.string_or("MILLPOND_PIPELINE", default_pipeline),
            broker_source: r.string_or("BROKER_SOURCE", ""),
            http_port: r.u16_port(port_var, default_port),
            http_host: http_host(r),
            log_export: crate::logging::LogExport::parse(r),
            heap_trim: match r.parse_or("MILLPOND_HEAP_TRIM_MS", HEAP_TRIM_MS, |_: &u64| Ok(())) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        }
    }

    /// Where the HTTP server (metrics, health) listens.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::new(self.http_host, self.http_port)
    }
}

/// MILLPOND_HTTP_HOST: an IPv4 or IPv6 address (`::` or `[::]` for every
/// IPv6 address), checked at startup with the other settings.
fn http_host(r: &mut EnvReader<'_>) -> IpAddr {
    const ANY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    let Some(raw) = r.optional("MILLPOND_HTTP_HOST") else {
        return ANY;
    };
    let bare = raw
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(&raw);
    bare.parse().unwrap_or_else(|_| {
        r.errors.push(
            "MILLPOND_HTTP_HOST",
            format!("must be an IP address to listen on, such as 0.0.0.0, 127.0.0.1 or :: (got {raw:?})"),
        );
        ANY
    })
}

#[cfg(test)]
mod tests {
    use super::super::env::Env;
    use super::*;

    fn parse(host: Option<&str>) -> (CommonConfig, Vec<String>) {
        let env = Env::from_pairs(host.map(|h| ("MILLPOND_HTTP_HOST", h)));
        let mut r = EnvReader::new(&env);
        let cfg = CommonConfig::parse(&mut r, "MILLPOND_HTTP_PORT", 8000, "p");
        let vars = r.errors.vars().iter().map(|v| v.to_string()).collect();
        (cfg, vars)
    }

    #[test]
    fn the_heap_is_trimmed_every_second_unless_told() {
        let trim = |v: Option<&str>| {
            let env = Env::from_pairs(v.map(|v| ("MILLPOND_HEAP_TRIM_MS", v)));
            let mut r = EnvReader::new(&env);
            let cfg = CommonConfig::parse(&mut r, "MILLPOND_HTTP_PORT", 8000, "p");
            let vars: Vec<String> = r.errors.vars().iter().map(|v| v.to_string()).collect();
            (cfg.heap_trim, vars)
        };
        assert_eq!(trim(None), (Some(Duration::from_secs(1)), vec![]));
        assert_eq!(
            trim(Some("250")),
            (Some(Duration::from_millis(250)), vec![])
        );
        assert_eq!(trim(Some("0")), (None, vec![]));
        for bad in ["-1", "1s", "x"] {
            assert_eq!(trim(Some(bad)).1, ["MILLPOND_HEAP_TRIM_MS"], "{bad:?}");
        }
    }

    #[test]
    fn http_host_is_an_ip_address_checked_at_startup() {
        assert_eq!(parse(None).0.http_addr().to_string(), "0.0.0.0:8000");
        assert_eq!(
            parse(Some("127.0.0.1")).0.http_addr().to_string(),
            "127.0.0.1:8000"
        );
        assert_eq!(parse(Some("::")).0.http_addr().to_string(), "[::]:8000");
        assert_eq!(parse(Some("[::1]")).0.http_addr().to_string(), "[::1]:8000");
        // Empty is unset, as for every variable.
        assert_eq!(parse(Some("")).0.http_addr().to_string(), "0.0.0.0:8000");
        for bad in ["localhost", "0.0.0.0:80", "[::"] {
            assert_eq!(parse(Some(bad)).1, ["MILLPOND_HTTP_HOST"], "{bad:?}");
        }
    }
}
