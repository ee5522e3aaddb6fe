//! SIGTERM / SIGINT as a future, so both processes stop the same way, and
//! as a [`Stop`] value that every wait of a process can end on.
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub async fn signal() {
    installed().await
}

/// Installs the SIGTERM and SIGINT handlers now; the future resolves at
/// the first of them.
fn installed() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    }
}

/// The request to stop, and when it came. Async waits `select!` on
/// [`Stop::after`]; blocking loops check [`Stop::is_stopped`] between
/// short waits. Clones share one stop.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<watch::Sender<Option<Instant>>>);

/// A wait ended because the process was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stopped waiting: SIGTERM or SIGINT received")]
pub struct Stopped;

impl Stopped {
    /// Whether `e`, or an error it came from, is a [`Stopped`].
    pub fn caused(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<Stopped>())
    }
}

impl Stop {
    /// A stop that only [`Stop::trigger`] sets.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stop set by SIGTERM or SIGINT. The handlers are installed before
    /// this returns, so a signal from now on stops instead of killing.
    /// Must run inside a tokio runtime.
    pub fn on_signal() -> Self {
        let signal = installed();
        let stop = Stop::new();
        let set = stop.clone();
        tokio::spawn(async move {
            signal.await;
            set.trigger();
        });
        stop
    }

    /// Asks to stop; the first call's instant is kept.
    pub fn trigger(&self) {
        self.0.send_if_modified(|at| {
            let first = at.is_none();
            if first {
                *at = Some(Instant::now());
            }
            first
        });
    }

    pub fn is_stopped(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// When the stop came.
    pub fn at(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    /// Resolves `grace` after the stop came (at once if that is past);
    /// never resolves while no stop comes.
    pub async fn after(&self, grace: Duration) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so the wait ends only with a stop.
        let at = rx.wait_for(Option::is_some).await.ok().and_then(|at| *at);
        let Some(at) = at else {
            return std::future::pending().await;
        };
        tokio::time::sleep_until((at + grace).into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn after_resolves_grace_after_the_first_trigger() {
        let stop = Stop::new();
        assert!(!stop.is_stopped());
        let waiting = stop.clone();
        let waited = tokio::spawn(async move {
            waiting.after(Duration::from_millis(200)).await;
            Instant::now()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waited.is_finished(), "no stop yet");
        let triggered = Instant::now();
        stop.trigger();
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.trigger();
        let at = stop.at().expect("stopped");
        assert!(
            at >= triggered && at.elapsed() >= Duration::from_millis(50),
            "the first trigger counts"
        );
        let took = waited.await.unwrap() - triggered;
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(2),
            "{took:?}"
        );
        // Already past: at once.
        tokio::time::timeout(Duration::from_millis(100), stop.after(Duration::ZERO))
            .await
            .expect("a past stop resolves at once");
    }
}
