//! The reference generated from the code (docs/reference/): the
//! configuration page lists exactly the variables the binaries read, with
//! each one's default and meaning from shared/src/config/variables.toml,
//! and is what scripts/gen-reference.sh renders. (The metrics page is
//! checked by millpond-shared's own test, `metrics::reference`.)
#[test]
fn the_configuration_reference_is_the_code_s() {
    let out = millpond_tests::python_check("check_reference.py", "reference check");
    assert!(
        out.contains("docs/reference/configuration.md is current"),
        "{out}"
    );
}

/// Every command the docs' ```sh blocks show names a script, binary,
/// subcommand, flag, package or feature that exists: checked against the
/// scripts and the binaries' `--help`, so a renamed flag fails here.
#[test]
fn every_command_the_docs_show_exists_as_shown() {
    let bins = millpond_tests::process::binary("millpond-lake");
    let out = std::process::Command::new(millpond_tests::required_env("MILLPOND_PYTHON"))
        .arg(millpond_tests::manifest_path(
            "/python/check_doc_commands.py",
        ))
        .arg("--bin-dir")
        .arg(bins.parent().unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 0 failed"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("checked 0 commands"), "{stdout}");
}
