//! The semaphore, the permit-expirable semaphore and the count-down latch against a real Redis:
//! permits never exceeded, wake-ups by message (not polling), expired permits reclaimed, and
//! cancellation storms that leave nothing taken.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, PermitId};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, command_calls};
use tokio::time::Instant;

#[tokio::test]
async fn a_semaphore_never_hands_out_more_than_its_permits() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let semaphore = client.semaphore("sem:cap");
    assert!(semaphore.try_set_permits(3).await.expect("set"));
    assert!(!semaphore.try_set_permits(5).await.expect("set once"));
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..12)
        .map(|_| {
            let (semaphore, inside, most) = (semaphore.clone(), inside.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..5 {
                    let permit = semaphore.acquire(1).await.expect("acquire");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let _ = inside.fetch_sub(1, Ordering::SeqCst);
                    permit.release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "exactly the permits, never more"
    );
    assert_eq!(semaphore.available_permits().await.expect("available"), 3);
}

#[tokio::test]
async fn a_release_of_n_wakes_up_to_n_waiters_without_polling() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.semaphore("sem:wake");
    assert!(semaphore.try_set_permits(0).await.expect("set"));
    // Load the release script now, so the counts below are the calls of interest alone.
    semaphore.release(1).await.expect("release");
    semaphore
        .try_acquire(1)
        .await
        .expect("try")
        .expect("taken")
        .forget();
    let woken = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let (semaphore, woken) = (semaphore.clone(), woken.clone());
            tokio::spawn(async move {
                semaphore.acquire(1).await.expect("acquire").forget();
                let _ = woken.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = command_calls(&mut redis).await;
    let released = Instant::now();
    semaphore.release(2).await.expect("release");
    while woken.load(Ordering::SeqCst) < 2 {
        assert!(
            released.elapsed() < Duration::from_millis(50),
            "woken within 50 ms"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(woken.load(Ordering::SeqCst), 2, "two permits, two waiters");
    let after = command_calls(&mut redis).await;
    let tries =
        after.get("evalsha").copied().unwrap_or(0) - before.get("evalsha").copied().unwrap_or(0);
    // The release itself, then exactly the two woken waiters' tries.
    assert_eq!(tries, 3, "a message of 2 wakes 2 of the 5 waiters, not all");
    semaphore.release(3).await.expect("release");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("woken")
            .expect("task");
    }
    assert_eq!(semaphore.available_permits().await.expect("available"), 0);
}

#[tokio::test]
async fn semaphore_operations_follow_redisson() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.semaphore("sem:ops");
    assert_eq!(semaphore.available_permits().await.expect("get"), 0);
    assert!(!semaphore.release_if_exists(1).await.expect("missing"));
    assert!(semaphore.try_acquire(1).await.expect("try").is_none());
    assert!(
        semaphore.try_acquire(0).await.expect("zero").is_some(),
        "zero permits: no call"
    );
    semaphore.add_permits(4).await.expect("add");
    semaphore.add_permits(-1).await.expect("remove");
    let value: String = redis.get("sem:ops").await.expect("GET");
    assert_eq!(value, "3", "an integer string, as Java writes it");
    let two = semaphore.try_acquire(2).await.expect("try").expect("two");
    assert_eq!(two.permits(), 2);
    assert!(semaphore.try_acquire(2).await.expect("try").is_none());
    drop(two);
    let deadline = Instant::now() + Duration::from_secs(2);
    while semaphore.available_permits().await.expect("get") != 3 {
        assert!(
            Instant::now() < deadline,
            "a dropped guard gives its permits back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let kept = semaphore.acquire(1).await.expect("acquire").forget();
    assert_eq!(kept, 1);
    assert_eq!(semaphore.available_permits().await.expect("get"), 2);
    assert!(semaphore.release_if_exists(1).await.expect("exists"));
    assert_eq!(semaphore.drain_permits().await.expect("drain"), 3);
    assert_eq!(semaphore.available_permits().await.expect("get"), 0);
    let started = Instant::now();
    assert!(
        semaphore
            .try_acquire_for(1, Duration::from_millis(150))
            .await
            .expect("try")
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(semaphore.delete().await.expect("delete"));
    assert!(
        semaphore
            .try_set_permits_with_ttl(2, Duration::from_secs(60))
            .await
            .expect("set")
    );
    let ttl: i64 = redis.pttl("sem:ops").await.expect("PTTL");
    assert!(ttl > 59_000, "{ttl}");
    let _: () = redis.set("sem:ops", "x").await.expect("SET");
    assert!(matches!(
        semaphore.try_acquire(1).await,
        Err(Error::Backend { .. } | Error::UnexpectedReply { .. })
    ));
}

#[tokio::test]
async fn a_cancellation_storm_on_a_semaphore_leaves_no_permit_taken() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let semaphore = client.semaphore("sem:storm");
    assert!(semaphore.try_set_permits(2).await.expect("set"));
    let holder = semaphore.acquire(2).await.expect("all of them");
    let mut handles = Vec::new();
    for i in 0..200_u64 {
        let semaphore = semaphore.clone();
        let patience = Duration::from_micros(100 + (i * 37) % 3000);
        handles.push(tokio::spawn(async move {
            let _ = tokio::time::timeout(patience, semaphore.acquire(1)).await;
        }));
        if i == 100 {
            holder.release().await.expect("release");
            break;
        }
    }
    for i in 0..200_u64 {
        let semaphore = semaphore.clone();
        let patience = Duration::from_micros(50 + (i * 53) % 2000);
        handles.push(tokio::spawn(async move {
            // Taken and dropped at once, or dropped mid-flight: either way given back.
            let _ = tokio::time::timeout(patience, semaphore.acquire(1)).await;
        }));
    }
    for handle in handles {
        handle.await.expect("task");
    }
    client.close().await;
    assert_eq!(semaphore.available_permits().await.expect("get"), 2);
    assert_eq!(
        client.stats().subscribed_channels,
        0,
        "no waiter registered"
    );
}

#[tokio::test]
async fn a_lost_semaphore_reply_is_an_outcome_unknown_error_never_a_resend() {
    let server = RedisServer::start();
    let client = harness::fast_timeouts(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.semaphore("sem:lost");
    assert!(semaphore.try_set_permits(5).await.expect("set"));
    // Load the script first, so that the calls counted below are the acquire alone.
    let _ = semaphore
        .try_acquire(1)
        .await
        .expect("try")
        .expect("taken")
        .forget();
    let before = command_calls(&mut redis).await;
    harness::pause_clients(&mut redis, 300).await;
    let outcome = semaphore.try_acquire(1).await;
    assert!(
        matches!(
            outcome,
            Err(Error::OutcomeUnknown {
                operation: rlock_redisson::Operation::Acquire,
                ..
            })
        ),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Whether the acquire ran once the pause ended depends on whether its connection was still
    // open then; either way it ran at most once (never re-sent), and the count says which.
    let available = semaphore.available_permits().await.expect("get");
    let calls = command_calls(&mut redis).await;
    let acquires =
        calls.get("evalsha").copied().unwrap_or(0) - before.get("evalsha").copied().unwrap_or(0);
    assert!(acquires <= 1, "never re-sent: {acquires} acquires ran");
    assert_eq!(
        4 - available,
        i64::try_from(acquires).expect("small"),
        "taken iff it ran"
    );
}

#[tokio::test]
async fn expirable_permits_have_ids_leases_and_come_back_when_they_expire() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.permit_expirable_semaphore("pes:ops");
    assert!(semaphore.try_set_permits(2).await.expect("set"));
    let short = semaphore
        .acquire_with_lease(Duration::from_millis(150))
        .await
        .expect("acquire");
    let kept = semaphore.acquire().await.expect("acquire");
    assert_eq!(short.to_string().len(), 32);
    let members: Vec<Vec<u8>> = redis
        .zrange("{pes:ops}:timeout", 0, -1)
        .await
        .expect("ZRANGE");
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|m| m.len() == 16), "raw 16-byte ids");
    assert!(members.contains(&short.as_bytes().to_vec()));
    let score: String = redis
        .zscore("{pes:ops}:timeout", kept.as_bytes().as_slice())
        .await
        .expect("ZSCORE");
    assert_eq!(score, "922337203685477", "the non-expiring score");
    assert_eq!(semaphore.lease_time(kept).await.expect("lease"), None);
    let left = semaphore
        .lease_time(short)
        .await
        .expect("lease")
        .expect("expires");
    assert!(left <= Duration::from_millis(150), "{left:?}");
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 2);
    assert_eq!(semaphore.available_permits().await.expect("available"), 0);

    // No permit now: a waiter sleeps until the nearest expiry, and the expired one comes back to it.
    let started = Instant::now();
    let third = semaphore
        .try_acquire_for(Duration::from_secs(2))
        .await
        .expect("acquire")
        .expect("the expired permit");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !semaphore.try_release(short).await.expect("gone"),
        "it expired"
    );
    assert!(matches!(
        semaphore.release(short).await,
        Err(Error::PermitNotFound { .. })
    ));
    assert!(
        semaphore
            .update_lease_time(third, Duration::from_secs(60))
            .await
            .expect("update")
    );
    assert!(
        semaphore
            .lease_time(third)
            .await
            .expect("lease")
            .expect("expires")
            > Duration::from_secs(59)
    );
    assert_eq!(semaphore.permits().await.expect("permits"), 2);
    assert_eq!(
        semaphore
            .try_release_many(&[third, short])
            .await
            .expect("all or none"),
        0
    );
    assert_eq!(
        semaphore
            .try_release_many(&[third, kept])
            .await
            .expect("both"),
        2
    );
    assert_eq!(semaphore.available_permits().await.expect("available"), 2);
    semaphore.set_permits(5).await.expect("set");
    assert_eq!(semaphore.available_permits().await.expect("available"), 5);
    let ids = semaphore.acquire_many(3, None).await.expect("three");
    assert_eq!(ids.len(), 3);
    semaphore.set_permits(4).await.expect("shrink");
    assert_eq!(semaphore.available_permits().await.expect("available"), 1);
    semaphore.add_permits(2).await.expect("add");
    assert_eq!(semaphore.permits().await.expect("permits"), 6);
    let expiries = semaphore.permit_expiries().await.expect("expiries");
    assert_eq!(expiries.len(), 3);
    assert!(
        expiries
            .iter()
            .all(|(id, at)| ids.contains(id) && at.is_none())
    );
    assert!(matches!(
        semaphore.lease_time(PermitId::from_bytes([7; 16])).await,
        Err(Error::PermitNotFound { .. })
    ));
}

#[tokio::test]
async fn a_cancellation_storm_on_an_expirable_semaphore_leaves_no_permit_taken() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let semaphore = client.permit_expirable_semaphore("pes:storm");
    assert!(semaphore.try_set_permits(3).await.expect("set"));
    let held = semaphore.acquire_many(3, None).await.expect("all");
    let mut handles = Vec::new();
    for i in 0..300_u64 {
        let racer = semaphore.clone();
        let patience = Duration::from_micros(50 + (i * 41) % 3000);
        handles.push(tokio::spawn(async move {
            let semaphore = racer;
            // An id that was returned is given back; one dropped in flight is undone by id.
            if let Ok(Ok(id)) = tokio::time::timeout(patience, semaphore.acquire()).await {
                semaphore.release(id).await.expect("release");
            }
        }));
        if i == 150 {
            assert_eq!(semaphore.try_release_many(&held).await.expect("release"), 3);
        }
    }
    for handle in handles {
        handle.await.expect("task");
    }
    client.close().await;
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 0);
    assert_eq!(semaphore.available_permits().await.expect("available"), 3);
    assert_eq!(client.stats().subscribed_channels, 0);
}

#[tokio::test]
async fn a_count_down_to_zero_opens_every_waiter_and_a_new_count_closes_the_latch() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let other = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let latch = client.count_down_latch("latch:batch");
    assert!(
        latch
            .await_for(Duration::ZERO)
            .await
            .expect("no count: open")
    );
    assert!(latch.try_set_count(2).await.expect("set"));
    assert!(!latch.try_set_count(5).await.expect("set once"));
    assert_eq!(latch.count().await.expect("count"), 2);
    let opened = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (latch, opened) = (latch.clone(), opened.clone());
            tokio::spawn(async move {
                latch.await_zero().await.expect("await");
                let _ = opened.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    assert!(
        !latch
            .await_for(Duration::from_millis(100))
            .await
            .expect("closed")
    );
    let remote = other.count_down_latch("latch:batch");
    remote.count_down().await.expect("count down");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(opened.load(Ordering::SeqCst), 0, "one count left");
    let before = command_calls(&mut redis).await;
    let counted = Instant::now();
    remote.count_down().await.expect("count down");
    for waiter in waiters {
        waiter.await.expect("task");
    }
    assert!(
        counted.elapsed() < Duration::from_millis(50),
        "{:?}",
        counted.elapsed()
    );
    assert_eq!(opened.load(Ordering::SeqCst), 4);
    let after = command_calls(&mut redis).await;
    let gets = after.get("get").copied().unwrap_or(0) - before.get("get").copied().unwrap_or(0);
    assert_eq!(gets, 4, "each waiter read the count once after the opening");
    let exists: bool = redis.exists("latch:batch").await.expect("EXISTS");
    assert!(!exists, "zero deletes the count");
    assert_eq!(latch.count().await.expect("count"), 0);
    remote.count_down().await.expect("below zero does nothing");
    assert_eq!(latch.count().await.expect("count"), 0);
    // Reusable: a new count closes it again.
    assert!(latch.try_set_count(1).await.expect("set"));
    assert!(
        !latch
            .await_for(Duration::from_millis(50))
            .await
            .expect("closed again")
    );
    assert!(latch.delete().await.expect("delete"));
    assert!(!latch.delete().await.expect("gone"));
}

#[tokio::test]
async fn dropped_latch_waiters_leave_no_subscription() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let latch = client.count_down_latch("latch:drop");
    assert!(latch.try_set_count(1).await.expect("set"));
    let tasks: Vec<_> = (0..50_u64)
        .map(|i| {
            let latch = latch.clone();
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(Duration::from_micros(100 + i * 97), latch.await_zero())
                        .await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(client.stats().subscribed_channels, 0);
    assert_eq!(latch.count().await.expect("count"), 1);
}

#[tokio::test]
async fn a_semaphore_acquire_dropped_in_flight_gives_back_what_it_took() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.semaphore("sem:in-flight");
    assert!(semaphore.try_set_permits(3).await.expect("set"));
    harness::pause_clients(&mut redis, 300).await;
    // Sent, then dropped while Redis sits on it: the reply arrives with nobody to take it.
    let dropped = tokio::time::timeout(Duration::from_millis(50), semaphore.acquire(2)).await;
    assert!(dropped.is_err(), "still in flight when dropped");
    tokio::time::sleep(Duration::from_millis(350)).await;
    client.close().await;
    assert_eq!(
        semaphore.available_permits().await.expect("get"),
        3,
        "taken, then given back"
    );
    let calls = command_calls(&mut redis).await;
    assert_eq!(
        calls.get("publish").copied().unwrap_or(0),
        2,
        "set-up, then the give-back (the acquire ran once)"
    );
}

#[tokio::test]
async fn a_lost_expirable_acquire_reply_is_undone_by_permit_id() {
    let server = RedisServer::start();
    let client = harness::fast_timeouts(&server).await;
    let mut redis = harness::raw(&server).await;
    let semaphore = client.permit_expirable_semaphore("pes:lost");
    assert!(semaphore.try_set_permits(2).await.expect("set"));
    harness::pause_clients(&mut redis, 300).await;
    let outcome = semaphore.try_acquire().await;
    assert!(
        matches!(outcome, Err(Error::Timeout { .. } | Error::Backend { .. })),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    client.close().await;
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 0);
    assert_eq!(semaphore.available_permits().await.expect("available"), 2);
}
