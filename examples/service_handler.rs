//! An async service handler guarding a shared resource.
//!
//! A ticket service sells the seats of one show. Every request reads the seats left, decides, and
//! writes the new count: a read-modify-write that two concurrent requests would break (both read
//! 1 seat, both sell it). The lock `example:show:<id>` makes that sequence exclusive across every
//! task, process and Java service that uses the same name (Redisson: `getLock("example:show:<id>")`).
//!
//! A request waits a bounded time for the lock and answers "busy" when it cannot get it, instead of
//! queueing without limit behind a slow holder (a web handler would return 503 and let the client
//! retry). The guard is released on every path, errors included, because dropping it unlocks. The
//! seats are read and written through the lock's own client (`Client::query`, with the `redis`
//! crate rlock re-exports): no second client, no `redis` dependency of the service's own.
//!
//! ```sh
//! cargo run -p rlock-examples --example service_handler
//! ```

use std::time::Duration;

use rlock_redisson::{Client, redis};

type Error = Box<dyn std::error::Error + Send + Sync>;

const SEATS: u32 = 50;
const REQUESTS: u32 = 200;

/// What one request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reservation {
    Confirmed,
    SoldOut,
    /// The lock was not free within the request's wait budget.
    Busy,
}

/// The handler: reserve one seat of `show`.
async fn reserve(client: &Client, show: &str) -> Result<Reservation, Error> {
    let lock = client.lock(format!("example:show:{show}"));
    // Wait at most 5 s; a holder that died is cleared by its lease (30 s watchdog lease by default).
    let Some(guard) = lock.try_lock_for(Duration::from_secs(5)).await? else {
        return Ok(Reservation::Busy);
    };
    let seats_key = format!("example:show:{show}:seats");
    let left: u32 = client.query(redis::cmd("GET").arg(&seats_key)).await?;
    if left == 0 {
        guard.unlock().await?;
        return Ok(Reservation::SoldOut);
    }
    // Stands for real work between the read and the write (pricing, payment...).
    tokio::time::sleep(Duration::from_micros(200)).await;
    let () = client
        .query(redis::cmd("SET").arg(&seats_key).arg(left - 1))
        .await?;
    // Unlock explicitly to learn whether it worked; a dropped guard unlocks in the background.
    guard.unlock().await?;
    Ok(Reservation::Confirmed)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = rlock_examples::redis_url();
    let client = Client::connect(&url).await?;
    let show = format!("{}", std::process::id());
    let seats_key = format!("example:show:{show}:seats");
    let () = client
        .query(redis::cmd("SET").arg(&seats_key).arg(SEATS))
        .await?;

    let requests = (0..REQUESTS).map(|_| {
        let (client, show) = (client.clone(), show.clone());
        tokio::spawn(async move { reserve(&client, &show).await })
    });
    let mut outcomes = Vec::new();
    for request in requests.collect::<Vec<_>>() {
        outcomes.push(request.await??);
    }
    let count = |wanted| outcomes.iter().filter(|&&o| o == wanted).count();
    let (confirmed, sold_out, busy) = (
        count(Reservation::Confirmed),
        count(Reservation::SoldOut),
        count(Reservation::Busy),
    );
    let left: u32 = client.query(redis::cmd("GET").arg(&seats_key)).await?;
    println!(
        "{REQUESTS} requests for {SEATS} seats: {confirmed} confirmed, {sold_out} sold out, {busy} busy; {left} left"
    );
    let () = client.query(redis::cmd("DEL").arg(&seats_key)).await?;
    client.close().await;

    // Without the lock, concurrent requests would confirm more seats than exist.
    if confirmed + left as usize != SEATS as usize
        || confirmed + sold_out + busy != REQUESTS as usize
    {
        return Err("the seat count does not add up: the lock did not exclude".into());
    }
    Ok(())
}
