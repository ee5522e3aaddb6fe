//! The poller thread: fetch, apply under the safety rules, publish
//! (authoritative) and export gauges. Interval jittered +-10% (a steady
//! `Ladder`); each request bounded by its timeout and its body by its cap;
//! redirects refused, so the auth header never leaves the configured host.
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use millpond_shared::metrics::IncludeMetrics;
use millpond_shared::retry::Ladder;
use millpond_shared::shutdown::{Stop, Stopped};

use super::config::{IncludeConfig, Mode};
use super::set::{IncludeSet, Value};
use crate::stages::filter::{LiveValues, Values};

/// A running source: the values the keep filter reads.
pub struct Source {
    pub live: LiveValues,
}

/// How often the wait for the first poll looks at the stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// What the poller tells a waiting authoritative start about each poll,
/// until one is accepted.
#[derive(Debug)]
enum FirstPoll {
    Accepted,
    Refused(&'static str),
    Failed(String),
}

impl std::fmt::Display for FirstPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FirstPoll::Accepted => write!(f, "accepted"),
            FirstPoll::Refused(reason) => write!(f, "refused by the safety rules ({reason})"),
            FirstPoll::Failed(e) => write!(f, "failed ({e})"),
        }
    }
}

/// Starts polling. In authoritative mode it returns only after the first
/// poll the safety rules accept (a failed or refused one keeps it
/// waiting), or fails after the startup timeout, or with [`Stopped`] at
/// the stop.
pub fn start(
    cfg: &IncludeConfig,
    pins: &Values,
    metrics: IncludeMetrics,
    stop: &Stop,
) -> anyhow::Result<Source> {
    let client = reqwest::blocking::Client::builder()
        .timeout(cfg.request_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let live = LiveValues::new(pins.clone());
    let set = IncludeSet::new(pins, cfg.removal_polls);
    metrics.mode.with_label_values(&[cfg.mode.label()]).set(1);
    metrics.pinned.set(set.pins().len() as i64);
    tracing::info!(url = %cfg.url, mode = cfg.mode.label(), max_body_bytes = cfg.max_body_bytes,
        pins = ?set.pins().iter().map(|v| v.label()).collect::<Vec<_>>(), "dynamic allowlist source");
    let (first_tx, first_rx) = mpsc::channel();
    let mut poller = Poller {
        cfg: cfg.clone(),
        pace: Ladder {
            attempts: u32::MAX,
            base: cfg.poll_interval,
            jitter: 0.1,
        },
        client,
        set,
        live: live.clone(),
        metrics,
        first: (cfg.mode == Mode::Authoritative).then_some(first_tx),
    };
    std::thread::Builder::new()
        .name("include-values".into())
        .spawn(move || poller.run())?;
    if cfg.mode == Mode::Authoritative {
        wait_for_an_accepted_poll(cfg, &first_rx, stop)?;
    }
    Ok(Source { live })
}

/// Authoritative mode never starts on a set it has not accepted: nothing
/// is consumed until a poll passes the safety rules.
fn wait_for_an_accepted_poll(
    cfg: &IncludeConfig,
    first: &mpsc::Receiver<FirstPoll>,
    stop: &Stop,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let until = started + cfg.startup_timeout;
    let mut last: Option<FirstPoll> = None;
    loop {
        if stop.is_stopped() {
            return Err(Stopped.into());
        }
        let left = until.saturating_duration_since(Instant::now());
        match first.recv_timeout(left.min(STOP_CHECK)) {
            Ok(FirstPoll::Accepted) => return Ok(()),
            Ok(poll) => {
                tracing::warn!(poll = %poll, waited_s = started.elapsed().as_secs(),
                    timeout_s = cfg.startup_timeout.as_secs(),
                    "authoritative allowlist: no poll accepted yet; nothing is consumed until one is (MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S)");
                last = Some(poll);
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => {}
            Err(_) => anyhow::bail!(
                "MILLPOND_INCLUDE_VALUES_URL: no poll accepted within {}s (MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S); last poll: {}; authoritative mode does not start on a set it has not accepted",
                cfg.startup_timeout.as_secs(),
                last.as_ref().map_or("none finished".to_owned(), |p| p.to_string())
            ),
        }
    }
}

struct Poller {
    cfg: IncludeConfig,
    /// Polls every MILLPOND_INCLUDE_VALUES_POLL_INTERVAL_S, +-10%, for as
    /// long as the process runs, whether a poll fails or not.
    pace: Ladder,
    client: reqwest::blocking::Client,
    set: IncludeSet,
    live: LiveValues,
    metrics: IncludeMetrics,
    /// Until a poll is accepted: where an authoritative start waits.
    first: Option<mpsc::Sender<FirstPoll>>,
}

impl Poller {
    fn run(&mut self) {
        loop {
            match super::fetch::fetch(&self.client, &self.cfg) {
                Ok(values) => self.apply(values),
                Err(e) => {
                    self.metrics.poll_failures.inc();
                    tracing::warn!(error = %e, "allowlist poll failed; keeping the last good set");
                    self.tell_first(FirstPoll::Failed(e.to_string()));
                }
            }
            std::thread::sleep(self.pace.steady_delay());
        }
    }

    fn apply(&mut self, values: Vec<Value>) {
        let applied = self.set.apply(values);
        if let Some(reason) = applied.refused {
            self.metrics.refused.with_label_values(&[reason]).inc();
            tracing::warn!(reason, "allowlist poll refused by the safety rules");
        }
        for (action, list) in [("added", &applied.added), ("removed", &applied.removed)] {
            if !list.is_empty() {
                self.metrics
                    .changes
                    .with_label_values(&[action])
                    .inc_by(list.len() as u64);
                tracing::info!(action, values = ?list.iter().map(|v| v.label()).collect::<Vec<_>>(), "allowlist changed");
            }
        }
        if applied.accepted() {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO);
            self.metrics.last_success.set(now.as_secs_f64());
        }
        let effective = self.set.effective();
        self.metrics.size.set(effective.len() as i64);
        self.metrics
            .pending_removals
            .set(self.set.pending_removals() as i64);
        self.metrics.pinned_only.set(self.set.pinned_only() as i64);
        match self.cfg.mode {
            Mode::Authoritative => self.live.publish(to_values(&effective)),
            Mode::Shadow => {
                let remote = self.set.remote();
                let pins = self.set.pins();
                self.metrics
                    .shadow_only_static
                    .set(pins.difference(remote).count() as i64);
                self.metrics
                    .shadow_only_remote
                    .set(remote.difference(pins).count() as i64);
            }
        }
        self.tell_first(match applied.refused {
            Some(reason) if !applied.accepted() => FirstPoll::Refused(reason),
            _ => FirstPoll::Accepted,
        });
    }

    fn tell_first(&mut self, poll: FirstPoll) {
        let done = matches!(poll, FirstPoll::Accepted);
        if let Some(tx) = &self.first {
            if tx.send(poll).is_err() || done {
                self.first = None;
            }
        }
    }
}

fn to_values(set: &std::collections::BTreeSet<Value>) -> Values {
    if set.iter().all(|v| matches!(v, Value::Int(_))) {
        Values::Int(
            set.iter()
                .filter_map(|v| match v {
                    Value::Int(i) => Some(*i),
                    Value::Text(_) => None,
                })
                .collect(),
        )
    } else {
        Values::Text(set.iter().map(|v| v.label()).collect())
    }
}
