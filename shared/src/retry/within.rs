//! The async form that lends the caller's state to each attempt and stops
//! at a deadline measured from the start.
use std::time::Duration;

use super::Ladder;

/// What one attempt of an operation retried on a ladder came to.
#[derive(Debug)]
pub enum Attempt<T, E> {
    Done(T),
    /// Failed, and another attempt may succeed: why it failed.
    Retry(String),
    /// Failed in a way no attempt can fix.
    Fatal(E),
}

/// Why [`Ladder::retry_within`] gave up.
#[derive(Debug, PartialEq, Eq)]
pub enum GaveUp<E> {
    Fatal(E),
    /// The ladder ran out, or its next wait would end past the deadline:
    /// the last attempt's reason.
    Exhausted(String),
}

/// One attempt of [`Ladder::retry_within`]: borrows the caller's state for
/// as long as the attempt runs.
pub type AttemptFuture<'a, T, E> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Attempt<T, E>> + Send + 'a>>;

impl Ladder {
    /// Runs `attempt` on `state` until it is done or fatal, waiting this
    /// ladder's delays between attempts (the delay after the tenth failure
    /// repeats) while the next wait still ends within `deadline` of the
    /// start. Each attempt is given the time left, at least `floor`.
    /// `on_retry(failures, delay, why)` runs before each wait.
    pub async fn retry_within<S, T, E>(
        &self,
        deadline: Duration,
        floor: Duration,
        state: &mut S,
        mut attempt: impl for<'a> FnMut(&'a mut S, Duration) -> AttemptFuture<'a, T, E>,
        mut on_retry: impl FnMut(u32, Duration, &str),
    ) -> Result<T, GaveUp<E>> {
        // tokio's clock: the same instant in production, and a paused one
        // under tokio's test-util.
        let start = tokio::time::Instant::now();
        let mut failed = 0u32;
        loop {
            let left = deadline.saturating_sub(start.elapsed()).max(floor);
            let why = match attempt(state, left).await {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fatal(e) => return Err(GaveUp::Fatal(e)),
                Attempt::Retry(why) => why,
            };
            match self.delay(failed.min(10), None) {
                Some(delay) if start.elapsed() + delay <= deadline => {
                    failed += 1;
                    on_retry(failed, delay, &why);
                    tokio::time::sleep(delay).await;
                }
                _ => return Err(GaveUp::Exhausted(why)),
            }
        }
    }
}
