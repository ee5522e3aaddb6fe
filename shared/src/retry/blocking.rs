//! The blocking forms: for a thread that may sleep between attempts.
use std::time::Duration;

use super::Ladder;

impl Ladder {
    /// Runs `attempt` until it succeeds, fails with an error `retryable`
    /// refuses, or the ladder is spent, sleeping (blocking the thread) for
    /// the ladder's delays in between; the last error otherwise.
    pub fn retry_blocking<T, E>(
        &self,
        mut attempt: impl FnMut() -> Result<T, E>,
        retryable: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        let mut failed = 0;
        loop {
            let e = match attempt() {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match self.delay(failed, None).filter(|_| retryable(&e)) {
                Some(delay) => std::thread::sleep(delay),
                None => return Err(e),
            }
            failed += 1;
        }
    }
}

/// What one attempt of [`Ladder::retry_blocking_until`] came to.
#[derive(Debug)]
pub enum Try<T, E> {
    Done(T),
    /// Failed; try again at once, spending no rung. The caller bounds how
    /// often it answers this (for one retry from a fresh start, say).
    Again(E),
    /// Failed in the way the quick ladder is for (contention, say): its
    /// short waits first, then, once it is spent, as [`Try::Retry`].
    Quick(E),
    /// Failed, and another attempt may succeed; `floor` is a server-given
    /// Retry-After the wait must not undercut.
    Retry {
        error: E,
        floor: Option<Duration>,
    },
    /// Failed in a way no attempt can fix.
    Fatal(E),
}

/// Which wait comes before the next attempt of
/// [`Ladder::retry_blocking_until`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// None: the attempt said [`Try::Again`].
    Again,
    /// The quick ladder's `n`th wait (from 1).
    Quick(u32),
    /// This ladder's wait.
    Retry,
}

impl Ladder {
    /// Runs `attempt(state, n)` (`n` from 1) until it is done or fatal,
    /// this ladder is spent, or the next wait would end past `deadline`,
    /// blocking in `sleep` between attempts. Failures the attempt calls
    /// quick wait on `quick` (its count kept across the whole run) before
    /// they count here. `on_retry(state, n, wait, pause, error)` runs
    /// before each wait. The counts in [`Stopped`] are attempts made.
    pub fn retry_blocking_until<S: ?Sized, T, E>(
        &self,
        quick: &Ladder,
        deadline: crate::deadline::Deadline,
        state: &mut S,
        mut attempt: impl FnMut(&mut S, u32) -> Try<T, E>,
        mut on_retry: impl FnMut(&mut S, u32, Wait, Duration, &E),
        sleep: &dyn Fn(Duration),
    ) -> Result<T, super::Stopped<E>> {
        use super::Stopped;
        let (mut attempts, mut failed, mut quickened) = (0u32, 0u32, 0u32);
        loop {
            attempts += 1;
            let (error, wait, pause) = match attempt(state, attempts) {
                Try::Done(v) => return Ok(v),
                Try::Fatal(error) => return Err(Stopped::Fatal { error, attempts }),
                Try::Again(error) => (error, Wait::Again, Some(Duration::ZERO)),
                Try::Quick(error) => match quick.delay(quickened, None) {
                    Some(pause) => {
                        quickened += 1;
                        (error, Wait::Quick(quickened), Some(pause))
                    }
                    None => {
                        let pause = self.delay(failed, None);
                        (error, Wait::Retry, pause)
                    }
                },
                Try::Retry { error, floor } => {
                    let pause = self.delay(failed, floor);
                    (error, Wait::Retry, pause)
                }
            };
            let Some(pause) = pause else {
                return Err(Stopped::Exhausted { error, attempts });
            };
            if !deadline.allows(pause) {
                return Err(Stopped::Deadline {
                    error,
                    attempts,
                    pause,
                });
            }
            if wait == Wait::Retry {
                failed += 1;
            }
            on_retry(state, attempts, wait, pause, &error);
            if !pause.is_zero() {
                sleep(pause);
            }
        }
    }
}
