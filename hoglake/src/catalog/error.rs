//! Catalog failures: what went wrong ([`CatalogError`]) and what the caller
//! does next ([`ErrorClass`]), from the status and machine code the server
//! sends (section 2 of the API document).
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

/// What the caller should do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Send the identical request again after a backoff (transport errors,
    /// 408, 429, 5xx, 503 `commit_queue_timeout`).
    Retry,
    /// The request was judged against a stale basis: re-read the table and
    /// build a new payload (409 `ddl_since_read_snapshot`, `table_recreated`,
    /// `table_dropped`, `commit_conflict`; 410 `expired`).
    RePrepare,
    /// Waiting cannot make it valid (400, 404, 422, 501, other 409s).
    Permanent,
}

/// A failed catalog call. `what` names the call (`GET table analytics.events`).
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No answer: connect failure, reset, timeout. The outcome of a
    /// non-idempotent request is unknown.
    #[error("hoglake {what}: no response from {url} ({source}); check HOGLAKE_URL and that the control plane is reachable")]
    Transport {
        what: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },

    /// A non-2xx answer.
    #[error("hoglake {what}: HTTP {status} {code}{}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default(), hint(*status, code))]
    Api {
        what: String,
        status: u16,
        /// The machine code (`error` field); `http_<status>` if the body had none.
        code: String,
        detail: Option<String>,
        /// `ns.table` names the refusal is about.
        tables: Vec<String>,
        retry_after: Option<Duration>,
    },

    /// A 2xx answer whose body is not what the API document describes.
    #[error("hoglake {what}: unexpected response body ({message})")]
    Decode { what: String, message: String },

    /// The catalog does not exist and no data path was configured to create it.
    #[error("hoglake catalog `{catalog}` does not exist; check HOGLAKE_CATALOG, or set HOGLAKE_DATA_PATH so millpond creates it on first write")]
    MissingCatalog { catalog: String },

    /// A setting the client cannot work with (bad URL).
    #[error("hoglake client configuration: {0}")]
    Config(String),
}

fn hint(status: u16, code: &str) -> &'static str {
    match (status, code) {
        (422, _) => " (the request is invalid for this catalog; fix the data or configuration, retrying will not help)",
        (404, _) => " (check HOGLAKE_CATALOG / HOGLAKE_NAMESPACE / HOGLAKE_TABLE and the server version)",
        (409, "table_recreated") => " (the table was dropped and recreated; re-resolve it)",
        (409, "ddl_since_read_snapshot") => " (the table changed since it was read; re-read and rebuild)",
        (410, _) => " (the read snapshot fell below the retention floor; re-read and rebuild)",
        (503, _) => " (the catalog is shedding load; resend after Retry-After)",
        _ => "",
    }
}

impl CatalogError {
    pub fn class(&self) -> ErrorClass {
        match self {
            CatalogError::Transport { .. } => ErrorClass::Retry,
            CatalogError::Api { status, code, .. } => classify(*status, code),
            CatalogError::Decode { .. } => ErrorClass::Permanent,
            CatalogError::MissingCatalog { .. } | CatalogError::Config(_) => ErrorClass::Permanent,
        }
    }

    /// The server's `Retry-After`, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CatalogError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The machine code of an API refusal.
    pub fn code(&self) -> Option<&str> {
        match self {
            CatalogError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            CatalogError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when the request may have been applied although no answer came
    /// back (the lost-response case).
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, CatalogError::Transport { .. })
    }
}

/// Status + code -> what to do (section 2 of the API document).
pub fn classify(status: u16, code: &str) -> ErrorClass {
    match status {
        408 | 429 => ErrorClass::Retry,
        409 => match code {
            "ddl_since_read_snapshot" | "table_recreated" | "table_dropped" | "commit_conflict" => {
                ErrorClass::RePrepare
            }
            _ => ErrorClass::Permanent,
        },
        410 => ErrorClass::RePrepare,
        501 => ErrorClass::Permanent,
        500..=599 => ErrorClass::Retry,
        _ => ErrorClass::Permanent,
    }
}

/// `Retry-After` as delta-seconds (the server sends `1`); fractions are
/// accepted, anything else (an HTTP date) is ignored.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    tables: Vec<String>,
}

pub(super) fn api_error(
    what: &str,
    status: StatusCode,
    bytes: &[u8],
    retry_after: Option<Duration>,
) -> CatalogError {
    let body: Option<ErrorBody> = serde_json::from_slice(bytes).ok();
    let (code, detail, tables) = match body {
        Some(b) => (
            b.error
                .unwrap_or_else(|| format!("http_{}", status.as_u16())),
            b.detail,
            b.tables,
        ),
        None => (
            format!("http_{}", status.as_u16()),
            (!bytes.is_empty()).then(|| truncate(bytes)),
            Vec::new(),
        ),
    };
    CatalogError::Api {
        what: what.to_string(),
        status: status.as_u16(),
        code,
        detail,
        tables,
        retry_after,
    }
}

pub(super) fn truncate(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(500).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
