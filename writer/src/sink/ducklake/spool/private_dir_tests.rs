use super::*;
use crate::sink::ducklake::config::S3Config;
use crate::sink::ducklake::spool::remote::{staging, Remote};
use crate::sink::ducklake::spool::Spool;
use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use millpond_shared::config::Secret;
use parquet::basic::Compression;
use std::os::unix::fs::symlink;
use std::sync::Arc;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// A folder of someone else's with a file in it: what a planted link
/// points to.
fn victim(under: &Path) -> (PathBuf, PathBuf) {
    let dir = under.join("victim");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("precious.txt");
    std::fs::write(&file, b"keep me").unwrap();
    (dir, file)
}

/// Another local user planted a symlink where the spool goes (the default
/// base in a shared TMPDIR, and the name earlier versions used): the
/// writer refuses the base, naming it, and deletes nothing it points to.
#[test]
fn a_symlink_planted_where_the_spool_goes_is_refused_and_its_target_survives() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, file) = victim(tmp.path());
    let base = default_base(tmp.path());
    symlink(&dir, &base).unwrap();
    symlink(&dir, tmp.path().join("millpond-writer-spool")).unwrap();
    // A UUID-named folder inside the target, as a writer's own would be.
    let inner = dir.join(uuid::Uuid::new_v4().to_string());
    std::fs::create_dir(&inner).unwrap();

    let err = staging(&base).unwrap_err();
    assert!(err.contains(&base.display().to_string()), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(
        file.exists() && inner.exists(),
        "the link's target is untouched"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // So does a dangling one (mkdir would not follow it either).
    std::fs::remove_file(&base).unwrap();
    symlink(tmp.path().join("nowhere"), &base).unwrap();
    assert!(staging(&base).unwrap_err().contains("symbolic link"));
    assert!(!tmp.path().join("nowhere").exists());
}

/// Inside the writer's own base, startup removes only folders it can
/// prove are a writer's: a UUID-named link is left, and a dead writer's
/// folder holding a link loses the link, never what it points to.
#[test]
fn startup_cleans_only_its_own_folders_and_follows_no_link() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, file) = victim(tmp.path());
    let base = tmp.path().join("spool");
    ensure(&base).unwrap();
    let linked = base.join(uuid::Uuid::new_v4().to_string());
    symlink(&dir, &linked).unwrap();
    let dead = base.join(uuid::Uuid::new_v4().to_string());
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join(".lock"), b"").unwrap();
    symlink(&dir, dead.join("inside")).unwrap();
    let other = base.join("not-a-writers");
    std::fs::create_dir(&other).unwrap();
    // Lock files no one holds: each would pass for a dead writer's folder.
    for d in [&dir, &other] {
        std::fs::write(d.join(".lock"), b"").unwrap();
    }

    let (own, _lock) = staging(&base).unwrap();
    assert!(!dead.exists(), "a dead writer's folder is removed");
    assert!(
        std::fs::symlink_metadata(&linked).is_ok(),
        "a link is not a writer's folder"
    );
    assert!(other.exists(), "a folder not named by a writer stays");
    assert!(file.exists() && dir.exists(), "no link was followed");
    assert!(own.starts_with(&base));
}

fn s3() -> S3Config {
    S3Config {
        key_id: Secret::new("AKIDEXAMPLE"),
        secret: Secret::new("secret"),
        region: Some("us-east-1".into()),
        endpoint: Some("127.0.0.1:9".into()),
        use_ssl: Some(false),
        url_style: Some("path".into()),
    }
}

/// The base, the writer's folder and its lock are made private, and every
/// file waiting for its upload (written, or joined) is 0600.
#[test]
fn spool_folders_are_0700_and_spool_files_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("a/spool");
    let remote = Remote::for_data_path("s3://b/lake", Some(&s3()), "main/events", &base)
        .unwrap()
        .unwrap();
    assert_eq!(mode(&base), 0o700);
    assert_eq!(mode(&remote.staging), 0o700);
    assert_eq!(mode(&remote.staging.join(".lock")), 0o600);

    let mut spool = Spool::new(
        tmp.path().join("unused"),
        Compression::LZ4_RAW,
        None,
        &Default::default(),
    )
    .with_remote(Arc::new(remote));
    let a = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
    let b = Arc::new(Int64Array::from(vec![3])) as ArrayRef;
    spool
        .write(&RecordBatch::try_from_iter([("a", a)]).unwrap())
        .unwrap();
    spool
        .write(&RecordBatch::try_from_iter([("b", b)]).unwrap())
        .unwrap();
    spool.close().unwrap();
    assert_eq!(spool.files.len(), 2);
    assert_eq!(spool.merge_files(false), 2, "joined into one");
    assert_eq!(spool.files.len(), 1);
    for f in &spool.files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
}

/// A base that exists but is not private is refused, the error naming the
/// path and what is wrong; nothing is changed in it.
#[test]
fn a_base_of_another_user_or_open_to_others_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = ensure(&open).unwrap_err();
    assert!(err.contains(&open.display().to_string()), "{err}");
    assert!(err.contains("mode 0755"), "{err}");
    assert_eq!(mode(&open), 0o755, "left as it was");

    let file = tmp.path().join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(ensure(&file).unwrap_err().contains("is not a folder"));

    // Another user's folder: made so when the test runs as root; otherwise
    // `/` is one (root's).
    let theirs = if euid() == 0 {
        let d = tmp.path().join("theirs");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        d
    } else {
        PathBuf::from("/")
    };
    let err = check(&theirs).unwrap_err();
    assert!(err.contains(&theirs.display().to_string()), "{err}");
    assert!(err.contains("is owned by uid"), "{err}");
    let err = staging(&theirs).unwrap_err();
    assert!(err.contains("is owned by uid"), "{err}");
}
