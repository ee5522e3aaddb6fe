//! The guard in front of every command that deletes or rewrites: it names
//! the catalog the command is about to change, then asks on a terminal or
//! requires `--yes` (a CronJob has no terminal to answer on).
use std::cell::Cell;
use std::io::{BufRead, IsTerminal, Write};

use anyhow::bail;

use millpond_writer::lake_api::LakeConfig;

/// Asks once per run: a chain (`maintain`) confirms up front, and its
/// steps then pass.
pub struct Ask {
    yes: bool,
    confirmed: Cell<bool>,
}

impl Ask {
    pub fn new(yes: bool) -> Self {
        Ask {
            yes,
            confirmed: Cell::new(false),
        }
    }

    pub fn confirm(&self, lake: &LakeConfig, action: &str) -> anyhow::Result<()> {
        if self.confirmed.get() {
            return Ok(());
        }
        println!("target: {}", lake.describe());
        println!("action: {action}");
        if !self.yes {
            let stdin = std::io::stdin();
            if !stdin.is_terminal() {
                bail!("refusing to {action} without --yes: stdin is not a terminal to confirm on");
            }
            print!("Type yes to continue: ");
            std::io::stdout().flush()?;
            let mut answer = String::new();
            stdin.lock().read_line(&mut answer)?;
            if answer.trim() != "yes" {
                bail!("not confirmed; nothing changed");
            }
        }
        self.confirmed.set(true);
        Ok(())
    }
}
