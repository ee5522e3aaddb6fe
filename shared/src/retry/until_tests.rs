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
