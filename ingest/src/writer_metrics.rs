//! The writer's series on ingest's /metrics: at each scrape, ingest reads the
//! writer's exposition over localhost (MILLPOND_WRITER_METRICS_URL, at most
//! [`TIMEOUT`]) and appends it, so the pod's main port shows both processes
//! as the original's one process did. A writer that does not answer leaves
//! its series out of that scrape and sets `millpond_writer_metrics_up` to 0;
//! the scrape itself never fails for it.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use millpond_shared::config::{EnvReader, SecretUrl};
use millpond_shared::http::Appended;
use prometheus::IntGauge;

pub const URL_VAR: &str = "MILLPOND_WRITER_METRICS_URL";
/// The writer's default HTTP port in the same pod.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8001/metrics";
/// What turns the append off.
pub const OFF: &str = "off";
/// Well under Prometheus' default 10 s scrape timeout.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// A writer's exposition is a few hundred lines; anything far larger is
/// not one.
const MAX_BYTES: usize = 16 << 20;

/// MILLPOND_WRITER_METRICS_URL: an http(s) URL, or `off`.
/// Shown masked only, like every URL of a setting.
pub fn url_from_env(r: &mut EnvReader<'_>) -> Option<SecretUrl> {
    let text = r.string_or(URL_VAR, DEFAULT_URL);
    if text.eq_ignore_ascii_case(OFF) {
        return None;
    }
    SecretUrl::parse(&text)
        .map_err(|e| {
            r.errors.push(
                URL_VAR,
                format!("{e}: must be an http(s) URL of the writer's /metrics, or {OFF:?}"),
            )
        })
        .ok()
}

/// Reads the writer's exposition at `url` for each scrape.
pub fn appended(url: SecretUrl, up: IntGauge) -> anyhow::Result<Appended> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    // Whether the last read failed: a failure is logged once, not per scrape.
    let failing = Arc::new(AtomicBool::new(false));
    Ok(Arc::new(move || {
        let (client, url, up, failing) = (client.clone(), url.clone(), up.clone(), failing.clone());
        Box::pin(async move {
            match read(&client, &url).await {
                Ok(body) => {
                    up.set(1);
                    if failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(url = %url, "the writer's metrics answer again");
                    }
                    Some(body)
                }
                Err(e) => {
                    up.set(0);
                    if !failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(url = %url, error = %e,
                            "the writer's metrics did not answer; /metrics shows ingest's series only (millpond_writer_metrics_up 0)");
                    }
                    None
                }
            }
        })
    }))
}

async fn read(client: &reqwest::Client, url: &SecretUrl) -> Result<String, String> {
    let resp = client
        .get(url.expose().clone())
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    if resp.content_length().is_some_and(|n| n > MAX_BYTES as u64) {
        return Err(format!("the answer is over {MAX_BYTES} bytes"));
    }
    let body = resp.text().await.map_err(|e| e.without_url().to_string())?;
    if body.len() > MAX_BYTES {
        return Err(format!("the answer is over {MAX_BYTES} bytes"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn parse(value: Option<&str>) -> (Option<String>, String) {
        let env = Env::from_pairs(value.map(|v| (URL_VAR, v)));
        let mut r = EnvReader::new(&env);
        let url = url_from_env(&mut r).map(|u| u.to_string());
        let errors = r.finish().err().map(|e| e.to_string()).unwrap_or_default();
        (url, errors)
    }

    #[test]
    fn the_default_is_the_writer_in_the_same_pod() {
        assert_eq!(parse(None), (Some(DEFAULT_URL.to_owned()), String::new()));
        assert_eq!(parse(Some("OFF")), (None, String::new()));
        assert_eq!(
            parse(Some("http://writer:9001/metrics")).0.as_deref(),
            Some("http://writer:9001/metrics")
        );
    }

    #[test]
    fn anything_else_is_refused_naming_the_variable() {
        for bad in ["writer:8001", "ftp://writer/metrics", "http://"] {
            let (url, errors) = parse(Some(bad));
            assert_eq!(url, None, "{bad}");
            assert!(errors.contains(URL_VAR), "{bad}: {errors}");
        }
    }
}
