//! The async form that runs until done, fatal, spent, or the deadline.
use std::time::Duration;

use super::{Ladder, MAX_DELAY};

/// What one attempt of [`Ladder::retry_until`] came to.
#[derive(Debug)]
pub enum Step<T, E> {
    Done(T),
    /// Failed, and another attempt may succeed; `floor` is a server-given
    /// Retry-After the next wait must not undercut.
    Retry {
        error: E,
        floor: Option<Duration>,
    },
    /// Failed in a way no attempt can fix.
    Fatal(E),
}

/// Why [`Ladder::retry_until`] gave up, with the last attempt's error and
/// how many attempts were made.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped<E> {
    Fatal {
        error: E,
        attempts: u32,
    },
    /// The ladder's attempts are spent.
    Exhausted {
        error: E,
        attempts: u32,
    },
    /// The next wait, `pause`, would end past the deadline.
    Deadline {
        error: E,
        attempts: u32,
        pause: Duration,
    },
}

/// One attempt of [`Ladder::retry_until`]: borrows the caller's state for
/// as long as the attempt runs.
pub type StepFuture<'a, T, E> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Step<T, E>> + Send + 'a>>;

impl Ladder {
    /// Runs `attempt(state, n)` (`n` from 1) until it is done or fatal,
    /// the ladder is spent, or its next wait would end past `deadline`.
    /// The wait after a failure is the ladder's delay with a Retry-After
    /// the attempt reported as its floor (the floor itself is not
    /// jittered). `on_retry(state, n, pause, error)` runs before each wait.
    pub async fn retry_until<S, T, E>(
        &self,
        deadline: crate::deadline::Deadline,
        state: &mut S,
        mut attempt: impl for<'a> FnMut(&'a mut S, u32) -> StepFuture<'a, T, E>,
        mut on_retry: impl FnMut(&S, u32, Duration, &E),
    ) -> Result<(T, u32), Stopped<E>> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let (error, floor) = match attempt(state, attempts).await {
                Step::Done(v) => return Ok((v, attempts)),
                Step::Fatal(error) => return Err(Stopped::Fatal { error, attempts }),
                Step::Retry { error, floor } => (error, floor),
            };
            let Some(pause) = self
                .delay(attempts - 1, None)
                .map(|d| d.max(floor.unwrap_or_default()))
            else {
                return Err(Stopped::Exhausted { error, attempts });
            };
            if !deadline.allows(pause) {
                return Err(Stopped::Deadline {
                    error,
                    attempts,
                    pause,
                });
            }
            on_retry(state, attempts, pause, &error);
            tokio::time::sleep(pause).await;
        }
    }

    /// The longest wait after failed attempt `failed` (0-based): the
    /// delay with all its jitter, or None when the ladder is exhausted.
    pub fn longest_delay(&self, failed: u32) -> Option<Duration> {
        if failed + 1 >= self.attempts {
            return None;
        }
        let exp = self.base.saturating_mul(1u32 << failed.min(20));
        Some(
            exp.min(MAX_DELAY)
                .mul_f64(1.0 + self.jitter.max(0.0))
                .min(MAX_DELAY),
        )
    }
}

#[cfg(test)]
#[path = "until_tests.rs"]
mod tests;
