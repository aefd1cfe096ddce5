//! A pool of blocking worker threads that wait on a lock and wake the moment it is released
//! (Redisson's "wait-notify" use of `RLock`).
//!
//! A coordinator holds `example:pool:<pid>` while it prepares work; the workers, plain threads with
//! no async runtime of their own, block in `lock()` meanwhile. Nobody polls: when the holder
//! releases, the next waiter is woken at once (through the lock's pub/sub channel across processes
//! and Java services, or passed the lock directly within this process), each worker in turn.
//! The example prints how long each hand-over took after the release.
//!
//! ```sh
//! cargo run -p rlock-examples --example worker_pool
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rlock_redisson::blocking::Client;

type Error = Box<dyn std::error::Error + Send + Sync>;

const WORKERS: usize = 4;

fn main() -> Result<(), Error> {
    let client = Client::connect(rlock_examples::redis_url())?;
    let lock = client.lock(format!("example:pool:{}", std::process::id()));
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
            thread::spawn(move || -> Result<Duration, Error> {
                let guard = lock.lock()?; // blocks until it is this worker's turn
                let woke_after = released_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .elapsed();
                println!("worker {worker} woke {woke_after:?} after the release");
                thread::sleep(Duration::from_millis(20)); // the job
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
    println!("{WORKERS} workers each took the lock once; slowest wake-up {slowest:?}");
    // Waking by polling the lock's TTL would take up to the 30 s lease; a notified waiter is
    // woken in milliseconds.
    if slowest > Duration::from_secs(1) {
        return Err(format!("a worker woke {slowest:?} after the release: not notified").into());
    }
    Ok(())
}
