// Shared by the build scripts of every package whose binaries or tests link
// DuckDB (`include!`d, so there is one copy of the rule).
//
// By default the duckdb crate links DuckDB's prebuilt shared library from
// $DUCKDB_LIB_DIR (scripts/setup-duckdb.sh puts it there; scripts/env.sh
// sets the variable). The directory is recorded as an rpath so the binaries
// find the library without LD_LIBRARY_PATH; images put it in /usr/local/lib.
// With the cargo feature `bundled`, DuckDB is compiled from source and
// nothing here applies.
fn link_duckdb() {
    println!("cargo:rerun-if-env-changed=DUCKDB_LIB_DIR");
    if std::env::var_os("CARGO_FEATURE_BUNDLED").is_some() {
        return;
    }
    let hint = "run `. scripts/env.sh && scripts/setup-duckdb.sh` (scripts/demo.sh and \
                scripts/test.sh do this), or build with the cargo feature `bundled` to compile \
                DuckDB from source";
    let dir = match std::env::var("DUCKDB_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => panic!("DUCKDB_LIB_DIR is not set: {hint}"),
    };
    let lib = std::path::Path::new(&dir).join("libduckdb.so");
    if !lib.is_file() {
        panic!("{} does not exist: {hint}", lib.display());
    }
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
