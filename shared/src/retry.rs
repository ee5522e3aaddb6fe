//! Retry ladders with upward jitter.
//!
//! Delays only ever grow by the jitter (0..=25%), so a fleet refused by one
//! event spreads out instead of retrying in lockstep, and no pod retries
//! sooner than the ladder says.
use std::time::Duration;

use rand::Rng;

/// Ceiling for any single delay, jitter included.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Ladder {
    /// Total attempts, the first included.
    pub attempts: u32,
    /// Delay after the first failure; doubles after each later failure.
    pub base: Duration,
    /// Upward jitter as a fraction of the delay (0.25 = up to +25%).
    pub jitter: f64,
}

impl Ladder {
    /// Lake writes: 3 attempts, 1 s then 2 s.
    pub const LAKE_WRITE: Ladder = Ladder {
        attempts: 3,
        base: Duration::from_secs(1),
        jitter: 0.25,
    };
    /// Kafka offset commits: 3 attempts, 0.5 s then 1 s.
    pub const OFFSET_COMMIT: Ladder = Ladder {
        attempts: 3,
        base: Duration::from_millis(500),
        jitter: 0.0,
    };

    /// Delay after failed attempt `failed` (0-based), or None when the
    /// ladder is exhausted. `floor` is a server-given Retry-After.
    pub fn delay(&self, failed: u32, floor: Option<Duration>) -> Option<Duration> {
        if failed + 1 >= self.attempts {
            return None;
        }
        let exp = self.base.saturating_mul(1u32 << failed.min(20));
        let mut d = exp.min(MAX_DELAY);
        if let Some(f) = floor {
            d = d.max(f);
        }
        let factor = 1.0 + rand::rng().random_range(0.0..=self.jitter.max(0.0));
        Some(
            d.mul_f64(factor)
                .min(MAX_DELAY.max(floor.unwrap_or_default())),
        )
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_blocking_stops_at_success_refusal_or_the_last_attempt() {
        let ladder = Ladder {
            attempts: 4,
            base: Duration::from_millis(1),
            jitter: 0.0,
        };
        let mut tries = 0;
        let got: Result<u32, u32> = ladder.retry_blocking(
            || {
                tries += 1;
                if tries == 3 {
                    Ok(tries)
                } else {
                    Err(tries)
                }
            },
            |_| true,
        );
        assert_eq!((got, tries), (Ok(3), 3));
        let mut tries = 0;
        let got: Result<(), u32> = ladder.retry_blocking(
            || {
                tries += 1;
                Err(tries)
            },
            |e| *e != 2,
        );
        assert_eq!(got, Err(2), "a refused error ends it at once");
        let mut tries = 0;
        let got: Result<(), u32> = ladder.retry_blocking(
            || {
                tries += 1;
                Err(tries)
            },
            |_| true,
        );
        assert_eq!(got, Err(4), "the ladder's 4 attempts, then the last error");
    }

    /// Counts attempts in the state the helper lends to each one. Real
    /// time on a millisecond ladder: the deadline leaves each wait ~200 ms
    /// of slack for a loaded machine.
    #[tokio::test]
    async fn retry_within_lends_state_and_stops_at_the_deadline() {
        let ms = Duration::from_millis;
        let ladder = Ladder {
            attempts: u32::MAX,
            base: ms(20),
            jitter: 0.0,
        };
        // Done on the third attempt: two waits, 20 then 40 ms.
        let mut tries = 0u32;
        let mut waits = Vec::new();
        let got: Result<u32, GaveUp<()>> = ladder
            .retry_within(
                Duration::from_secs(60),
                ms(1),
                &mut tries,
                |n, _| {
                    Box::pin(async move {
                        *n += 1;
                        if *n == 3 {
                            Attempt::Done(*n)
                        } else {
                            Attempt::Retry(format!("try {n}"))
                        }
                    })
                },
                |failed, delay, _| waits.push((failed, delay)),
            )
            .await;
        assert_eq!(got, Ok(3));
        assert_eq!(waits, [(1, ms(20)), (2, ms(40))]);
        // Never done: 20 + 40 + 80 + 160 ms of waits fit in 500 ms, the
        // next 320 ms does not.
        let mut tries = 0u32;
        let started = std::time::Instant::now();
        let got: Result<(), GaveUp<()>> = ladder
            .retry_within(
                ms(500),
                ms(1),
                &mut tries,
                |n, _| {
                    Box::pin(async move {
                        *n += 1;
                        Attempt::Retry(format!("try {n}"))
                    })
                },
                |_, _, _| {},
            )
            .await;
        assert_eq!(got, Err(GaveUp::Exhausted("try 5".into())));
        assert!(started.elapsed() >= ms(300), "{:?}", started.elapsed());
        // Fatal stops at once.
        let got: Result<(), GaveUp<&str>> = ladder
            .retry_within(
                Duration::from_secs(10),
                Duration::from_secs(1),
                &mut (),
                |_, _| Box::pin(async { Attempt::Fatal("no") }),
                |_, _, _| panic!("no retry after a fatal attempt"),
            )
            .await;
        assert_eq!(got, Err(GaveUp::Fatal("no")));
    }

    #[test]
    fn lake_write_ladder_is_one_then_two_seconds_jittered_up() {
        let l = Ladder::LAKE_WRITE;
        for _ in 0..200 {
            let d0 = l.delay(0, None).unwrap();
            let d1 = l.delay(1, None).unwrap();
            assert!(
                d0 >= Duration::from_secs(1) && d0 <= Duration::from_millis(1250),
                "{d0:?}"
            );
            assert!(
                d1 >= Duration::from_secs(2) && d1 <= Duration::from_millis(2500),
                "{d1:?}"
            );
        }
        assert_eq!(l.delay(2, None), None, "third failure is final");
    }

    #[test]
    fn offset_commit_ladder_has_no_jitter() {
        let l = Ladder::OFFSET_COMMIT;
        assert_eq!(l.delay(0, None), Some(Duration::from_millis(500)));
        assert_eq!(l.delay(1, None), Some(Duration::from_secs(1)));
        assert_eq!(l.delay(2, None), None);
    }

    #[test]
    fn retry_after_is_a_floor_and_cap_holds() {
        let l = Ladder {
            attempts: 10,
            base: Duration::from_secs(1),
            jitter: 0.25,
        };
        let d = l.delay(0, Some(Duration::from_secs(7))).unwrap();
        assert!(d >= Duration::from_secs(7));
        let big = l.delay(8, None).unwrap();
        assert!(big <= MAX_DELAY);
    }
}

impl Ladder {
    /// A steady ladder's wait: the same after every attempt, `base` spread
    /// both ways by `jitter` (0.1 = 90% to 110%), with no ceiling: for a
    /// loop that polls on a period rather than backing off.
    pub fn steady_delay(&self) -> Duration {
        let j = self.jitter.abs();
        if j == 0.0 {
            return self.base;
        }
        self.base
            .mul_f64(rand::rng().random_range(1.0 - j..1.0 + j))
    }
}

#[cfg(test)]
mod steady_tests {
    use super::*;

    #[test]
    fn steady_delay_spreads_both_ways_and_never_grows() {
        let l = Ladder {
            attempts: u32::MAX,
            base: Duration::from_secs(60),
            jitter: 0.1,
        };
        let waits: Vec<Duration> = (0..400).map(|_| l.steady_delay()).collect();
        assert!(waits
            .iter()
            .all(|d| *d >= Duration::from_secs(54) && *d < Duration::from_secs(66)));
        assert!(waits.iter().any(|d| *d < l.base) && waits.iter().any(|d| *d > l.base));
        let still = Ladder { jitter: 0.0, ..l };
        assert_eq!(still.steady_delay(), Duration::from_secs(60));
    }
}

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
mod retry_until_tests {
    use super::*;
    use crate::deadline::Deadline;

    fn ladder(attempts: u32) -> Ladder {
        Ladder {
            attempts,
            base: Duration::from_millis(20),
            jitter: 0.0,
        }
    }

    /// Counts attempts in the state lent to each one.
    fn counting(n: &mut u32, _: u32) -> StepFuture<'_, u32, String> {
        Box::pin(async move {
            *n += 1;
            if *n == 3 {
                Step::Done(*n)
            } else {
                Step::Retry {
                    error: format!("try {n}"),
                    floor: None,
                }
            }
        })
    }

    #[tokio::test]
    async fn retry_until_waits_the_ladder_and_stops_where_it_ends() {
        let ms = Duration::from_millis;
        let mut waits = Vec::new();
        let got = ladder(8)
            .retry_until(Deadline::none(), &mut 0, counting, |_, n, p, _| {
                waits.push((n, p))
            })
            .await;
        assert_eq!(got, Ok((3, 3)));
        assert_eq!(waits, [(1, ms(20)), (2, ms(40))]);
        let got = ladder(2)
            .retry_until(Deadline::none(), &mut 0, counting, |_, _, _, _| {})
            .await;
        assert_eq!(
            got,
            Err(Stopped::Exhausted {
                error: "try 2".into(),
                attempts: 2
            })
        );
        let got: Result<((), u32), Stopped<&str>> = ladder(8)
            .retry_until(
                Deadline::none(),
                &mut (),
                |_, _| Box::pin(async { Step::Fatal("no") }),
                |_, _, _, _| panic!("no retry after a fatal attempt"),
            )
            .await;
        assert_eq!(
            got,
            Err(Stopped::Fatal {
                error: "no",
                attempts: 1
            })
        );
    }

    #[tokio::test]
    async fn retry_until_floors_the_wait_and_keeps_the_deadline() {
        fn floored(_: &mut (), _: u32) -> StepFuture<'_, (), &'static str> {
            Box::pin(async {
                Step::Retry {
                    error: "busy",
                    floor: Some(Duration::from_secs(3600)),
                }
            })
        }
        let got = ladder(8)
            .retry_until(
                Deadline::after(Duration::from_secs(60), "TEST"),
                &mut (),
                floored,
                |_, _, _, _| panic!("an hour's wait does not fit a minute"),
            )
            .await;
        assert_eq!(
            got,
            Err(Stopped::Deadline {
                error: "busy",
                attempts: 1,
                pause: Duration::from_secs(3600)
            })
        );
        // The floor is not jittered: a 30 ms Retry-After over a 1 ms step
        // is a wait of exactly 30 ms.
        fn floored_30ms(_: &mut (), _: u32) -> StepFuture<'_, (), &'static str> {
            Box::pin(async {
                Step::Retry {
                    error: "busy",
                    floor: Some(Duration::from_millis(30)),
                }
            })
        }
        let mut waits = Vec::new();
        let jittered = Ladder {
            attempts: 2,
            base: Duration::from_millis(1),
            jitter: 0.25,
        };
        let _ = jittered
            .retry_until(Deadline::none(), &mut (), floored_30ms, |_, _, pause, _| {
                waits.push(pause)
            })
            .await;
        assert_eq!(waits, [Duration::from_millis(30)]);
    }

    #[test]
    fn longest_delay_is_the_delay_with_all_its_jitter() {
        let l = Ladder {
            attempts: 8,
            base: Duration::from_secs(1),
            jitter: 0.25,
        };
        assert_eq!(l.longest_delay(0), Some(Duration::from_millis(1250)));
        assert_eq!(l.longest_delay(4), Some(Duration::from_secs(20)));
        assert_eq!(l.longest_delay(5), Some(MAX_DELAY), "capped");
        assert_eq!(l.longest_delay(7), None);
        for failed in 0..7 {
            assert!(l.delay(failed, None).unwrap() <= l.longest_delay(failed).unwrap());
        }
    }
}
