//! A writer process pointed at a test lake (DuckLake, or any sink's env).
use std::path::Path;
use std::time::Duration;

use crate::lake::Lake;
use crate::process::{free_port, Proc};

pub struct Writer {
    pub proc: Proc,
    pub addr: String,
    pub http_port: u16,
}

impl Writer {
    pub fn start(lake: &Lake) -> Writer {
        Self::start_with(lake, &[])
    }

    pub fn start_with(lake: &Lake, extra: &[(&str, &str)]) -> Writer {
        Self::start_env(&lake.env, lake.dir.path(), extra)
    }

    /// Starts a writer with the sink settings `sink_env` (plus `extra`, which
    /// wins), logging into `log_dir`, on free ports. A port taken by another
    /// process between choosing it and binding it is retried with new ports.
    pub fn start_env(
        sink_env: &[(String, String)],
        log_dir: &Path,
        extra: &[(&str, &str)],
    ) -> Writer {
        for _ in 0..3 {
            if let Some(w) = Self::try_start(sink_env, log_dir, extra) {
                return w;
            }
        }
        panic!("the writer could not bind free ports three times");
    }

    fn try_start(
        sink_env: &[(String, String)],
        log_dir: &Path,
        extra: &[(&str, &str)],
    ) -> Option<Writer> {
        let port = free_port();
        let http_port = free_port();
        let mut env = sink_env.to_vec();
        env.push(("MILLPOND_WRITER_ADDR".into(), format!("127.0.0.1:{port}")));
        env.push(("MILLPOND_WRITER_HTTP_PORT".into(), http_port.to_string()));
        env.push(("MILLPOND_HTTP_HOST".into(), "127.0.0.1".into()));
        // One pod unless a test says otherwise: a restarted writer is the
        // same pod (name and UID, as the StatefulSet's downward API gives
        // them), so it takes its leases back at once.
        env.push(("POD_NAME".into(), "millpond-0".into()));
        env.push(("POD_UID".into(), "millpond-0-uid".into()));
        for (k, v) in extra {
            env.retain(|(ek, _)| ek != k);
            env.push((k.to_string(), v.to_string()));
        }
        // An `extra` MILLPOND_WRITER_ADDR (a restart on the same port) wins.
        let addr = env
            .iter()
            .find(|(k, _)| k == "MILLPOND_WRITER_ADDR")
            .map(|(_, v)| v.clone())
            .expect("set above");
        let mut proc = Proc::spawn("millpond-writer", &env, log_dir);
        let url = format!("http://127.0.0.1:{http_port}/readyz");
        let until = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            // Ready, and still running: a /readyz of another process on
            // this port must not pass for ours.
            if crate::scrape::get(&url).is_ok_and(|r| r.0 == 200)
                && std::net::TcpStream::connect(&addr).is_ok()
                && proc.is_running()
            {
                return Some(Writer {
                    proc,
                    addr,
                    http_port,
                });
            }
            if !proc.is_running() {
                let logs = proc.logs();
                if logs.contains("Address already in use") {
                    return None;
                }
                panic!("millpond-writer exited while starting; logs:\n{logs}");
            }
            assert!(
                std::time::Instant::now() < until,
                "{url} not ready within 60 s; logs:\n{}",
                proc.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM and wait for a clean exit; an embedded lake can be read by
    /// another process only once the writer released the catalog file.
    pub fn stop(mut self) {
        self.proc.signal("TERM");
        let status = self.proc.wait_exit(Duration::from_secs(30));
        assert!(
            status.success(),
            "writer exited with {status}: {}",
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
}
