//! A pool of blocking worker threads that wait on a lock and wake the moment it is released
//! (Redisson's "wait-notify" use of `RLock`).
//!
//! A coordinator holds `example:pool:<pid>` while it prepares work; the workers, plain threads with
//! no async runtime of their own, block in `lock()` meanwhile. Nobody polls: when the holder
//! releases, the next waiter is woken at once (through the lock's pub/sub channel across processes
//! and Java services, or passed the lock directly within this process), each worker in turn.
//! Each job reads and writes the data the lock protects (a count of jobs done) through the lock's
//! own client (`Client::query`): no second Redis client, no `redis` dependency of its own. The
//! example prints how long each hand-over took after the release.
//!
//! ```sh
//! cargo run -p rlock-examples --example worker_pool
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rlock_redisson::blocking::Client;
use rlock_redisson::redis;

type Error = Box<dyn std::error::Error + Send + Sync>;

const WORKERS: usize = 4;

fn main() -> Result<(), Error> {
    let client = Client::connect(rlock_examples::redis_url())?;
    let name = format!("example:pool:{}", std::process::id());
    let lock = client.lock(&name);
    let jobs_done = format!("{name}:jobs");
    // When the last holder released the lock: each worker measures its wake-up from there.
    let released_at = Arc::new(Mutex::new(Instant::now()));
    let mark_released =
        |at: &Mutex<Instant>| *at.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();

    // The owner of a blocking lock is the calling thread, as in Java: the coordinator (this
    // thread) and every worker exclude each other.
    let preparing = lock.lock()?;
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (lock, released_at) = (lock.clone(), Arc::clone(&released_at));
            let (client, jobs_done) = (client.clone(), jobs_done.clone());
            thread::spawn(move || -> Result<Duration, Error> {
                let guard = lock.lock()?; // blocks until it is this worker's turn
                let woke_after = released_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .elapsed();
                println!("worker {worker} woke {woke_after:?} after the release");
                // The job: a read-modify-write that only the lock keeps exact.
                let done: Option<u32> = client.query(redis::cmd("GET").arg(&jobs_done))?;
                thread::sleep(Duration::from_millis(20));
                let () =
                    client.query(redis::cmd("SET").arg(&jobs_done).arg(done.unwrap_or(0) + 1))?;
                mark_released(&released_at);
                guard.unlock()?;
                Ok(woke_after)
            })
        })
        .collect();

    thread::sleep(Duration::from_millis(300)); // preparing the work; the workers are all waiting
    mark_released(&released_at);
    preparing.unlock()?;

    let mut slowest = Duration::ZERO;
    for worker in workers {
        let woke_after = worker.join().map_err(|_| "a worker panicked")??;
        slowest = slowest.max(woke_after);
    }
    let done: u32 = client.query(redis::cmd("GET").arg(&jobs_done))?;
    let () = client.query(redis::cmd("DEL").arg(&jobs_done))?;
    client.close()?;
    println!(
        "{WORKERS} workers each took the lock once ({done} jobs counted); slowest wake-up {slowest:?}"
    );
    if done as usize != WORKERS {
        return Err(
            format!("{done} jobs counted for {WORKERS} workers: the lock did not exclude").into(),
        );
    }
    // Waking by polling the lock's TTL would take up to the 30 s lease; a notified waiter is
    // woken in milliseconds.
    if slowest > Duration::from_secs(1) {
        return Err(format!("a worker woke {slowest:?} after the release: not notified").into());
    }
    Ok(())
}
