//! An ingest process pointed at a broker and a writer.
use std::time::Duration;

use crate::process::{free_port, Proc};

pub struct Ingest {
    pub proc: Proc,
    pub http_port: u16,
}

pub struct IngestOpts<'a> {
    pub bootstrap: &'a str,
    pub topic: &'a str,
    pub table: &'a str,
    pub writer_addr: &'a str,
    pub replicas: i32,
    pub ordinal: i32,
    pub extra: Vec<(&'a str, String)>,
}

impl Ingest {
    pub fn start(o: &IngestOpts<'_>, log_dir: &std::path::Path) -> Ingest {
        let http_port = free_port();
        let mut env: Vec<(String, String)> = vec![
            ("KAFKA_BOOTSTRAP_SERVERS".into(), o.bootstrap.into()),
            ("KAFKA_TOPIC".into(), o.topic.into()),
            ("DUCKLAKE_TABLE".into(), o.table.into()),
            ("REPLICA_COUNT".into(), o.replicas.to_string()),
            ("POD_NAME".into(), format!("millpond-{}", o.ordinal)),
            ("MILLPOND_WRITER_ADDR".into(), o.writer_addr.into()),
            ("MILLPOND_HTTP_PORT".into(), http_port.to_string()),
            ("MILLPOND_HTTP_HOST".into(), "127.0.0.1".into()),
            ("FLUSH_INTERVAL_MS".into(), "1000".into()),
            ("FETCH_MAX_WAIT_MS".into(), "100".into()),
            ("FETCH_MIN_BYTES".into(), "1".into()),
            ("STATS_INTERVAL_MS".into(), "1000".into()),
            ("MILLPOND_WRITER_SEND_DEADLINE_S".into(), "60".into()),
            // Tests scrape each process on its own port; a test of the pod's
            // one scrape points this at its writer.
            ("MILLPOND_WRITER_METRICS_URL".into(), "off".into()),
        ];
        for (k, v) in &o.extra {
            env.retain(|(ek, _)| ek != k);
            env.push((k.to_string(), v.clone()));
        }
        let proc = Proc::spawn("millpond-ingest", &env, log_dir);
        Ingest { proc, http_port }
    }

    /// SIGTERM and wait for a clean exit (final flush sent and acknowledged,
    /// the writer told this ingest stopped).
    pub fn stop(mut self) {
        self.proc.signal("TERM");
        let status = self.proc.wait_exit(Duration::from_secs(60));
        assert!(
            status.success(),
            "ingest exited with {status}: {}",
            self.proc.logs()
        );
    }

    pub fn metrics(&self) -> String {
        crate::scrape::metrics(self.http_port)
    }

    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        crate::scrape::metric(&self.metrics(), name, labels).unwrap_or(0.0)
    }

    /// /readyz's status code (0 when nothing answers).
    pub fn ready(&self) -> u16 {
        crate::scrape::get(&format!("http://127.0.0.1:{}/readyz", self.http_port))
            .map(|r| r.0)
            .unwrap_or(0)
    }

    pub fn health(&self) -> u16 {
        crate::scrape::get(&format!("http://127.0.0.1:{}/healthz", self.http_port))
            .map(|r| r.0)
            .unwrap_or(0)
    }
}

/// Polls `f` until it returns true or panics after `timeout`.
pub fn eventually(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < until {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for: {what}");
}
