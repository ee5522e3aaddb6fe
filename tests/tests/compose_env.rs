//! docker-compose.yml (and the StatefulSet) against the code:
//! tests/python/check_compose.py checks that the compose file hangs
//! together and that every variable it sets on ingest and the writer is one
//! the binary reads, as scanned from the Rust config sources.
use std::process::{Command, Output};

use millpond_tests::required_env;

fn check_compose(compose: Option<&std::path::Path>) -> Output {
    let script = millpond_tests::manifest_path("/python/check_compose.py");
    let mut cmd = Command::new(required_env("MILLPOND_PYTHON"));
    cmd.arg(script);
    if let Some(path) = compose {
        cmd.arg("--compose").arg(path);
    }
    cmd.output().unwrap()
}

#[test]
fn compose_sets_only_variables_the_binaries_read() {
    let out = check_compose(None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "compose check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("compose check: 0 failed"), "{stdout}");
    assert!(!stdout.contains("FAIL "), "{stdout}");
}

#[test]
fn a_misspelled_variable_fails_the_check() {
    let compose = millpond_tests::manifest_path("/../docker-compose.yml");
    let text = std::fs::read_to_string(compose).unwrap();
    let typo = text.replacen("FLUSH_INTERVAL_MS:", "FLUSH_INTERVAL_MSS:", 1);
    assert_ne!(
        text, typo,
        "the compose file sets FLUSH_INTERVAL_MS on ingest"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker-compose.yml");
    std::fs::write(&path, typo).unwrap();
    let out = check_compose(Some(&path));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("FAIL ") && stdout.contains("not read: FLUSH_INTERVAL_MSS"),
        "{stdout}"
    );
}
