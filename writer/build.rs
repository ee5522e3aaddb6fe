include!("../build-support/duckdb_link.rs");

fn main() {
    // The hoglake-only writer (`--no-default-features`) links no DuckDB.
    if std::env::var_os("CARGO_FEATURE_DUCKLAKE").is_some() {
        link_duckdb();
    }
}
