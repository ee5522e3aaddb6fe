//! Minimal HTTP/1.1 GET and POST over std (no async runtime needed in tests).
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// (status, body)
pub fn get(url: &str) -> std::io::Result<(u16, String)> {
    request("GET", url, None)
}

/// POST of a JSON `body`: (status, body).
pub fn post_json(url: &str, body: &str) -> std::io::Result<(u16, String)> {
    request("POST", url, Some(body))
}

fn request(method: &str, url: &str, body: Option<&str>) -> std::io::Result<(u16, String)> {
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let body_headers = body.map_or(String::new(), |b| {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        )
    });
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{body_headers}Connection: close\r\n\r\n{}",
        body.unwrap_or("")
    )?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let status = buf
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The value of one series in a Prometheus exposition, matched by name and
/// a set of label pairs; None when absent. Sums matching series.
pub fn metric(body: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut total = None;
    for line in body.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (n, l) = series.split_once('{').unwrap_or((series, ""));
        if n != name {
            continue;
        }
        if labels
            .iter()
            .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        {
            *total.get_or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
        }
    }
    total
}

/// The names of every series in an exposition (histograms as their
/// `_bucket`, `_sum` and `_count` series, as PromQL selects them).
pub fn series_names(body: &str) -> std::collections::BTreeSet<String> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Every series of `name`: its labels (values unescaped) and its value.
pub fn samples(body: &str, name: &str) -> Vec<(std::collections::BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
        if n != name {
            continue;
        }
        let mut labels = std::collections::BTreeMap::new();
        let mut chars = rest.strip_suffix('}').unwrap_or(rest).chars().peekable();
        while chars.peek().is_some() {
            let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut val = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some('n') => val.push('\n'),
                        Some(other) => val.push(other),
                        None => break,
                    },
                    '"' => break,
                    c => val.push(c),
                }
            }
            labels.insert(key.trim_start_matches(',').to_owned(), val);
            if chars.peek() == Some(&',') {
                chars.next();
            }
        }
        out.push((labels, value.parse().unwrap_or(f64::NAN)));
    }
    out
}

/// The exposition, or an empty string while the server is not up yet.
pub fn metrics(port: u16) -> String {
    get(&format!("http://127.0.0.1:{port}/metrics"))
        .map(|r| r.1)
        .unwrap_or_default()
}
