//! Recipes: commands with their arguments fixed, named so that one CronJob
//! can run a flat list of them (`millpond-lake --yes run expire-7d
//! compact-all-tiers-default cleanup-all-safe metrics-once`). The names are
//! the original tool's where it had one.
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
    r(
        "list-droppable-partitions",
        &["list-droppable-partitions"],
        false,
    ),
    r("drop-partitions", &["drop-partitions", "--execute"], true),
    r("fsck", &["fsck"], false),
    r("maintain", &["maintain"], true),
    r("checkpoint", &["checkpoint"], true),
    r("metrics-once", &["metrics", "--once"], false),
];

pub fn find(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}
