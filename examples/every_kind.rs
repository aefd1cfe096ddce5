//! An async service that uses every kind of Redisson's lock family once, as a newcomer would meet
//! them: a lock per entity, a fair lock, a non-reentrant lock, a fenced lock, a spin lock, a
//! read-write lock, a semaphore, a permit-expirable semaphore, a count-down latch and a multi-lock.
//! Its data goes through the lock client itself (`Client::query` with the re-exported `redis`
//! crate): the service depends on `rlock-redisson` alone.
//!
//! ```sh
//! cargo run -p rlock-examples --example every_kind
//! ```

use std::time::Duration;

use rlock_redisson::{Client, Error as LockError, MultiLock, Owner, redis};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let client = Client::connect(rlock_examples::redis_url()).await?;
    let prefix = format!("example:kinds:{}", std::process::id());
    let name = |kind: &str| format!("{prefix}:{kind}");

    // A lock per entity, its data read and written under it.
    let balance = name("account:7:balance");
    let guard = client.lock(name("account:7")).lock().await?;
    let () = client
        .query(redis::cmd("INCRBY").arg(&balance).arg(100))
        .await?;
    guard.unlock().await?;

    // A fair lock: waiters take it in the order they asked, Java's included.
    let fair = client.fair_lock(name("fair"));
    let guard = fair.lock().await?;
    assert!(fair.queue().await?.is_empty());
    guard.unlock().await?;

    // A non-reentrant lock: a nested acquisition by the same owner is an error, not a second hold.
    let single = client.non_reentrant_lock(name("single"));
    Owner::scope(Owner::new(), async {
        let guard = single.lock().await?;
        let again = single.try_lock().await;
        assert!(matches!(again, Err(LockError::ReentryRefused { .. })));
        guard.unlock().await
    })
    .await?;

    // A fenced lock: each acquisition's token is greater than the last.
    let fenced = client.fenced_lock(name("fenced"));
    let first = *fenced.lock().await?.token();
    let second = fenced.lock().await?;
    assert!(*second.token() > first);
    second.unlock().await?;

    // A spin lock: waiters poll with back-off instead of subscribing.
    client
        .spin_lock(name("spin"))
        .lock()
        .await?
        .unlock()
        .await?;

    // A read-write lock: readers share, a writer excludes them.
    let rw = client.read_write_lock(name("rw"));
    let (reader, other_reader) = (rw.read().lock().await?, rw.read().lock().await?);
    assert!(rw.write().try_lock().await?.is_none());
    reader.unlock().await?;
    other_reader.unlock().await?;

    // A semaphore of two permits.
    let slots = client.semaphore(name("slots"));
    assert!(slots.try_set_permits(2).await?);
    let taken = slots.acquire(2).await?;
    assert!(slots.try_acquire(1).await?.is_none());
    taken.release().await?;

    // A permit-expirable semaphore: permits by id, each with its lease.
    let leases = client.permit_expirable_semaphore(name("leases"));
    assert!(leases.try_set_permits(1).await?);
    let id = leases.acquire_with_lease(Duration::from_secs(10)).await?;
    leases.release(id).await?;

    // A count-down latch opened by two count-downs.
    let ready = client.count_down_latch(name("ready"));
    assert!(ready.try_set_count(2).await?);
    ready.count_down().await?;
    ready.count_down().await?;
    assert!(ready.await_for(Duration::from_secs(1)).await?);

    // A multi-lock: several locks taken as one.
    let both = MultiLock::new([client.lock(name("a")), client.lock(name("b"))]);
    both.lock().await?.unlock().await?;

    let total: i64 = client.query(redis::cmd("GET").arg(&balance)).await?;
    let mut cleanup = redis::cmd("DEL");
    for kind in ["account:7:balance", "slots", "leases", "ready", "fenced"] {
        let _ = cleanup.arg(name(kind));
    }
    let _ = cleanup.arg(format!("redisson_lock_token:{{{}}}", name("fenced")));
    let () = client.query(&cleanup).await?;
    client.close().await;
    println!("every kind took and released its lock; the account holds {total}");
    if total != 100 {
        return Err(format!("the account holds {total}, not 100").into());
    }
    Ok(())
}
