//! Recipes: commands with their arguments fixed, named so that one CronJob
//! can run a flat list of them (`millpond-lake --yes run expire-7d
//! compact-all-tiers-default cleanup-all-safe metrics-once`). The names are
//! the original tool's where it had one.
use clap::Parser;

use super::cli::{Cli, Command};

pub struct Recipe {
    pub name: &'static str,
    /// The command line it stands for.
    pub args: &'static [&'static str],
    /// Changes the lake (the chain asks once, before its first step).
    pub changes: bool,
}

const fn r(name: &'static str, args: &'static [&'static str], changes: bool) -> Recipe {
    Recipe {
        name,
        args,
        changes,
    }
}

pub const RECIPES: &[Recipe] = &[
    r("expire-7d", &["expire", "--older-than", "7d"], true),
    r(
        "expire-snapshots-7d",
        &["expire-snapshots", "--older-than", "7d"],
        true,
    ),
    r("cleanup-all-safe", &["cleanup", "--older-than", "1d"], true),
    r("flush-inlined", &["flush-inlined"], true),
    r("compact-all-tiers-default", &["compact"], true),
    r(
        "compact-all-tiers-dry-run",
        &["compact", "--dry-run"],
        false,
    ),
    r("compact-to-tier-1", &["compact", "--tier", "1"], true),
    r("compact-to-tier-2", &["compact", "--tier", "2"], true),
    r("compact-to-tier-3", &["compact", "--tier", "3"], true),
    r(
        "compact-to-tier-1-dry-run",
        &["compact", "--tier", "1", "--dry-run"],
        false,
    ),
    r(
        "compact-to-tier-2-dry-run",
        &["compact", "--tier", "2", "--dry-run"],
        false,
    ),
    r(
        "compact-to-tier-3-dry-run",
        &["compact", "--tier", "3", "--dry-run"],
        false,
    ),
    r("compact-probe", &["compact-probe"], false),
    r("find-orphans", &["find-orphans"], false),
    r("heal-orphans", &["heal-orphans"], true),
    r("dedup-deletions", &["dedup-deletions"], true),
    r("purge-orphan-stats", &["purge-orphan-stats"], true),
    r(
        "repair-partition-values",
        &["repair-partition-values"],
        true,
    ),
    r("fsck", &["fsck"], false),
    r("maintain", &["maintain"], true),
    r("checkpoint", &["checkpoint"], true),
    r("metrics-once", &["metrics", "--once"], false),
];

pub fn find(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}

/// The command a recipe stands for.
pub fn command(recipe: &Recipe) -> Command {
    let argv = std::iter::once("millpond-lake").chain(recipe.args.iter().copied());
    Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("recipe {} does not parse: {e}", recipe.name))
        .command
}

/// Runs the recipes in order through `execute`; stops at the first that
/// fails or finds a problem, and says which. Ok(false): one found a problem.
pub fn run(
    names: &[String],
    execute: &mut dyn FnMut(Command) -> anyhow::Result<bool>,
) -> anyhow::Result<bool> {
    let steps: Vec<&Recipe> = names.iter().filter_map(|n| find(n)).collect();
    for (i, recipe) in steps.iter().enumerate() {
        println!(
            "run: step {}/{}: {} (millpond-lake {})",
            i + 1,
            steps.len(),
            recipe.name,
            recipe.args.join(" ")
        );
        let stopped = |why: &str| {
            println!(
                "run: stopped at {} ({why}); {} steps not run",
                recipe.name,
                steps.len() - i - 1
            )
        };
        match execute(command(recipe)) {
            Ok(true) => {}
            Ok(false) => {
                stopped("it found a problem");
                return Ok(false);
            }
            Err(e) => {
                stopped("it failed");
                return Err(e.context(format!("recipe {}", recipe.name)));
            }
        }
    }
    println!("run: {} steps done", steps.len());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_parses_and_names_are_unique() {
        let mut names: Vec<&str> = RECIPES.iter().map(|r| r.name).collect();
        for recipe in RECIPES {
            assert!(
                !matches!(command(recipe), Command::Run { .. }),
                "{} runs a chain",
                recipe.name
            );
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RECIPES.len());
    }

    #[test]
    fn a_chain_stops_at_the_first_failure() {
        let names: Vec<String> = ["fsck", "compact-probe", "find-orphans"]
            .map(String::from)
            .to_vec();
        let mut seen = Vec::new();
        let ok = run(&names, &mut |c| {
            seen.push(format!("{c:?}"));
            Ok(seen.len() < 2)
        })
        .unwrap();
        assert!(!ok);
        assert_eq!(seen.len(), 2);
        assert!(seen[0].starts_with("Fsck") && seen[1].starts_with("CompactProbe"));
    }
}
