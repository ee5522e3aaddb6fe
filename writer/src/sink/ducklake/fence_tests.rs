use super::*;

#[test]
fn a_fence_table_is_named_by_the_token_that_ends_its_owner() {
    let owner = LeaseOwner::new(Some("pod-0".into()), Some("uid".into()));
    let token = fence_token(&owner.id).unwrap();
    assert_eq!(token.len(), 12);
    assert!(owner.id.ends_with(token));
    assert_eq!(
        fence_name("events", token),
        format!("_millpond_fence_events_{token}")
    );
    // Owners a release without fence tables wrote have none.
    assert_eq!(fence_token("millpond-0"), None);
    assert_eq!(fence_token("a/b/"), None);
    assert_eq!(fence_token("a/b/x'; DROP"), None);
}

#[test]
fn leases_are_renewed_at_two_thirds_and_refused_for_commit_at_one_third() {
    let mut f = Fence::new(
        LeaseOwner::new(Some("pod-0".into()), None),
        Duration::from_secs(60),
    );
    let r = [OffsetRange::new("t", 3, 0, 9)];
    assert!(!f.still_held(&r), "nothing held yet");
    f.held
        .insert(("t".into(), 3), Instant::now() + Duration::from_secs(50));
    assert!(f.still_held(&r));
    assert!(f.remaining(&r[0], Instant::now()) > f.lease * 2 / 3);
    f.held
        .insert(("t".into(), 3), Instant::now() + Duration::from_secs(15));
    assert!(!f.still_held(&r));
    assert_eq!(
        partitions(
            &[
                r[0].clone(),
                OffsetRange::new("t", 5, 0, 1),
                OffsetRange::new("u", 1, 0, 1)
            ],
            "t"
        ),
        "3, 5"
    );
}
