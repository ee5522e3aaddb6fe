//! A DuckDB shell on the lake, set up exactly as the writer's session
//! (extensions from DUCKDB_EXTENSION_DIR, S3 settings, the lake attached as
//! `lake` and made the default database). `--sql` runs statements and
//! exits; without it statements are read from stdin, each ending with `;`.
use std::io::{BufRead, IsTerminal, Write};

use arrow::record_batch::RecordBatch;
use arrow::util::pretty::pretty_format_batches;

use super::catalog::Lake;

/// Runs one statement (of several, the last one's result counts) and
/// prints its result as a table.
pub fn run_one(lake: &Lake, sql: &str) -> anyhow::Result<()> {
    let mut stmt = lake.conn().prepare(sql).map_err(|e| lake_error(lake, e))?;
    let batches: Vec<RecordBatch> = stmt
        .query_arrow([])
        .map_err(|e| lake_error(lake, e))?
        .collect();
    if batches.iter().all(|b| b.num_columns() == 0) {
        println!("OK");
    } else {
        println!("{}", pretty_format_batches(&batches)?);
    }
    Ok(())
}

fn lake_error(lake: &Lake, e: duckdb::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "{}",
        millpond_writer::lake_api::scrub(&lake.cfg, &e.to_string())
    )
}

/// `--sql` statements in order; stops at the first failure.
pub fn run_all(lake: &Lake, statements: &[String]) -> anyhow::Result<()> {
    lake.exec("USE lake")?;
    for sql in statements {
        run_one(lake, sql)?;
    }
    Ok(())
}

/// Reads statements from stdin (a prompt on a terminal). A failed
/// statement is reported and the shell goes on; on piped input the exit
/// status says whether any failed.
pub fn interactive(lake: &Lake) -> anyhow::Result<bool> {
    lake.exec("USE lake")?;
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    if tty {
        println!(
            "{}\nthe lake is the default database; end statements with ; and leave with .quit",
            lake.cfg.describe()
        );
    }
    let mut pending = String::new();
    let mut ok = true;
    let mut lines = stdin.lock().lines();
    loop {
        if tty {
            print!(
                "{}",
                if pending.is_empty() {
                    "lake> "
                } else {
                    "  ... "
                }
            );
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next().transpose()? else {
            break;
        };
        let trimmed = line.trim();
        if pending.is_empty() && matches!(trimmed, ".quit" | ".exit" | "\\q") {
            break;
        }
        pending.push_str(&line);
        pending.push('\n');
        if trimmed.ends_with(';') {
            if let Err(e) = run_one(lake, pending.trim()) {
                eprintln!("error: {e:#}");
                ok = false;
            }
            pending.clear();
        }
    }
    if !pending.trim().is_empty() {
        if let Err(e) = run_one(lake, pending.trim()) {
            eprintln!("error: {e:#}");
            ok = false;
        }
    }
    Ok(ok)
}
