//! DoPut activity and the pod's ingest, for graceful shutdown: a stopping
//! writer waits for the DoPuts in flight and for its ingest's final flush.
use std::sync::Arc;

/// DoPut activity and the pod's ingest, so a stopping writer can wait for
/// that ingest's final flush and no longer.
#[derive(Default)]
pub struct Activity {
    in_flight: std::sync::atomic::AtomicUsize,
    /// The ingest instance that said it started and has not said it stopped.
    ingest: std::sync::Mutex<Option<String>>,
    /// Set once the writer stops serving: a flush whose stream ends after
    /// it is not written (the sink is closing).
    closing: std::sync::atomic::AtomicBool,
}

/// One DoPut in flight; ends when dropped, so a handler dropped mid-stream
/// (client reset, client killed) is not counted forever.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Activity {
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(self.clone())
    }

    fn ingest(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.ingest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A (re)started ingest replaces the previous one: one ingest per pod.
    pub fn ingest_started(&self, id: &str) {
        *self.ingest() = Some(id.to_owned());
    }

    /// Only the current instance's stop counts (a late message from one
    /// that was replaced does not release the writer early).
    pub fn ingest_stopped(&self, id: &str) {
        let mut current = self.ingest();
        if current.as_deref() == Some(id) {
            *current = None;
        }
    }

    /// Nothing left to wait for: no DoPut running and no ingest that has
    /// yet to send its final flush.
    pub fn drained(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 && self.ingest().is_none()
    }

    /// No flush is written from now on; those still arriving are refused
    /// as retryable.
    pub fn close(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) fn closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The ingest instance still expected, for the shutdown log.
    pub fn awaited_ingest(&self) -> Option<String> {
        self.ingest().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn a_put_dropped_mid_stream_is_no_longer_in_flight() {
        let activity = Arc::new(Activity::default());
        let put = async {
            let _in_flight = activity.begin();
            std::future::pending::<()>().await;
        };
        // The handler future is dropped before it finishes, as tonic does
        // when the client resets the stream.
        let mut put = Box::pin(put);
        let waker = futures::task::noop_waker();
        let _ = put
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker));
        assert!(!activity.drained());
        drop(put);
        assert!(activity.drained());
    }

    #[test]
    fn only_the_current_ingest_releases_a_stopping_writer() {
        let activity = Activity::default();
        assert!(
            activity.drained(),
            "no ingest announced: nothing to wait for"
        );
        activity.ingest_started("a");
        activity.ingest_started("b"); // a restarted in the pod
        activity.ingest_stopped("a"); // late stop of the old instance
        assert!(!activity.drained());
        assert_eq!(activity.awaited_ingest().as_deref(), Some("b"));
        activity.ingest_stopped("b");
        assert!(activity.drained());
    }
}
