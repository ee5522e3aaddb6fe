//! A URL as a secret (MILLPOND_INCLUDE_VALUES_URL, DUCKLAKE_METRICS_PUSH_URL,
//! HOGLAKE_URL, MILLPOND_WRITER_METRICS_URL): a URL can carry credentials in
//! its userinfo (`user:password@`) or its query (`?token=...`), so it is
//! only ever shown masked (`scheme://***@host:port/path?***`), in logs,
//! errors and Debug alike. The raw form leaves only through [`expose`],
//! for the HTTP client.
//!
//! [`expose`]: SecretUrl::expose
use std::fmt;

use url::Url;

/// Shorter parts are not masked inside free text (they would mask
/// unrelated words); they are never printed on their own either.
const MIN_SCRUB: usize = 3;

#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(Url);

impl SecretUrl {
    /// An absolute http:// or https:// URL with a host. The error never
    /// repeats the text it was given.
    pub fn parse(raw: &str) -> Result<SecretUrl, String> {
        let url = Url::parse(raw.trim()).map_err(|e| format!("is not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "must be an http:// or https:// URL (got {}://...)",
                url.scheme()
            ));
        }
        if url.host_str().is_none() {
            return Err("has no host".into());
        }
        Ok(SecretUrl(url))
    }

    /// The raw URL, for the one place that hands it to the HTTP client.
    pub fn expose(&self) -> &Url {
        &self.0
    }

    /// Plain http://: anything sent with the request crosses in clear text.
    pub fn is_plain_http(&self) -> bool {
        self.0.scheme() == "http"
    }

    /// `user:password@` (the client sends it as basic auth).
    pub fn has_userinfo(&self) -> bool {
        !self.0.username().is_empty() || self.0.password().is_some()
    }

    /// scheme://host[:port]/path, the userinfo and the query as `***`.
    pub fn masked(&self) -> String {
        let u = &self.0;
        let mut s = format!("{}://", u.scheme());
        if self.has_userinfo() {
            s.push_str("***@");
        }
        s.push_str(u.host_str().unwrap_or_default());
        if let Some(port) = u.port() {
            s.push_str(&format!(":{port}"));
        }
        s.push_str(u.path());
        if u.query().is_some() {
            s.push_str("?***");
        }
        s
    }

    /// `text` with the URL and each of its secret parts (userinfo, query,
    /// query values decoded) replaced: library errors echo URLs.
    pub fn scrub(&self, text: &str) -> String {
        let u = &self.0;
        let mut out = text.replace(u.as_str(), &self.masked());
        let mut parts: Vec<String> = vec![u.username().to_owned()];
        parts.extend(u.password().map(str::to_owned));
        parts.extend(u.query().map(str::to_owned));
        for (_, v) in u.query_pairs() {
            parts.push(v.into_owned());
        }
        // Longest first, so a part inside another does not split it.
        parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in parts.iter().filter(|p| p.len() >= MIN_SCRUB) {
            out = out.replace(p.as_str(), "***");
        }
        out
    }
}

impl From<Url> for SecretUrl {
    /// A URL already parsed (a request's), to be shown masked.
    fn from(url: Url) -> Self {
        SecretUrl(url)
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUrl({})", self.masked())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str =
        "https://svc:pa55-w0rd@allow.internal:8443/v1/teams?token=q-t0ken%2B9&x=1#frag";
    const SECRETS: [&str; 5] = ["svc", "pa55-w0rd", "q-t0ken%2B9", "q-t0ken+9", "token="];

    #[test]
    fn never_printed_raw() {
        let u = SecretUrl::parse(RAW).unwrap();
        assert_eq!(u.masked(), "https://***@allow.internal:8443/v1/teams?***");
        let debug = format!("{u:?}");
        let display = format!("{u}");
        let alt = format!("{u:#?}");
        for shown in [&debug, &display, &alt] {
            for s in SECRETS {
                assert!(!shown.contains(s), "{s} in {shown}");
            }
        }
        assert!(debug.contains("allow.internal:8443/v1/teams"), "{debug}");
        // Library errors that echo the URL or its parts are scrubbed.
        let text = format!(
            "error sending request for url ({}): user svc, password pa55-w0rd, token q-t0ken+9",
            u.expose()
        );
        let scrubbed = u.scrub(&text);
        for s in SECRETS {
            assert!(!scrubbed.contains(s), "{s} in {scrubbed}");
        }
        assert!(
            scrubbed.contains("allow.internal:8443/v1/teams?***"),
            "{scrubbed}"
        );
    }

    #[test]
    fn plain_urls_show_whole_and_bad_ones_are_not_echoed() {
        let u = SecretUrl::parse("http://127.0.0.1:8080/allow.json").unwrap();
        assert_eq!(u.to_string(), "http://127.0.0.1:8080/allow.json");
        assert!(u.is_plain_http() && !u.has_userinfo());
        for bad in ["ftp://u:hunter22@h/x", "not a url hunter22", "hunter22"] {
            let e = SecretUrl::parse(bad).unwrap_err();
            assert!(!e.contains("hunter22"), "{e}");
        }
    }
}
