include!("../build-support/duckdb_link.rs");

fn main() {
    link_duckdb();
}
