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

#[test]
fn retry_blocking_until_spends_quick_then_the_ladder_and_again_costs_no_rung() {
    use crate::deadline::Deadline;
    use std::cell::RefCell;
    let ladder = Ladder {
        attempts: 3,
        base: Duration::from_millis(100),
        jitter: 0.0,
    };
    let quick = Ladder {
        attempts: 3,
        base: Duration::from_millis(1),
        jitter: 0.0,
    };
    let slept = RefCell::new(Vec::new());
    let sleep = |d: Duration| slept.borrow_mut().push(d);
    // Again, then endless Quick: two quick waits, then this ladder's two.
    let mut waits = Vec::new();
    let got: Result<(), Stopped<u32>> = ladder.retry_blocking_until(
        &quick,
        Deadline::none(),
        &mut waits,
        |_, n| if n == 1 { Try::Again(n) } else { Try::Quick(n) },
        |waits, n, wait, _, _| waits.push((n, wait)),
        &sleep,
    );
    assert_eq!(
        got,
        Err(Stopped::Exhausted {
            error: 6,
            attempts: 6
        })
    );
    assert_eq!(
        waits,
        [
            (1, Wait::Again),
            (2, Wait::Quick(1)),
            (3, Wait::Quick(2)),
            (4, Wait::Retry),
            (5, Wait::Retry)
        ]
    );
    // No sleep for Again; the floor lifts this ladder's wait.
    assert_eq!(*slept.borrow(), [1, 2, 100, 200].map(Duration::from_millis));
    slept.borrow_mut().clear();
    let floor = Some(Duration::from_secs(1));
    let got: Result<u32, Stopped<u32>> = ladder.retry_blocking_until(
        &quick,
        Deadline::none(),
        &mut (),
        |_, n| match n {
            1 => Try::Retry { error: n, floor },
            _ => Try::Done(n),
        },
        |_, _, _, _, _| {},
        &sleep,
    );
    assert_eq!((got, slept.borrow()[0]), (Ok(2), Duration::from_secs(1)));
    // Fatal stops at once; a spent deadline stops before any wait.
    let fatal: Result<(), Stopped<u32>> = ladder.retry_blocking_until(
        &quick,
        Deadline::none(),
        &mut (),
        |_, n| Try::Fatal(n),
        |_, _, _, _, _| {},
        &sleep,
    );
    assert_eq!(
        fatal,
        Err(Stopped::Fatal {
            error: 1,
            attempts: 1
        })
    );
    let spent: Result<(), Stopped<u32>> = ladder.retry_blocking_until(
        &quick,
        Deadline::after(Duration::ZERO, "A_BUDGET"),
        &mut (),
        |_, n| Try::Again(n),
        |_, _, _, _, _| {},
        &sleep,
    );
    assert!(
        matches!(spent, Err(Stopped::Deadline { attempts: 1, pause, .. }) if pause.is_zero()),
        "{spent:?}"
    );
}
