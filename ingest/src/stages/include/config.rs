//! MILLPOND_INCLUDE_VALUES_*: the dynamic allowlist source's settings and
//! the startup error matrix (a URL needs the keep-filter; a mode or auth
//! variables need a URL; the auth header name and token go together;
//! credentials go over plain http:// only when allowed by name).
use std::time::Duration;

use millpond_shared::config::{EnvReader, Secret};

use millpond_shared::config::SecretUrl;

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
    /// Masked wherever it is shown: it may carry a token.
    pub url: SecretUrl,
    pub mode: Mode,
    pub poll_interval: Duration,
    pub removal_polls: u32,
    pub request_timeout: Duration,
    pub startup_timeout: Duration,
    /// Header name and its value (a Secret: never in Debug or logs).
    pub auth: Option<(String, Secret)>,
    /// A larger response is a failed poll, never a truncated set.
    pub max_body_bytes: u64,
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
pub const ALLOW_HTTP_AUTH: &str = "MILLPOND_INCLUDE_VALUES_ALLOW_HTTP_AUTH";
pub const MAX_BODY_BYTES: &str = "MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES";
/// Default of MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES: 8 MiB, some 500,000
/// team ids.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 8 << 20;

/// Reads the group; `keep_filter` says whether the keep-filter (field and
/// static values) is configured, which a URL requires.
pub fn from_env(r: &mut EnvReader<'_>, keep_filter: bool) -> Option<IncludeConfig> {
    let set = |r: &EnvReader<'_>, v: &str| r.optional(v).filter(|x| !x.trim().is_empty());
    let url = set(r, URL);
    let mode = set(r, MODE);
    let header = set(r, HEADER);
    let token = r.optional_secret(TOKEN);
    let allow_http_auth = r.bool_opt(ALLOW_HTTP_AUTH);
    let Some(url) = url else {
        for (var, present) in [
            (MODE, mode.is_some()),
            (HEADER, header.is_some()),
            (TOKEN, token.is_some()),
            (ALLOW_HTTP_AUTH, allow_http_auth.is_some()),
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
    let url = SecretUrl::parse(&url)
        .map_err(|e| r.errors.push(URL, e))
        .ok();
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
    if let Some(url) = &url {
        plain_http_credentials(r, url, auth.is_some(), allow_http_auth == Some(true));
    }
    let secs = |r: &mut EnvReader<'_>, v: &str, d: u64| Duration::from_secs(r.positive_u64(v, d));
    let poll_interval = secs(r, "MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S", 60);
    let removal_polls = r.positive_u64("MILLPOND_INCLUDE_VALUES_REMOVAL_POLLS", 5) as u32;
    if removal_polls == 1 {
        tracing::warn!("MILLPOND_INCLUDE_VALUES_REMOVAL_POLLS=1: removals are not damped; one bad poll removes values");
    }
    let request_timeout = secs(r, "MILLPOND_INCLUDE_VALUES_REQUEST_TIMEOUT_S", 10);
    let startup_timeout = secs(r, "MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S", 60);
    let max_body_bytes = r.positive_u64(MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES);
    Some(IncludeConfig {
        url: url?,
        mode,
        poll_interval,
        removal_polls,
        request_timeout,
        startup_timeout,
        auth,
        max_body_bytes,
    })
}

/// Credentials (the auth header, or the URL's `user:password@`) over plain
/// http:// cross the network in clear text: refused unless allowed by name.
fn plain_http_credentials(r: &mut EnvReader<'_>, url: &SecretUrl, header: bool, allowed: bool) {
    if !url.is_plain_http() {
        return;
    }
    let sent = match (header, url.has_userinfo()) {
        (false, false) => return,
        (true, false) => format!("the {HEADER} header ({TOKEN})"),
        (false, true) => "the URL's user:password@ (as basic auth)".to_owned(),
        (true, true) => format!("the {HEADER} header ({TOKEN}) and the URL's user:password@"),
    };
    if allowed {
        tracing::warn!(url = %url, "{ALLOW_HTTP_AUTH}=true: {sent} goes over plain http:// in clear text");
    } else {
        r.errors.push(
            URL,
            format!("is plain http://, which would send {sent} in clear text: use https://, or set {ALLOW_HTTP_AUTH}=true to allow it (a local endpoint)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    const TOKEN_VALUE: &str = "t0ken-hunter2";

    fn read(pairs: &[(&str, &str)]) -> Result<IncludeConfig, String> {
        read_with(pairs, true).map(|c| c.unwrap())
    }

    fn read_with(pairs: &[(&str, &str)], keep: bool) -> Result<Option<IncludeConfig>, String> {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let cfg = from_env(&mut r, keep);
        r.finish().map(|()| cfg).map_err(|e| e.to_string())
    }

    /// Each rule of the matrix names its variable; all are reported at once.
    #[test]
    fn the_startup_matrix_names_each_variable() {
        let https = "https://allow.internal/teams";
        // A URL without the keep-filter.
        let e = read_with(&[(URL, https)], false).unwrap_err();
        assert!(
            e.contains(&format!("{URL}: requires the keep-filter")),
            "{e}"
        );
        // A mode or auth variables without a URL, all named together.
        let e = read_with(
            &[
                (MODE, "authoritative"),
                (HEADER, "X-Key"),
                (TOKEN, TOKEN_VALUE),
            ],
            true,
        )
        .unwrap_err();
        assert!(e.starts_with("3 configuration error(s)"), "{e}");
        for var in [MODE, HEADER, TOKEN] {
            assert!(e.contains(&format!("{var}: is set without {URL}")), "{e}");
        }
        assert!(!e.contains(TOKEN_VALUE), "{e}");
        // The header name and the token go together, either way round.
        let e = read(&[(URL, https), (HEADER, "X-Key")]).unwrap_err();
        assert!(
            e.contains(&format!("{TOKEN}: is required with {HEADER}")),
            "{e}"
        );
        let e = read(&[(URL, https), (TOKEN, TOKEN_VALUE)]).unwrap_err();
        assert!(
            e.contains(&format!("{HEADER}: is required with {TOKEN}")),
            "{e}"
        );
        assert!(!e.contains(TOKEN_VALUE), "{e}");
        // Nothing set: no source, no error.
        assert!(read_with(&[], false).unwrap().is_none());
        let cfg = read(&with_auth(https)).unwrap();
        assert_eq!(
            cfg.auth.map(|(h, t)| (h, t.expose().to_owned())),
            Some(("X-Internal-Secret".into(), TOKEN_VALUE.into()))
        );
    }

    fn with_auth(url: &str) -> Vec<(&str, &str)> {
        vec![
            (URL, url),
            (HEADER, "X-Internal-Secret"),
            (TOKEN, TOKEN_VALUE),
        ]
    }

    #[test]
    fn credentials_over_plain_http_are_refused_unless_allowed() {
        for pairs in [
            with_auth("http://allow.internal/teams?key=q-s3cret"),
            vec![(
                URL,
                "http://svc:pa55-w0rd@allow.internal/teams?key=q-s3cret",
            )],
        ] {
            let e = read(&pairs).unwrap_err();
            assert!(e.contains(URL) && e.contains(ALLOW_HTTP_AUTH), "{e}");
            for secret in [TOKEN_VALUE, "pa55-w0rd", "q-s3cret"] {
                assert!(!e.contains(secret), "{secret} in {e}");
            }
            let mut allowed = pairs.clone();
            allowed.push((ALLOW_HTTP_AUTH, "true"));
            read(&allowed).unwrap();
        }
        // https, or http without credentials, needs no opt-in.
        read(&with_auth("https://allow.internal/teams")).unwrap();
        read(&[(URL, "http://127.0.0.1:8080/allow.json?key=q-s3cret")]).unwrap();
        // The opt-in is a dynamic-source variable: without a URL, an error.
        let e = read(&[(ALLOW_HTTP_AUTH, "true")]).unwrap_err();
        assert!(e.contains(ALLOW_HTTP_AUTH), "{e}");
    }

    #[test]
    fn the_url_and_token_are_masked_in_debug_and_errors() {
        let raw = "https://svc:pa55-w0rd@allow.internal:8443/teams?key=q-s3cret";
        let mut pairs = with_auth(raw);
        pairs.push((MAX_BODY_BYTES, "1024"));
        let cfg = read(&pairs).unwrap();
        assert_eq!(cfg.max_body_bytes, 1024);
        let shown = format!("{cfg:?}");
        for secret in [TOKEN_VALUE, "pa55-w0rd", "q-s3cret", "svc:"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("https://***@allow.internal:8443/teams?***"),
            "{shown}"
        );
        assert_eq!(
            read(&[(URL, "https://h/")]).unwrap().max_body_bytes,
            DEFAULT_MAX_BODY_BYTES
        );
        // A URL refused at startup is not echoed either.
        for bad in ["ftp://svc:pa55-w0rd@h/x", "pa55-w0rd"] {
            let e = read(&[(URL, bad)]).unwrap_err();
            assert!(e.contains(URL) && !e.contains("pa55-w0rd"), "{e}");
        }
        let e = read(&[(URL, "https://h/"), (MAX_BODY_BYTES, "0")]).unwrap_err();
        assert!(e.contains(MAX_BODY_BYTES), "{e}");
    }
}
