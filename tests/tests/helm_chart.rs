//! The Helm chart (deploy/helm/millpond), rendered and linted by real Helm
//! (helm-python-sdk) and validated against the Kubernetes schemas; each check
//! on the render is also run against a broken render and must fail there.
use std::process::Command;

use millpond_tests::required_env;

#[test]
fn helm_chart_renders_and_validates() {
    let script = millpond_tests::manifest_path("/python/check_helm_chart.py");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .arg(script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helm chart check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert!(!stdout.contains("FAIL "), "{stdout}");
}
