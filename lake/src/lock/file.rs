//! The maintenance lock of an embedded catalog: an exclusive `flock` on
//! `<catalog file>.millpond-lake.lock`, beside the catalog. The kernel
//! releases it when the process ends, however it ends. The holder writes
//! who it is into the file, for the run that waits.
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

use super::{busy, utc, waiting, Holder};

pub struct FileLock {
    file: File,
}

impl Drop for FileLock {
    /// An empty file: no one holds it (the lock itself goes with the file
    /// handle).
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// The lock file of the catalog at `catalog`.
pub fn path(catalog: &Path) -> PathBuf {
    let mut name = catalog.as_os_str().to_owned();
    name.push(".millpond-lake.lock");
    PathBuf::from(name)
}

pub fn take(catalog: &Path, me: &Holder, wait: Duration, target: &str) -> anyhow::Result<FileLock> {
    let path = path(catalog);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("open the lock file {}", path.display()))?;
    let deadline = Instant::now() + wait;
    let mut told = false;
    while !try_lock(&file).with_context(|| format!("lock {}", path.display()))? {
        let holder = holder(&mut file, &path);
        if Instant::now() >= deadline {
            return Err(busy(target, &holder, wait));
        }
        if !told {
            waiting(target, &holder, wait);
            told = true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(
        file,
        "pid {}\nhost {}\ncommand millpond-lake {}\nsince {}\n",
        me.pid,
        me.host,
        me.line,
        utc(SystemTime::now())
    )?;
    file.flush()?;
    Ok(FileLock { file })
}

/// Ok(false): another process holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: a valid open descriptor for the duration of the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

/// The holder as its file says, on one line.
fn holder(file: &mut File, path: &Path) -> String {
    let mut text = String::new();
    let read = file.rewind().and_then(|_| file.read_to_string(&mut text));
    let said: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match (read, said.is_empty()) {
        (Ok(_), false) => format!("{} ({})", said.join(", "), path.display()),
        _ => format!("a process that has not written {} yet", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_waits_then_names_the_holder() {
        let dir = tempfile_dir();
        let catalog = dir.join("catalog.sqlite");
        let me = Holder::me("compact", "compact --yes");
        let held = take(&catalog, &me, Duration::ZERO, "lake").unwrap();
        let started = Instant::now();
        let e = take(&catalog, &me, Duration::from_millis(300), "lake")
            .err()
            .unwrap()
            .to_string();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(
            e.contains(&format!("pid {}", std::process::id()))
                && e.contains("command millpond-lake compact --yes")
                && e.contains("since "),
            "{e}"
        );
        drop(held);
        let again = take(&catalog, &me, Duration::ZERO, "lake");
        assert!(again.is_ok());
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "millpond-lake-lock-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
