//! The chart's StatefulSet, played with the real binaries: what Kubernetes
//! does to a pipeline's pods at a `helm upgrade`, so a test can show that
//! every change completes by itself.
//!
//! The controller follows the StatefulSet controller for the chart's
//! settings (`podManagementPolicy: Parallel`, `RollingUpdate` with
//! `partition`): missing pods are created at once, pods past the count are
//! all terminated at once, and then, from the highest ordinal down to the
//! partition, the first pod of the old revision is terminated and recreated
//! under its name with the new one; it moves on only while every pod above
//! is Ready. Readiness is probed once a second, and a pod counts as Ready
//! only after both containers answered `/readyz` with 200 at the last
//! [`READY_PROBES`] probes: stricter than the chart's probes (one success
//! makes a pod Ready, three failures 10 s apart unready), so a pod that turns
//! unready soon after it starts holds the rollout here as it can in a
//! cluster, instead of slipping through on its first seconds. Terminating a
//! pod sends
//! SIGTERM to both containers together and waits the chart's grace for
//! them; a process that exits any other way fails the test.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::path::Path;

use crate::hoglake::Hoglake;
use crate::ingest::{Ingest, IngestOpts};
use crate::lake::Lake;
use crate::writer::Writer;

/// Where a set's pods write: the writer's sink settings, and the folder
/// both processes log into.
pub struct Destination<'a> {
    pub sink_env: Vec<(String, String)>,
    pub log_dir: &'a Path,
}

impl<'a> From<&'a Lake> for Destination<'a> {
    fn from(lake: &'a Lake) -> Self {
        Destination {
            sink_env: lake.env.clone(),
            log_dir: lake.dir.path(),
        }
    }
}

impl<'a> From<&'a Hoglake> for Destination<'a> {
    fn from(lake: &'a Hoglake) -> Self {
        Destination {
            sink_env: lake.writer_env(),
            log_dir: lake.dir.path(),
        }
    }
}

/// `terminationGracePeriodSeconds` in the chart.
pub const GRACE: Duration = Duration::from_secs(120);

/// Probes in a row that must pass for a pod to count as Ready.
pub const READY_PROBES: usize = 3;

/// Time between two readiness probes of a pod.
const PROBE_PERIOD: Duration = Duration::from_secs(1);

/// What `helm upgrade` sets: the replica count (which is also every pod's
/// `REPLICA_COUNT`), the template's revision (a new image or setting) and
/// the rolling update's partition (a canary keeps lower ordinals old).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub replicas: i32,
    pub revision: u32,
    pub partition: i32,
}

/// What one pod's two processes counted, read from the lines each logs as
/// it stops (`counts=`), summed over each counter's series.
#[derive(Debug, Clone, Default)]
pub struct PodCounts {
    pub pod: String,
    pub ingest: BTreeMap<String, f64>,
    pub writer: BTreeMap<String, f64>,
    /// Both processes' logs, for a failure's message.
    pub logs: String,
}

impl PodCounts {
    fn get(map: &BTreeMap<String, f64>, name: &str) -> f64 {
        map.get(name).copied().unwrap_or(0.0)
    }

    /// Consumed, and rows + dead letters + tombstones + skipped (filtered,
    /// already recorded by another owner).
    pub fn conservation(&self) -> (f64, f64) {
        (
            Self::get(&self.ingest, "records_consumed_total"),
            Self::get(&self.writer, "records_written_total")
                + Self::get(&self.writer, "dead_letters_total")
                + Self::get(&self.ingest, "tombstones_total")
                + Self::get(&self.ingest, "records_skipped_total"),
        )
    }
}

/// The counters a process logged on the line holding `marker`.
pub fn logged_counts(logs: &str, marker: &str) -> Option<BTreeMap<String, f64>> {
    let line = logs.lines().rev().find(|l| l.contains(marker))?;
    let field = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("counts="))?;
    let mut out = BTreeMap::new();
    for item in field.split(',').filter(|i| !i.is_empty()) {
        let (series, value) = item.rsplit_once('=')?;
        let name = series.split('{').next()?;
        *out.entry(name.to_owned()).or_insert(0.0) += value.parse::<f64>().ok()?;
    }
    Some(out)
}

struct Pod {
    ordinal: i32,
    revision: u32,
    writer: Writer,
    ingest: Ingest,
    /// Since when it has been terminating (SIGTERM sent).
    terminating: Option<Instant>,
    /// The last readiness probes' results, newest last, and when the last
    /// one ran.
    probes: Vec<bool>,
    probed: Option<Instant>,
}

impl Pod {
    fn name(&self) -> String {
        format!("millpond-{}", self.ordinal)
    }

    /// Probes both containers' `/readyz` when a probe is due.
    fn probe(&mut self) {
        if self.probed.is_some_and(|t| t.elapsed() < PROBE_PERIOD) {
            return;
        }
        self.probed = Some(Instant::now());
        let ok = self.writer.ready() == 200 && self.ingest.ready() == 200;
        self.probes.push(ok);
        let n = self.probes.len();
        if n > READY_PROBES {
            self.probes.drain(..n - READY_PROBES);
        }
    }

    fn ready(&self) -> bool {
        self.terminating.is_none()
            && self.probes.len() == READY_PROBES
            && self.probes.iter().all(|ok| *ok)
    }
}

/// One pipeline's pods on one lake and topic.
pub struct StatefulSet<'a> {
    destination: Destination<'a>,
    bootstrap: String,
    topic: String,
    /// Settings of both containers of every pod, on top of the chart's.
    env: Vec<(String, String)>,
    spec: Spec,
    pods: BTreeMap<i32, Pod>,
    terminating: Vec<Pod>,
    uids: u32,
    /// Pods gone, with what they counted.
    pub stopped: Vec<PodCounts>,
    /// What the controller did, in order: for a failure's message.
    pub events: Vec<String>,
    started: Instant,
}

impl<'a> StatefulSet<'a> {
    /// Creates the set and waits until its pods are Ready.
    pub fn create(
        destination: impl Into<Destination<'a>>,
        bootstrap: &str,
        topic: &str,
        env: &[(&str, &str)],
        spec: Spec,
    ) -> Self {
        let mut set = StatefulSet {
            destination: destination.into(),
            bootstrap: bootstrap.to_owned(),
            topic: topic.to_owned(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            spec,
            pods: BTreeMap::new(),
            terminating: Vec::new(),
            uids: 0,
            stopped: Vec::new(),
            events: Vec::new(),
            started: Instant::now(),
        };
        set.upgrade(spec, Duration::from_secs(120));
        set
    }

    fn event(&mut self, what: String) {
        self.events.push(format!(
            "{:>6.1}s {what}",
            self.started.elapsed().as_secs_f64()
        ));
    }

    /// `helm upgrade` to `spec`: plays the controller until the set is
    /// whole at `spec` and Ready, and returns how long that took. Fails
    /// past `bound`, or when a process exits without being terminated.
    pub fn upgrade(&mut self, spec: Spec, bound: Duration) -> Duration {
        self.event(format!("upgrade to {spec:?}"));
        self.spec = spec;
        let began = Instant::now();
        loop {
            self.check_processes();
            self.reap();
            for pod in self.pods.values_mut() {
                pod.probe();
            }
            if self.reconcile() {
                let took = began.elapsed();
                self.event(format!("{spec:?} complete in {took:?}"));
                return took;
            }
            if began.elapsed() > bound {
                let states: Vec<String> = self
                    .pods
                    .values()
                    .map(|p| {
                        format!(
                            "{} rev {} probes {:?} writer /readyz {} ingest /readyz {}",
                            p.name(),
                            p.revision,
                            p.probes,
                            p.writer.ready(),
                            p.ingest.ready()
                        )
                    })
                    .collect();
                panic!(
                    "the upgrade to {spec:?} did not complete within {bound:?}: {states:?}\n{}",
                    self.events.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// One pass of the controller; true once nothing is left to do.
    fn reconcile(&mut self) -> bool {
        let Spec {
            replicas,
            revision,
            partition,
        } = self.spec;
        // Parallel: every missing pod at once (a pod being replaced comes
        // back once its old incarnation is gone).
        for ordinal in 0..replicas {
            let gone = !self.pods.contains_key(&ordinal);
            let replaced = self.terminating.iter().any(|p| p.ordinal == ordinal);
            if gone && !replaced {
                let pod = self.start_pod(ordinal, revision);
                self.pods.insert(ordinal, pod);
            }
        }
        // Parallel: every pod past the count terminates at once.
        let condemned: Vec<i32> = self
            .pods
            .keys()
            .copied()
            .filter(|o| *o >= replicas)
            .collect();
        for ordinal in condemned {
            self.terminate(ordinal);
        }
        // The rolling update: highest ordinal first, one at a time, each
        // only while every pod above it is Ready.
        for ordinal in (partition.max(0)..replicas).rev() {
            let Some(pod) = self.pods.get(&ordinal) else {
                return false;
            };
            if pod.revision != revision {
                self.terminate(ordinal);
                return false;
            }
            if !pod.ready() {
                return false;
            }
        }
        self.terminating.is_empty()
            && (0..partition.max(0)).all(|o| self.pods.get(&o).is_some_and(Pod::ready))
    }

    fn start_pod(&mut self, ordinal: i32, revision: u32) -> Pod {
        self.uids += 1;
        let name = format!("millpond-{ordinal}");
        let uid = format!("{name}-uid-{}", self.uids);
        // A setting that differs between revisions, as a new image would.
        let flush_ms = (900 + 100 * (revision % 4)).to_string();
        let mut common: Vec<(String, String)> = vec![
            ("POD_NAME".into(), name.clone()),
            ("POD_UID".into(), uid),
            ("FLUSH_INTERVAL_MS".into(), flush_ms),
        ];
        common.extend(self.env.iter().cloned());
        // The chart's writer grace.
        let grace = [(
            "MILLPOND_WRITER_SHUTDOWN_GRACE_S".to_owned(),
            "60".to_owned(),
        )];
        let writer_env: Vec<(&str, &str)> = common
            .iter()
            .chain(&grace)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let writer = Writer::start_env(
            &self.destination.sink_env,
            self.destination.log_dir,
            &writer_env,
        );
        let mut extra: Vec<(&str, String)> = common
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        // The chart's send deadline.
        extra.push(("MILLPOND_WRITER_SEND_DEADLINE_S", "420".into()));
        let ingest = Ingest::start(
            &IngestOpts {
                bootstrap: &self.bootstrap,
                topic: &self.topic,
                table: "events",
                writer_addr: &writer.addr,
                replicas: self.spec.replicas,
                ordinal,
                extra,
            },
            self.destination.log_dir,
        );
        self.event(format!(
            "created {name} rev {revision} REPLICA_COUNT={}",
            self.spec.replicas
        ));
        Pod {
            ordinal,
            revision,
            writer,
            ingest,
            terminating: None,
            probes: Vec::new(),
            probed: None,
        }
    }

    /// SIGTERM to both containers, as the kubelet sends it.
    fn terminate(&mut self, ordinal: i32) {
        let Some(mut pod) = self.pods.remove(&ordinal) else {
            return;
        };
        pod.ingest.proc.signal("TERM");
        pod.writer.proc.signal("TERM");
        pod.terminating = Some(Instant::now());
        self.event(format!("terminating {} rev {}", pod.name(), pod.revision));
        self.terminating.push(pod);
    }

    /// Removes terminated pods whose processes both exited, reading what
    /// they counted; a pod past its grace fails the test.
    fn reap(&mut self) {
        let mut still = Vec::new();
        for mut pod in std::mem::take(&mut self.terminating) {
            let ingest = pod.ingest.proc.child.try_wait().unwrap();
            let writer = pod.writer.proc.child.try_wait().unwrap();
            match (ingest, writer) {
                (Some(i), Some(w)) => {
                    assert!(
                        i.success() && w.success(),
                        "{} exited with ingest {i}, writer {w} after SIGTERM:\n{}\n{}",
                        pod.name(),
                        pod.ingest.proc.logs(),
                        pod.writer.proc.logs()
                    );
                    self.stopped.push(PodCounts {
                        pod: format!("{} rev {}", pod.name(), pod.revision),
                        logs: format!(
                            "---- ingest ----\n{}\n---- writer ----\n{}",
                            pod.ingest.proc.logs(),
                            pod.writer.proc.logs()
                        ),
                        ingest: logged_counts(&pod.ingest.proc.logs(), "ingest stopped cleanly")
                            .unwrap_or_else(|| {
                                panic!("{}: no counts:\n{}", pod.name(), pod.ingest.proc.logs())
                            }),
                        writer: logged_counts(&pod.writer.proc.logs(), "writer stopped")
                            .unwrap_or_else(|| {
                                panic!("{}: no counts:\n{}", pod.name(), pod.writer.proc.logs())
                            }),
                    });
                    let name = pod.name();
                    self.event(format!("{name} gone"));
                }
                _ => {
                    let since = pod.terminating.expect("terminating").elapsed();
                    assert!(
                        since < GRACE,
                        "{} still running {since:?} after SIGTERM:\n{}\n{}",
                        pod.name(),
                        pod.ingest.proc.logs(),
                        pod.writer.proc.logs()
                    );
                    still.push(pod);
                }
            }
        }
        self.terminating = still;
    }

    /// No process of a running pod exits: every exit is a SIGTERM's.
    fn check_processes(&mut self) {
        for pod in self.pods.values_mut() {
            for (what, proc) in [
                ("ingest", &mut pod.ingest.proc),
                ("writer", &mut pod.writer.proc),
            ] {
                if let Some(status) = proc.child.try_wait().unwrap() {
                    panic!(
                        "{}'s {what} exited by itself ({status}):\n{}\n{}",
                        format_args!("millpond-{}", pod.ordinal),
                        proc.logs(),
                        self.events.join("\n")
                    );
                }
            }
        }
    }

    /// Waits until `done` holds, watching that no process exits.
    pub fn wait_until(&mut self, bound: Duration, what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + bound;
        while !done() {
            self.check_processes();
            assert!(Instant::now() < until, "timed out waiting for: {what}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Terminates every pod (`replicas: 0`) and returns what each pod that
    /// ever ran counted.
    pub fn drain(mut self) -> Vec<PodCounts> {
        self.upgrade(
            Spec {
                replicas: 0,
                partition: 0,
                ..self.spec
            },
            GRACE,
        );
        std::mem::take(&mut self.stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_back_from_the_stop_line() {
        let logs = "x INFO ingest stopped cleanly counts=records_consumed_total{partition=0}=5,records_consumed_total{partition=4}=7,records_skipped_total{reason=already_recorded}=2\n";
        let c = logged_counts(logs, "ingest stopped cleanly").unwrap();
        assert_eq!(c["records_consumed_total"], 12.0);
        assert_eq!(c["records_skipped_total"], 2.0);
        assert!(logged_counts(logs, "writer stopped").is_none());
    }
}
