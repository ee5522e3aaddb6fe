//! One deadline for a whole write: every retry loop inside it waits or
//! tries again only while that ends before the deadline, and every request
//! made under [`Deadline::scope`] is cut at it ([`Deadline::current`]).
//!
//! The loops get the deadline as a parameter; the requests find it in the
//! scope, so a client does not need it threaded through each call, and a
//! write that is dropped half-way leaves nothing behind on the client.
use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    static CURRENT: Deadline;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// `None`: no deadline; only the ladders bound the work.
    at: Option<Instant>,
    budget: Duration,
    /// The settings that give the budget, for the error that says it was spent.
    set_by: &'static str,
}

impl Deadline {
    /// No deadline.
    pub fn none() -> Self {
        Deadline {
            at: None,
            budget: Duration::MAX,
            set_by: "",
        }
    }

    /// `budget` from now; `set_by` names the settings it comes from.
    pub fn after(budget: Duration, set_by: &'static str) -> Self {
        Deadline {
            at: Instant::now().checked_add(budget),
            budget,
            set_by,
        }
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The settings that give the budget.
    pub fn set_by(&self) -> &'static str {
        self.set_by
    }

    /// Time left (zero once spent); `None` without a deadline.
    pub fn left(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Whether a wait of `pause` still ends before the deadline, leaving
    /// time for another attempt.
    pub fn allows(&self, pause: Duration) -> bool {
        match self.at {
            None => true,
            Some(at) => Instant::now().checked_add(pause).is_some_and(|t| t < at),
        }
    }

    /// `timeout`, or the time left if that is shorter.
    pub fn clip(&self, timeout: Duration) -> Duration {
        self.left().map_or(timeout, |left| left.min(timeout))
    }

    /// Runs `work` with this as the deadline its requests are cut at.
    pub async fn scope<F: Future>(self, work: F) -> F::Output {
        CURRENT.scope(self, work).await
    }

    /// The deadline of the enclosing [`Deadline::scope`], if any.
    pub fn current() -> Option<Deadline> {
        CURRENT.try_with(|d| *d).ok().filter(|d| d.at.is_some())
    }

    /// `work`, or `None` when the deadline comes first.
    pub async fn cut<F: Future>(&self, work: F) -> Option<F::Output> {
        match self.at {
            None => Some(work.await),
            Some(at) => tokio::time::timeout_at(tokio::time::Instant::from_std(at), work)
                .await
                .ok(),
        }
    }
}

impl std::fmt::Display for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at.is_none() {
            return f.write_str("no deadline");
        }
        write!(f, "the write's deadline of {:?}", self.budget)?;
        if !self.set_by.is_empty() {
            write!(f, " (set by {})", self.set_by)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_deadline_allows_waits_that_end_before_it_and_clips_requests() {
        let ms = Duration::from_millis;
        let d = Deadline::after(Duration::from_secs(10), "A_SETTING");
        assert!(d.allows(ms(9_000)));
        assert!(!d.allows(Duration::from_secs(3600)));
        assert!(!d.allows(Duration::MAX), "no overflow");
        assert!(d.clip(Duration::from_secs(45)) <= Duration::from_secs(10));
        assert_eq!(d.clip(ms(5)), ms(5));
        assert!(d.to_string().contains("A_SETTING"), "{d}");
        let spent = Deadline::after(Duration::ZERO, "A_SETTING");
        assert!(!spent.allows(Duration::ZERO));
        assert_eq!(spent.left(), Some(Duration::ZERO));
        assert_eq!(spent.cut(std::future::pending::<()>()).await, None);

        let none = Deadline::none();
        assert!(none.allows(Duration::MAX));
        assert_eq!(none.clip(ms(7)), ms(7));
        assert_eq!(none.cut(async { 1 }).await, Some(1));
    }

    #[tokio::test]
    async fn requests_find_the_deadline_of_their_scope_only() {
        assert_eq!(Deadline::current(), None);
        let d = Deadline::after(Duration::from_secs(5), "A_SETTING");
        assert_eq!(d.scope(async { Deadline::current() }).await, Some(d));
        assert_eq!(
            Deadline::none().scope(async { Deadline::current() }).await,
            None
        );
        assert_eq!(Deadline::current(), None);
    }
}
