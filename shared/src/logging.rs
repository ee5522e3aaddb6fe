//! Logs go to stdout, as JSON lines or plain text, filtered by LOG_LEVEL.
use tracing_subscriber::EnvFilter;

use crate::config::{CommonConfig, LogFormat};

pub fn init(cfg: &CommonConfig) {
    // Our crates at the configured level; chatty dependencies at warn.
    let filter = EnvFilter::new(format!(
        "warn,millpond={lvl},millpond_shared={lvl},millpond_writer={lvl},millpond_ingest={lvl}",
        lvl = cfg.log_level
    ));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let _ = match cfg.log_format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
