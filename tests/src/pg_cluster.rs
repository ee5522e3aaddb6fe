//! A throwaway Postgres cluster of one test (initdb + pg_ctl in a temp dir,
//! on a free port of 127.0.0.1), for settings the shared service must not
//! get, such as TLS with a test CA's certificate. Stopped when dropped.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::free_port;

/// Password logins over TLS only, as `USER` in the `postgres` database.
pub struct TlsCluster {
    pub port: u16,
    pub password: String,
    bin: PathBuf,
    data: PathBuf,
    /// Root runs the server as the `postgres` user (initdb refuses root).
    run_as: Option<String>,
    dir: tempfile::TempDir,
}

pub const USER: &str = "millpond";

/// Debian's newest /usr/lib/postgresql/<version>/bin (as pg_lsclusters and
/// scripts/services.sh see them), else the folder of `initdb` on PATH.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let out = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .unwrap();
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        !path.is_empty(),
        "no initdb found (install Debian's postgresql: scripts/setup-system.sh)"
    );
    Path::new(&path).parent().unwrap().to_path_buf()
}

fn command_out(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl TlsCluster {
    /// Starts a cluster whose server certificate is `cert_pem` (with its
    /// key `key_pem`) and which refuses connections without TLS.
    pub fn start(cert_pem: &str, key_pem: &str) -> TlsCluster {
        let dir = tempfile::tempdir().unwrap();
        let root = command_out(Command::new("id").arg("-u")) == "0";
        let run_as = root.then(|| "postgres".to_owned());
        let data = dir.path().join("data");
        let password = crate::unique("pw");
        std::fs::write(dir.path().join("pwfile"), &password).unwrap();
        if let Some(user) = &run_as {
            let uid: u32 = command_out(Command::new("id").args(["-u", user]))
                .parse()
                .unwrap();
            let gid: u32 = command_out(Command::new("id").args(["-g", user]))
                .parse()
                .unwrap();
            for p in [dir.path().to_path_buf(), dir.path().join("pwfile")] {
                std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
            }
        }
        let cluster = TlsCluster {
            port: free_port(),
            password,
            bin: bin_dir(),
            data: data.clone(),
            run_as,
            dir,
        };
        let pwfile = cluster.dir.path().join("pwfile");
        cluster.run(
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-U",
                USER,
                &format!("--pwfile={}", pwfile.display()),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        // Written by the server's user (as initdb's files), the key 0600:
        // Postgres refuses a key others can read.
        cluster.write_as_owner("server.crt", cert_pem, 0o644);
        cluster.write_as_owner("server.key", key_pem, 0o600);
        cluster.write_as_owner(
            "pg_hba.conf",
            "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n",
            0o600,
        );
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text.push_str(&format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nfsync = off\n",
            cluster.port,
            cluster.dir.path().display()
        ));
        std::fs::write(&conf, text).unwrap();
        let log = cluster.dir.path().join("server.log");
        cluster.run(
            "pg_ctl",
            &[
                "-D",
                &data.to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        cluster
    }

    /// The server's log, for a failing assertion.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn write_as_owner(&self, name: &str, text: &str, mode: u32) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let path = self.data.join(name);
        let owner = std::fs::metadata(&self.data).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).unwrap();
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let exe = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(exe).args(args);
                cmd
            }
            None => {
                let mut cmd = Command::new(exe);
                cmd.args(args);
                cmd
            }
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let mut cmd = self.command(program, args);
        cmd.current_dir(self.dir.path());
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{program} failed:\n{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().into_owned();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
            .current_dir(self.dir.path())
            .output();
    }
}
