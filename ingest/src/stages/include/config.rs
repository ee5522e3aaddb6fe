//! MILLPOND_INCLUDE_VALUES_*: the dynamic allowlist source's settings and
//! the startup error matrix (a URL needs the keep-filter; a mode or auth
//! variables need a URL; the auth header name and token go together).
use std::time::Duration;

use millpond_shared::config::{EnvReader, Secret};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The static list applies; the endpoint is only observed.
    Shadow,
    /// The polled set plus the static pins applies.
    Authoritative,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Shadow => "shadow",
            Mode::Authoritative => "authoritative",
        }
    }
}

#[derive(Debug, Clone)]
pub struct IncludeConfig {
    pub url: String,
    pub mode: Mode,
    pub poll_interval: Duration,
    pub removal_polls: u32,
    pub request_timeout: Duration,
    pub startup_timeout: Duration,
    /// Header name and its value (a Secret: never in Debug or logs).
    pub auth: Option<(String, Secret)>,
}

impl PartialEq for IncludeConfig {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.mode == other.mode
    }
}

impl Eq for IncludeConfig {}

const URL: &str = "MILLPOND_INCLUDE_VALUES_URL";
const MODE: &str = "MILLPOND_INCLUDE_VALUES_MODE";
const HEADER: &str = "MILLPOND_INCLUDE_VALUES_AUTH_HEADER_NAME";
const TOKEN: &str = "MILLPOND_INCLUDE_VALUES_AUTH_TOKEN";

/// Reads the group; `keep_filter` says whether the keep-filter (field and
/// static values) is configured, which a URL requires.
pub fn from_env(r: &mut EnvReader<'_>, keep_filter: bool) -> Option<IncludeConfig> {
    let set = |r: &EnvReader<'_>, v: &str| r.optional(v).filter(|x| !x.trim().is_empty());
    let url = set(r, URL);
    let mode = set(r, MODE);
    let header = set(r, HEADER);
    let token = r.optional_secret(TOKEN);
    let Some(url) = url else {
        for (var, present) in [
            (MODE, mode.is_some()),
            (HEADER, header.is_some()),
            (TOKEN, token.is_some()),
        ] {
            if present {
                r.errors.push(var, format!("is set without {URL}: a dynamic source was intended, set the URL or unset this"));
            }
        }
        return None;
    };
    if !keep_filter {
        r.errors.push(
            URL,
            "requires the keep-filter: set MILLPOND_FILTER_KEEP_FIELD_NAME and MILLPOND_FILTER_VALUES (the static pins)",
        );
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        r.errors.push(
            URL,
            format!("must be an http:// or https:// URL (got {url:?})"),
        );
    }
    let mode = match mode.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("shadow") => Mode::Shadow,
        Some("authoritative") => Mode::Authoritative,
        Some(other) => {
            r.errors.push(
                MODE,
                format!("must be shadow or authoritative (got {other:?})"),
            );
            Mode::Shadow
        }
    };
    let auth = match (header, token) {
        (Some(h), Some(t)) => Some((h, t)),
        (None, None) => None,
        (Some(_), None) => {
            r.errors.push(TOKEN, format!("is required with {HEADER}"));
            None
        }
        (None, Some(_)) => {
            r.errors.push(HEADER, format!("is required with {TOKEN}"));
            None
        }
    };
    let secs = |r: &mut EnvReader<'_>, v: &str, d: u64| Duration::from_secs(r.positive_u64(v, d));
    let poll_interval = secs(r, "MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S", 60);
    let removal_polls = r.positive_u64("MILLPOND_INCLUDE_VALUES_REMOVAL_POLLS", 5) as u32;
    if removal_polls == 1 {
        tracing::warn!("MILLPOND_INCLUDE_VALUES_REMOVAL_POLLS=1: removals are not damped; one bad poll removes values");
    }
    let request_timeout = secs(r, "MILLPOND_INCLUDE_VALUES_REQUEST_TIMEOUT_S", 10);
    let startup_timeout = secs(r, "MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S", 60);
    Some(IncludeConfig {
        url,
        mode,
        poll_interval,
        removal_polls,
        request_timeout,
        startup_timeout,
        auth,
    })
}
