//! One poll: GET the URL (the auth header attached), read at most
//! MILLPOND_INCLUDE_VALUES_MAX_BODY_BYTES of the body as it streams in, and
//! parse a JSON array of scalars. A larger body fails the poll whole: a set
//! cut at the cap is never applied. Error texts are scrubbed of the URL's
//! secrets and the token.
use std::io::Read;

use super::config::{IncludeConfig, MAX_BODY_BYTES};
use super::set::Value;

pub fn fetch(
    client: &reqwest::blocking::Client,
    cfg: &IncludeConfig,
) -> anyhow::Result<Vec<Value>> {
    let clean = |text: String| {
        let text = cfg.url.scrub(&text);
        match &cfg.auth {
            Some((_, token)) => token.scrub(&text),
            None => text,
        }
    };
    let mut req = client.get(cfg.url.expose().clone());
    if let Some((name, token)) = &cfg.auth {
        req = req.header(name.as_str(), token.expose());
    }
    let resp = req
        .send()
        .map_err(|e| anyhow::anyhow!("{}", clean(chain(&e.without_url()))))?;
    let status = resp.status();
    if !status.is_success() {
        anyhow::bail!("HTTP {status}");
    }
    let declared = resp.content_length();
    let body = read_capped(resp, declared, cfg.max_body_bytes)
        .map_err(|e| anyhow::anyhow!("{}", clean(e)))?;
    parse(&body)
}

/// The error and its causes, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    s
}

/// The whole body if it holds at most `cap` bytes; reading stops one byte
/// past the cap, and a declared length over it is refused before reading.
fn read_capped(body: impl Read, declared: Option<u64>, cap: u64) -> Result<Vec<u8>, String> {
    let over = |what: String| format!("{what}, over {MAX_BODY_BYTES} ({cap} bytes)");
    if let Some(n) = declared.filter(|n| *n > cap) {
        return Err(over(format!("the response declares {n} bytes")));
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(cap) as usize);
    body.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the response: {}", chain(&e)))?;
    if buf.len() as u64 > cap {
        return Err(over("the response is longer".into()));
    }
    Ok(buf)
}

fn parse(body: &[u8]) -> anyhow::Result<Vec<Value>> {
    let body: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| anyhow::anyhow!("not JSON: {e}"))?;
    let serde_json::Value::Array(items) = body else {
        anyhow::bail!("not a JSON array");
    };
    items
        .into_iter()
        .map(|v| match v {
            serde_json::Value::Number(n) => n
                .as_i64()
                .map(Value::Int)
                .ok_or_else(|| anyhow::anyhow!("{n} is not an integer")),
            serde_json::Value::String(s) => Ok(Value::Text(s)),
            other => anyhow::bail!("{other} is not a scalar"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that counts what was read from it.
    struct Counted<'a>(&'a [u8], &'a mut usize);

    impl Read for Counted<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(out)?;
            *self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn a_body_over_the_cap_is_refused_whole_not_cut() {
        let body = b"[1,2,3,4,5,6,7,8,9,10]"; // 22 bytes
        let mut read = 0;
        assert_eq!(
            read_capped(Counted(body, &mut read), None, 22).unwrap(),
            body
        );
        let mut read = 0;
        let e = read_capped(Counted(&body.repeat(1000), &mut read), None, 22).unwrap_err();
        assert!(e.contains(MAX_BODY_BYTES) && e.contains("22 bytes"), "{e}");
        assert_eq!(read, 23, "reading stops one byte past the cap");
        // A declared length over the cap is refused before any read.
        let mut read = 0;
        let e = read_capped(Counted(body, &mut read), Some(22_000), 22).unwrap_err();
        assert!(e.contains("declares 22000 bytes"), "{e}");
        assert_eq!(read, 0);
    }

    #[test]
    fn scalars_only() {
        assert_eq!(
            parse(br#"[1, "a"]"#).unwrap(),
            [Value::Int(1), Value::Text("a".into())]
        );
        for bad in [&b"{}"[..], b"[1.5]", b"[[1]]", b"[1,"] {
            assert!(parse(bad).is_err());
        }
    }
}
