//! Converts a file of payloads (one per line) in one `convert` call and
//! prints what came out: the workload of `scripts/bench-convert-instructions.sh`,
//! which counts this program's instructions inside `convert` with callgrind.
//!
//! Run: `cargo run --release -p millpond-ingest --example convert_file -- FILE`

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: convert_file FILE (one payload per line)");
        return ExitCode::from(2);
    };
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}: {e}", path.to_string_lossy());
            return ExitCode::FAILURE;
        }
    };
    let payloads: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let out = millpond_ingest::convert::convert(&payloads);
    println!(
        "payloads={} rows={} skipped={} columns={} arrow_bytes={}",
        payloads.len(),
        out.rows,
        out.skipped.len(),
        out.batch.as_ref().map_or(0, |b| b.num_columns()),
        out.arrow_bytes
    );
    ExitCode::SUCCESS
}
