//! The maintenance lock: one `millpond-lake` run at a time changes a
//! catalog. Every command that changes the lake takes it before it opens
//! the lake and holds it to its end (a recipe chain once, for all its
//! steps); commands that only read take none. On a Postgres catalog it is
//! a session-level advisory lock held by a connection of its own
//! (`postgres.rs`), so every run on the catalog's database shares it
//! whichever CronJob, pipeline or person started it; on an embedded
//! catalog it is a lock file beside the catalog file (`file.rs`). A run
//! waits a bounded time for it (`--lock-wait`, MILLPOND_LAKE_LOCK_WAIT),
//! then gives up naming the run that holds it.
mod file;
mod postgres;

use std::time::Duration;

use millpond_writer::lake_api::{Catalog, LakeConfig};

/// Who holds (or wants) the lock, as another run is told.
#[derive(Debug, Clone)]
pub struct Holder {
    /// The subcommand, e.g. `run` or `compact`.
    pub command: String,
    /// The whole command line after the program name.
    pub line: String,
    /// The host name (a pod's name in Kubernetes).
    pub host: String,
    pub pid: u32,
}

impl Holder {
    /// This process, running `command` with the arguments `line`.
    pub fn me(command: &str, line: &str) -> Holder {
        Holder {
            command: command.to_owned(),
            line: line.to_owned(),
            host: host_name(),
            pid: std::process::id(),
        }
    }

    /// `millpond-lake <command> <host> <pid>`, as Postgres shows a session
    /// (`application_name`, at most 63 bytes).
    pub fn application_name(&self) -> String {
        let mut name = format!("millpond-lake {} {} {}", self.command, self.host, self.pid);
        while name.len() > 63 {
            name.pop();
        }
        name
    }
}

/// Held until dropped (or the process ends: the lock goes with it).
pub enum LakeLock {
    /// Boxed: a client is ~300 bytes, a file handle 4.
    Postgres {
        _held: Box<postgres::PgLock>,
    },
    File {
        _held: file::FileLock,
    },
    /// No embedded catalog there: nothing to lock, and opening the lake
    /// refuses it (a lock file must not start a lake in the wrong folder).
    NoCatalog,
}

impl LakeLock {
    /// Whether the lock is still held: a Postgres lock goes with its
    /// connection, which an idle timeout, a proxy or the network may end
    /// while the run works. A chain checks before each step and stops
    /// rather than go on unlocked beside another run.
    pub fn check(&mut self) -> anyhow::Result<()> {
        match self {
            LakeLock::Postgres { _held } => _held.check(),
            LakeLock::File { .. } | LakeLock::NoCatalog => Ok(()),
        }
    }
}

/// Takes the lake's maintenance lock, waiting at most `wait` for another
/// run to release it; the error names the holder.
pub fn take(cfg: &LakeConfig, me: &Holder, wait: Duration) -> anyhow::Result<LakeLock> {
    let target = cfg.describe();
    match &cfg.catalog {
        Catalog::Postgres { .. } => {
            postgres::take(&cfg.catalog, me, wait, &target).map(|held| LakeLock::Postgres {
                _held: Box::new(held),
            })
        }
        Catalog::Embedded { path, .. } if !path.exists() => Ok(LakeLock::NoCatalog),
        Catalog::Embedded { path, .. } => {
            file::take(path, me, wait, &target).map(|_held| LakeLock::File { _held })
        }
    }
}

/// What a run that gave up says.
fn busy(target: &str, holder: &str, wait: Duration) -> anyhow::Error {
    anyhow::anyhow!(
        "another run holds the maintenance lock of {target}: {holder}; gave up after waiting {} \
         (--lock-wait, MILLPOND_LAKE_LOCK_WAIT); nothing changed",
        seconds(wait)
    )
}

fn waiting(target: &str, holder: &str, wait: Duration) {
    eprintln!(
        "millpond-lake: waiting up to {} for the maintenance lock of {target}, held by {holder}",
        seconds(wait)
    );
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64().round() as u64)
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most
    // that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `2026-12-05T04:10:00Z` for a time since the epoch (UTC).
fn utc(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_utc() {
        let at = |s: u64| utc(std::time::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_796_443_199), "2026-12-05T03:59:59Z");
    }

    #[test]
    fn the_application_name_fits_postgres() {
        let mut me = Holder::me("run", "--yes run expire-7d");
        me.host = "h".repeat(80);
        let name = me.application_name();
        assert_eq!(name.len(), 63);
        assert!(name.starts_with("millpond-lake run hhh"), "{name}");
    }
}
