//! nisshi, a Kafka-compatible broker, as a separate process (installed by
//! scripts/setup-nisshi.sh).
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::free_port;

pub struct Nisshi {
    child: Child,
    pub bootstrap: String,
    url: String,
    _dir: tempfile::TempDir,
}

fn nisshi_bin() -> String {
    let home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap()));
    let bin = format!("{home}/bin/nisshi");
    assert!(
        std::path::Path::new(&bin).exists(),
        "{bin} missing: run scripts/setup-nisshi.sh"
    );
    bin
}

impl Nisshi {
    /// A broker with memory storage (no test restarts it), logging into a
    /// temp dir.
    pub fn start() -> Nisshi {
        Self::start_on(free_port(), None)
    }

    /// A broker listening on `port` that advertises `advertised`
    /// (host:port) to clients, e.g. a proxy in front of it. The CLI still
    /// reaches it directly.
    pub fn start_advertising(port: u16, advertised: &str) -> Nisshi {
        Self::start_on(port, Some(format!("tcp://{advertised}")))
    }

    fn start_on(port: u16, advertised: Option<String>) -> Nisshi {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("tcp://127.0.0.1:{port}");
        let advertised = advertised.unwrap_or_else(|| url.clone());
        let log = std::fs::File::create(dir.path().join("nisshi.log")).unwrap();
        let child = Command::new(nisshi_bin())
            .current_dir(dir.path())
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &advertised,
            ])
            .args(["--storage-engine", "memory://nisshi/"])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let n = Nisshi {
            child,
            bootstrap: format!("127.0.0.1:{port}"),
            url,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(60);
        while !n.cli(&["topic", "list"]) {
            assert!(Instant::now() < until, "nisshi did not become ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        n
    }

    fn cli(&self, args: &[&str]) -> bool {
        Command::new(nisshi_bin())
            .args(args)
            .args(["--broker", &self.url])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    pub fn create_topic(&self, name: &str, partitions: i32) {
        assert!(
            self.cli(&[
                "topic",
                "create",
                "--partitions",
                &partitions.to_string(),
                name
            ]),
            "create topic {name}"
        );
    }
}

impl Drop for Nisshi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
