use super::env::EnvReader;

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
    pub http_host: String,
    /// POSTHOG_PROJECT_TOKEN and friends: OTLP log export, when set.
    pub log_export: Option<crate::logging::LogExport>,
}

impl CommonConfig {
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
            http_host: r.string_or("MILLPOND_HTTP_HOST", "0.0.0.0"),
            log_export: crate::logging::LogExport::parse(r),
        }
    }
}
