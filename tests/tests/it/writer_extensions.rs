//! The writer loads the DuckDB extensions its lake needs without DuckDB's
//! per-start signature check (scripts/setup-extensions.sh checked them when
//! it installed them), and checks them again on request
//! (DUCKDB_CHECK_EXTENSION_SIGNATURES=true): a copy whose signature no
//! longer matches starts an unchecked writer and is refused by a checked one.
use std::path::Path;
use std::time::Duration;

use millpond_tests::lake::{extension_dir, Backend, Lake};
use millpond_tests::process::{free_port, Proc};
use millpond_tests::writer::Writer;

/// A copy of the extensions an embedded lake loads, the ducklake one with
/// one byte of its signature (the file's last 256 bytes) changed.
fn with_a_broken_signature(into: &Path) {
    let from = Path::new(&extension_dir()).to_path_buf();
    for entry in walk(&from) {
        let to = into.join(entry.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
        if to.file_name().unwrap() == "ducklake.duckdb_extension" {
            let mut bytes = std::fs::read(&to).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            std::fs::write(&to, bytes).unwrap();
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.file_name().is_some_and(|n| {
            n == "ducklake.duckdb_extension" || n == "sqlite_scanner.duckdb_extension"
        }) {
            out.push(path);
        }
    }
    out
}

#[test]
fn signatures_are_checked_only_on_request() {
    let lake = Lake::new(Backend::Embedded, "events");
    let copy = tempfile::tempdir().unwrap();
    with_a_broken_signature(copy.path());
    let dir = copy.path().display().to_string();

    // The installed extensions pass DuckDB's check.
    Writer::start_with(&lake, &[("DUCKDB_CHECK_EXTENSION_SIGNATURES", "true")]).stop();
    // Unchecked (the default), the changed copy loads.
    Writer::start_with(&lake, &[("DUCKDB_EXTENSION_DIR", &dir)]).stop();

    // Checked, it is refused, naming the extension.
    let mut env = lake.env.clone();
    env.retain(|(k, _)| k != "DUCKDB_EXTENSION_DIR");
    env.extend(
        [
            ("DUCKDB_EXTENSION_DIR", dir),
            ("DUCKDB_CHECK_EXTENSION_SIGNATURES", "true".into()),
            ("MILLPOND_WRITER_ADDR", format!("127.0.0.1:{}", free_port())),
            ("MILLPOND_WRITER_HTTP_PORT", free_port().to_string()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let mut w = Proc::spawn("millpond-writer", &env, lake.dir.path());
    let status = w.wait_exit(Duration::from_secs(60));
    let log = w.logs();
    assert!(
        !status.success(),
        "a checked writer loaded a changed extension:\n{log}"
    );
    assert!(
        log.contains("DuckDB extension ducklake could not be loaded"),
        "the refusal does not name the extension:\n{log}"
    );
}
