//! Running the real binaries as child processes.
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Path of a workspace binary built next to the test executable.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --release --workspace`",
        path.display()
    );
    path
}

/// A port free now, and never handed out before by this test process:
/// the kernel may give a just-released port again, and two writers of one
/// test on the same HTTP port would answer each other's readiness checks.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

pub struct Proc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(bin: &str, env: &[(String, String)], log_dir: &std::path::Path) -> Proc {
        Self::spawn_args(bin, &[], env, log_dir)
    }

    /// `bin args...` with only PATH, HOME and `env` in its environment.
    pub fn spawn_args(
        bin: &str,
        args: &[&str],
        env: &[(String, String)],
        log_dir: &std::path::Path,
    ) -> Proc {
        let log = log_dir.join(format!("{bin}-{}.log", crate::unique("run")));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary(bin))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("MILLPOND_LOG_FORMAT", "text")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap();
        Proc {
            child,
            name: bin.into(),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > until {
                self.kill9();
                panic!(
                    "{} did not exit within {timeout:?}; logs:\n{}",
                    self.name,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.is_running() {
            self.kill9();
        }
        if std::thread::panicking() {
            eprintln!("---- {} log ----\n{}", self.name, self.logs());
        }
    }
}

/// Polls `url` until it answers 200.
pub fn wait_http_ok(url: &str, proc: &mut Proc, timeout: Duration) {
    let until = Instant::now() + timeout;
    loop {
        if let Ok(body) = crate::scrape::get(url) {
            if body.0 == 200 {
                return;
            }
        }
        if !proc.is_running() {
            panic!(
                "{} exited while starting; logs:\n{}",
                proc.name,
                proc.logs()
            );
        }
        if Instant::now() > until {
            panic!(
                "{url} not healthy within {timeout:?}; logs:\n{}",
                proc.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
