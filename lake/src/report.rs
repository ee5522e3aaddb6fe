//! What a run did, said once at its end: the last line it prints, and,
//! with MILLPOND_LAKE_REPORT_PUSH_URL, the same pushed as `millpond_lake_run_*`
//! (a Pushgateway's `/metrics/job/<job>/...`), so a schedule's runs can be
//! watched and alerted on. Each command adds what it changed as it goes
//! ([`add`]); a chain says which step it stopped at ([`stopped_at`]).
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use millpond_shared::metrics::{render, LakeRunMetrics};

use super::config::ToolConfig;

/// The kinds of change a run reports (the `what` label).
pub mod what {
    pub const SNAPSHOTS_EXPIRED: &str = "snapshots_expired";
    pub const FILES_SCHEDULED_FOR_DELETION: &str = "files_scheduled_for_deletion";
    pub const FILES_DELETED: &str = "files_deleted";
    pub const FILES_COMPACTED_AWAY: &str = "files_compacted_away";
    pub const INLINED_ROWS_FLUSHED: &str = "inlined_rows_flushed";
    pub const ORPHANS_REGISTERED: &str = "orphans_registered";
    pub const ORPHANS_MOVED_ASIDE: &str = "orphans_moved_aside";
    pub const DELETIONS_FIXED: &str = "deletions_fixed";
    pub const STATS_ROWS_PURGED: &str = "stats_rows_purged";
    pub const PARTITION_VALUES_REPAIRED: &str = "partition_values_repaired";
    pub const PARTITIONS_DROPPED: &str = "partitions_dropped";
    pub const ROWS_DROPPED: &str = "rows_dropped";
}

/// One run's tally (a process runs one command).
static DONE: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
static STOPPED_AT: Mutex<Option<String>> = Mutex::new(None);

/// The run changed `n` of `what` (a [`what`] constant).
pub fn add(what: &'static str, n: u64) {
    *DONE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(what)
        .or_default() += n;
}

/// A chain stopped at `step` (it failed or found a problem).
pub fn stopped_at(step: &str) {
    *STOPPED_AT.lock().unwrap_or_else(|p| p.into_inner()) = Some(step.to_owned());
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// It ran, and found something wrong or could not fix it.
    Problems,
    Failed,
}

impl Outcome {
    pub fn of(result: &anyhow::Result<bool>) -> Outcome {
        match result {
            Ok(true) => Outcome::Done,
            Ok(false) => Outcome::Problems,
            Err(_) => Outcome::Failed,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Problems => "found problems",
            Outcome::Failed => "failed",
        }
    }
}

/// The report's last line, e.g. `millpond-lake run: failed at cleanup
/// after 3.2 s; snapshots_expired=12 files_compacted_away=40`.
pub fn line(command: &str, outcome: Outcome, seconds: f64) -> String {
    let done = DONE.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let step = STOPPED_AT.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut text = format!("millpond-lake {command}: {}", outcome.word());
    if outcome != Outcome::Done {
        text.push_str(&format!(" at {}", step.as_deref().unwrap_or(command)));
    }
    text.push_str(&format!(" after {seconds:.1} s"));
    if done.is_empty() {
        text.push_str("; changed nothing");
    } else {
        let parts: Vec<String> = done.iter().map(|(k, v)| format!("{k}={v}")).collect();
        text.push_str(&format!("; {}", parts.join(" ")));
    }
    text
}

/// Ends the run: prints its report line (the run's last) and pushes the
/// report when a URL is set. A failed push is said, and fails the run.
pub fn finish(
    cfg: &ToolConfig,
    command: &str,
    started: Instant,
    result: &anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let outcome = Outcome::of(result);
    let seconds = started.elapsed().as_secs_f64();
    let Some(url) = cfg.report_push_url.as_ref() else {
        println!("{}", line(command, outcome, seconds));
        return Ok(());
    };
    let registry = cfg.common.registry();
    let m = LakeRunMetrics::new(&registry, command);
    m.duration.set(seconds);
    m.success.set(i64::from(outcome == Outcome::Done));
    m.finished.set(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    );
    for (what, n) in DONE.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        m.done.with_label_values(&[what]).set(*n as i64);
    }
    if outcome != Outcome::Done {
        let step = STOPPED_AT.lock().unwrap_or_else(|p| p.into_inner()).clone();
        m.failed_step
            .with_label_values(&[step.as_deref().unwrap_or(command)])
            .set(1);
    }
    let pushed = super::metrics::push(url, render(&registry));
    println!("{}", line(command, outcome, seconds));
    pushed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_outcome_the_step_and_what_changed() {
        add(what::SNAPSHOTS_EXPIRED, 3);
        add(what::FILES_DELETED, 5);
        add(what::SNAPSHOTS_EXPIRED, 2);
        assert_eq!(
            line("expire", Outcome::Done, 1.25),
            "millpond-lake expire: done after 1.2 s; files_deleted=5 snapshots_expired=5"
        );
        stopped_at("cleanup");
        assert_eq!(
            line("run", Outcome::Failed, 3.0),
            "millpond-lake run: failed at cleanup after 3.0 s; files_deleted=5 snapshots_expired=5"
        );
    }
}
