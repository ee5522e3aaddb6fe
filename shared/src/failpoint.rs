//! Test failpoints: the places where an end-to-end test makes a process
//! abort (as a SIGKILL would) or pause, armed by
//! `MILLPOND_FAILPOINT=<name>[:<ms>]`. They are compiled in only with the
//! cargo feature `failpoints`, which the test command turns on; release
//! binaries and images are built without it and refuse the variable at
//! startup, so a production pod can never carry one.
//!
//! This file is the one list of failpoints and the one registry: call sites
//! name a [`Failpoint`], never a string.
use std::time::Duration;

/// The process a failpoint lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Writer,
    Ingest,
    /// `millpond-lake`, the maintenance tool.
    Lake,
}

/// Every failpoint there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// Writer: abort after the lake commit, before the acknowledgement.
    KillAfterCommit,
    /// Writer: abort with a streamed flush half received.
    KillMidStream,
    /// Writer (DuckLake): hold each write transaction open before its lease
    /// check and COMMIT, to race another writer.
    PauseBeforeCommit,
    /// Writer (DuckLake): stall after the lease check, right before COMMIT,
    /// as a catalog connection that holds its bytes would.
    StallInCommit,
    /// Writer (DuckLake): hold a streamed flush between reading the table's
    /// columns and registering its files, to change the table behind it.
    PauseBeforePublish,
    /// Writer (DuckLake): hold each partition lease claim before its COMMIT.
    PauseInClaim,
    /// Ingest: abort after the writer's acknowledgement, before the Kafka
    /// commit.
    KillAfterAck,
    /// millpond-lake: hold the catalog's maintenance lock, once taken,
    /// before the command runs, so that a second run meets it.
    PauseHoldingLakeLock,
}

impl Failpoint {
    const ALL: [Failpoint; 8] = [
        Failpoint::KillAfterCommit,
        Failpoint::KillMidStream,
        Failpoint::PauseBeforeCommit,
        Failpoint::StallInCommit,
        Failpoint::PauseBeforePublish,
        Failpoint::PauseInClaim,
        Failpoint::KillAfterAck,
        Failpoint::PauseHoldingLakeLock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Failpoint::KillAfterCommit => "kill_after_commit",
            Failpoint::KillMidStream => "kill_mid_stream",
            Failpoint::PauseBeforeCommit => "pause_before_commit",
            Failpoint::StallInCommit => "stall_in_commit",
            Failpoint::PauseBeforePublish => "pause_before_publish",
            Failpoint::PauseInClaim => "pause_in_claim",
            Failpoint::KillAfterAck => "kill_after_ack",
            Failpoint::PauseHoldingLakeLock => "pause_holding_lake_lock",
        }
    }

    fn process(self) -> Process {
        match self {
            Failpoint::KillAfterAck => Process::Ingest,
            Failpoint::PauseHoldingLakeLock => Process::Lake,
            _ => Process::Writer,
        }
    }

    /// A pause takes `:<ms>`; an abort takes nothing.
    fn pauses(self) -> bool {
        !matches!(
            self,
            Failpoint::KillAfterCommit | Failpoint::KillMidStream | Failpoint::KillAfterAck
        )
    }

    /// The pauses only DuckLake's sink has.
    pub fn ducklake_only(self) -> bool {
        self.pauses()
    }
}

/// A failpoint a process was started with, and for a pause, how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    pub point: Failpoint,
    pub pause: Duration,
}

/// Reads MILLPOND_FAILPOINT for `process`. The error says what is wrong,
/// for the config error that names the variable.
pub fn parse(spec: &str, process: Process) -> Result<Armed, String> {
    if !cfg!(feature = "failpoints") {
        return Err(
            "this binary is built without the cargo feature `failpoints` (test builds only: \
             scripts/test.sh); unset it"
                .into(),
        );
    }
    let (name, ms) = match spec.split_once(':') {
        Some((name, ms)) => (name, Some(ms)),
        None => (spec, None),
    };
    let known: Vec<&str> = Failpoint::ALL
        .iter()
        .filter(|p| p.process() == process)
        .map(|p| p.name())
        .collect();
    let point = Failpoint::ALL
        .into_iter()
        .find(|p| p.name() == name && p.process() == process)
        .ok_or_else(|| format!("unknown failpoint {name:?}; this process has {known:?}"))?;
    let pause = match (point.pauses(), ms) {
        (true, Some(ms)) => Duration::from_millis(
            ms.parse()
                .map_err(|_| format!("{name} takes a pause in milliseconds, got {ms:?}"))?,
        ),
        (true, None) => return Err(format!("{name} takes a pause: {name}:<ms>")),
        (false, None) => Duration::ZERO,
        (false, Some(_)) => return Err(format!("{name} takes no argument")),
    };
    Ok(Armed { point, pause })
}

#[cfg(feature = "failpoints")]
static ARMED: std::sync::OnceLock<Armed> = std::sync::OnceLock::new();

/// Arms the process's failpoint, once, at startup.
pub fn arm(armed: Option<Armed>) {
    #[cfg(feature = "failpoints")]
    if let Some(a) = armed {
        let _ = ARMED.set(a);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = armed;
}

/// The pause `point` is armed with, if it is.
#[inline]
pub fn armed(point: Failpoint) -> Option<Duration> {
    #[cfg(feature = "failpoints")]
    return ARMED.get().filter(|a| a.point == point).map(|a| a.pause);
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = point;
        None
    }
}

/// Blocks the thread for `point`'s pause when it is armed.
pub fn pause(point: Failpoint) {
    if let Some(pause) = armed(point) {
        tracing::warn!(ms = pause.as_millis() as u64, "failpoint {}", point.name());
        std::thread::sleep(pause);
    }
}

/// Ends the process at once, as a SIGKILL would (no destructors, no flush,
/// no exit code of success), when `point` is armed.
pub fn abort(point: Failpoint) {
    if armed(point).is_some() {
        tracing::warn!("failpoint {}: aborting the process", point.name());
        std::process::abort()
    }
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn each_name_parses_for_its_own_process_only() {
        for p in Failpoint::ALL {
            let spec = if p.pauses() {
                format!("{}:250", p.name())
            } else {
                p.name().to_string()
            };
            let other = match p.process() {
                Process::Writer => Process::Ingest,
                Process::Ingest | Process::Lake => Process::Writer,
            };
            let armed = parse(&spec, p.process()).unwrap();
            assert_eq!(armed.point, p);
            assert!(parse(&spec, other).is_err(), "{spec} for {other:?}");
        }
        assert_eq!(
            parse("pause_in_claim:1500", Process::Writer).unwrap().pause,
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn malformed_specs_are_refused_with_the_reason() {
        for (spec, why) in [
            ("pause_before_commit", "takes a pause"),
            ("pause_before_commit:soon", "milliseconds"),
            ("kill_after_commit:5", "no argument"),
            ("kill_after_everything", "unknown failpoint"),
        ] {
            let e = parse(spec, Process::Writer).unwrap_err();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }
}

#[cfg(all(test, not(feature = "failpoints")))]
mod tests {
    #[test]
    fn a_build_without_the_feature_refuses_every_failpoint() {
        let e = super::parse("kill_after_commit", super::Process::Writer).unwrap_err();
        assert!(e.contains("without the cargo feature `failpoints`"), "{e}");
    }
}
