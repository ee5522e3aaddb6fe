//! Logs go to stdout, as JSON lines or plain text, filtered by LOG_LEVEL.
//! With POSTHOG_PROJECT_TOKEN set they are also exported as OTLP/HTTP logs
//! (PostHog Logs, or any OTLP collector at POSTHOG_LOGS_ENDPOINT), batched
//! on a thread of their own: a slow or unreachable collector delays and
//! drops exported records, never the pipeline.
use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
use opentelemetry_otlp::{LogExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::{filter_fn, EnvFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::config::{CommonConfig, EnvReader, LogFormat, Secret};

/// Where PostHog Logs takes OTLP/HTTP when POSTHOG_LOGS_ENDPOINT is unset.
pub const DEFAULT_LOGS_ENDPOINT: &str = "https://us.i.posthog.com/i/v1/logs";
/// One export request's bound: a hung collector holds the export thread
/// this long, and a shutdown at most about this long.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The OTLP log export settings (POSTHOG_PROJECT_TOKEN and friends).
#[derive(Debug, Clone)]
pub struct LogExport {
    pub endpoint: String,
    pub token: Secret,
    /// `service.namespace` (MILLPOND_SERVICE_NAMESPACE, default `millpond`).
    pub namespace: String,
    /// `service.instance.id` (MILLPOND_SERVICE_INSTANCE_ID).
    pub instance_id: Option<String>,
    /// `service.version` (MILLPOND_SERVICE_VERSION, default the package version).
    pub version: String,
}

impl LogExport {
    /// `None` unless POSTHOG_PROJECT_TOKEN is set (and not blank).
    pub fn parse(r: &mut EnvReader<'_>) -> Option<Self> {
        let token = r
            .optional("POSTHOG_PROJECT_TOKEN")
            .filter(|t| !t.trim().is_empty())?;
        let endpoint = r.string_or("POSTHOG_LOGS_ENDPOINT", DEFAULT_LOGS_ENDPOINT);
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            r.errors.push(
                "POSTHOG_LOGS_ENDPOINT",
                format!("must be an http:// or https:// URL (got {endpoint:?})"),
            );
        }
        Some(LogExport {
            endpoint,
            token: Secret::new(token),
            namespace: r.string_or("MILLPOND_SERVICE_NAMESPACE", "millpond"),
            instance_id: r
                .optional("MILLPOND_SERVICE_INSTANCE_ID")
                .filter(|v| !v.is_empty()),
            version: r.string_or("MILLPOND_SERVICE_VERSION", env!("CARGO_PKG_VERSION")),
        })
    }

    /// The exporting provider for `service` (`service.name`). Building it
    /// does no I/O.
    pub fn provider(&self, service: &str) -> Result<SdkLoggerProvider, String> {
        let headers = HashMap::from([(
            "Authorization".to_owned(),
            format!("Bearer {}", self.token.expose()),
        )]);
        let exporter = LogExporter::builder()
            .with_http()
            .with_endpoint(&self.endpoint)
            .with_headers(headers)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| self.token.scrub(&format!("OTLP log exporter: {e}")))?;
        let mut attributes = vec![
            KeyValue::new("service.namespace", self.namespace.clone()),
            KeyValue::new("service.version", self.version.clone()),
        ];
        if let Some(id) = &self.instance_id {
            attributes.push(KeyValue::new("service.instance.id", id.clone()));
        }
        let resource = Resource::builder()
            .with_service_name(service.to_owned())
            .with_attributes(attributes)
            .build();
        Ok(SdkLoggerProvider::builder()
            .with_resource(resource)
            .with_batch_exporter(exporter)
            .build())
    }
}

/// The layer that hands our crates' events to `provider`. Events of other
/// crates (the exporter's own HTTP client among them) stay on stdout only,
/// so exporting can never feed itself.
pub fn export_layer<S>(provider: &SdkLoggerProvider) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    OpenTelemetryTracingBridge::new(provider)
        .with_filter(filter_fn(|m| m.target().starts_with("millpond")))
}

/// Keeps the exporter alive; flushes what is queued and stops it on drop
/// (bounded by [`EXPORT_TIMEOUT`] when the collector does not answer).
#[must_use = "dropping the guard stops the log export"]
pub struct LogGuard(Option<SdkLoggerProvider>);

impl Drop for LogGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = p.shutdown();
        }
    }
}

/// Installs the global subscriber: stdout always, OTLP when configured.
/// `service` is the `service.name` of exported records.
pub fn init(cfg: &CommonConfig, service: &str) -> LogGuard {
    // Our crates at the configured level; chatty dependencies at warn.
    let filter = EnvFilter::new(format!(
        "warn,millpond={lvl},millpond_shared={lvl},millpond_writer={lvl},millpond_ingest={lvl},millpond_hoglake={lvl}",
        lvl = cfg.log_level
    ));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let stdout = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stdout)
        .with_target(false)
        .with_ansi(ansi);
    let stdout = match cfg.log_format {
        LogFormat::Json => stdout.json().flatten_event(true).boxed(),
        LogFormat::Text => stdout.boxed(),
    };
    let (provider, problem) = match cfg.log_export.as_ref().map(|e| e.provider(service)) {
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let export = provider.as_ref().map(export_layer);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stdout)
        .with(export)
        .try_init();
    if let Some(e) = problem {
        tracing::error!(error = %e, "log export disabled; logs go to stdout only");
    } else if let Some(x) = &cfg.log_export {
        // Scheme and host only: a URL may carry credentials.
        let shown = x.endpoint.split('/').take(3).collect::<Vec<_>>().join("/");
        let shown = shown.rsplit('@').next().unwrap_or_default();
        tracing::info!(endpoint = %shown, service, "exporting logs over OTLP/HTTP");
    }
    LogGuard(provider)
}
