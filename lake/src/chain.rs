//! A chain of recipes (`millpond-lake run ...`): each recipe parsed into
//! the command it stands for and run in order, stopping at the first that
//! fails.
use clap::Parser;

use super::cli::{Cli, Command};
use super::recipes::{find, Recipe};

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
            crate::report::stopped_at(recipe.name);
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
    use crate::recipes::RECIPES;

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
