//! The spool's folders are the writer's alone: made with mode 0700, owned
//! by the writer's user, never reached through a symbolic link. A shared
//! temp folder is a place other local users can plant names in: a symlink
//! planted where the spool goes once made a starting writer delete the
//! folders it pointed to, and files another user can open can be swapped
//! between their write and their upload.
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The spool's base when MILLPOND_SPOOL_DIR is unset: a folder of this
/// user's own in the temp folder (`<tmp>/millpond-writer-spool-<uid>`).
pub fn default_base(tmp: &Path) -> PathBuf {
    tmp.join(format!("millpond-writer-spool-{}", euid()))
}

/// Makes `path` (and missing parents) a folder only this user can use,
/// or checks the one there; refuses one that is not (see [`check`]).
pub fn ensure(path: &Path) -> Result<(), String> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(path)
                .map_err(|e| format!("creating the spool folder {}: {e}", path.display()))?;
        }
        Err(e) => return Err(format!("creating the spool folder {}: {e}", path.display())),
    }
    check(path)
}

/// Whether `path` is a private folder of this user: a folder (not a
/// symbolic link, whatever it points to), owned by this user, with no
/// access for group or others. The error names the path and what is
/// wrong with it.
pub fn check(path: &Path) -> Result<(), String> {
    let refuse = |why: String| {
        Err(format!(
            "the spool folder {} {why}; the spool must be a folder of the writer's own \
             (mode 0700, owned by uid {}): remove it, or set MILLPOND_SPOOL_DIR to another path",
            path.display(),
            euid()
        ))
    };
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("the spool folder {}: {e}", path.display()))?;
    if meta.file_type().is_symlink() {
        return refuse("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return refuse("is not a folder".into());
    }
    if meta.uid() != euid() {
        return refuse(format!("is owned by uid {}", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return refuse(format!("is open to group or others (mode {mode:04o})"));
    }
    Ok(())
}

/// Whether `entry` in a private base is one this writer may delete: a
/// folder named as the writer names its own (a UUID), owned by this user,
/// not a symbolic link.
pub fn is_own_folder(entry: &Path) -> bool {
    let named = entry
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| uuid::Uuid::try_parse(n).is_ok());
    named
        && std::fs::symlink_metadata(entry)
            .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink() && m.uid() == euid())
}

/// A new file at `path` that only this user can read (0600): never an
/// existing file, never through a symbolic link.
pub fn new_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
#[path = "private_dir_tests.rs"]
mod tests;
