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
