//! Running `millpond-lake` against a test lake, and a local HTTP receiver
//! for its metrics push.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::lake::Lake;
use crate::process::binary;

/// What one run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Asserts the run succeeded; returns its stdout.
    pub fn ok(&self) -> &str {
        assert!(self.success(), "millpond-lake failed: {self:#?}");
        &self.stdout
    }

    /// The stdout lines starting with two spaces: the paths a command lists.
    pub fn listed(&self) -> Vec<String> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| !l.starts_with("..."))
            .map(str::to_owned)
            .collect()
    }
}

/// `millpond-lake <args>` with the lake's env (as a writer of it gets),
/// plus `extra`, with no terminal on stdin (as in a CronJob).
fn command(lake: &Lake, extra: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new(binary("millpond-lake"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("MILLPOND_LOG_FORMAT", "text")
        .envs(lake.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(extra.iter().copied())
        .args(args)
        .stdin(Stdio::null());
    c
}

pub fn lake_cli_with(lake: &Lake, extra: &[(&str, &str)], args: &[&str]) -> Run {
    let out = command(lake, extra, args)
        .output()
        .expect("run millpond-lake");
    Run::from(out)
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// `millpond-lake <args>` started in the background (as [`lake_cli_with`]);
/// `wait_with_output` and `Run::from` give its run.
pub fn spawn_lake_cli(lake: &Lake, extra: &[(&str, &str)], args: &[&str]) -> std::process::Child {
    command(lake, extra, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start millpond-lake")
}

pub fn lake_cli(lake: &Lake, args: &[&str]) -> Run {
    lake_cli_with(lake, &[], args)
}

/// One received request: method, path, body.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: String,
}

/// An HTTP server on 127.0.0.1:0 that answers every request with `status`
/// and hands each request to the test.
pub struct Receiver {
    pub url: String,
    requests: mpsc::Receiver<Received>,
}

impl Receiver {
    pub fn start(status: u16) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, requests) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut parts = line.split_whitespace();
                let (method, path) = (
                    parts.next().unwrap_or_default().to_owned(),
                    parts.next().unwrap_or_default().to_owned(),
                );
                let (mut length, mut content_type) = (0, String::new());
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    let (k, v) = h.split_once(':').unwrap_or((&h, ""));
                    match k.trim().to_ascii_lowercase().as_str() {
                        "content-length" => length = v.trim().parse().unwrap_or(0),
                        "content-type" => content_type = v.trim().to_owned(),
                        _ => {}
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = tx.send(Received {
                    method,
                    path,
                    content_type,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
            }
        });
        Receiver { url, requests }
    }

    pub fn next(&self) -> Received {
        self.requests
            .recv_timeout(Duration::from_secs(30))
            .expect("a request within 30 s")
    }
}
