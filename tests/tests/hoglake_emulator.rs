//! The project's hoglake emulator, checked by the official client:
//! pyhoglake replays its captured session against it (every request and
//! answer must match the capture) and drives the fault scenarios the
//! hoglake writer's tests rely on.
use std::process::Command;

use millpond_tests::required_env;

#[test]
fn pyhoglake_agrees_with_the_emulator() {
    let script = millpond_tests::manifest_path("/python/check_hoglake_emulator.py");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .arg(script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pyhoglake check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert!(!stdout.contains("FAIL "), "{stdout}");
}
