//! The facade's private runtime, and how a blocking call runs on it.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use tokio::runtime::RuntimeFlavor;

use crate::error::{Error, Result};

/// The facade's private runtime. It shuts down in the background when its last user lets go, so that
/// dropping it never blocks (or panics), wherever that happens.
#[derive(Debug)]
pub(super) struct Runtime(pub(super) Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `work` on the facade's runtime, blocking the calling thread until it completes, from
/// wherever it is called, without a panic:
/// - a plain thread blocks on the runtime directly;
/// - a thread of a multi-threaded tokio runtime (`spawn_blocking`'s, or a worker) goes through
///   [`tokio::task::block_in_place`], which first moves a worker's other tasks to other workers;
/// - a `spawn_blocking` thread of a current-thread runtime blocks from a scoped helper thread
///   (`block_on` there would panic, as on any thread that entered a runtime);
/// - the current-thread runtime's own thread (its `block_on`, its tasks) is refused with
///   [`Error::BlockingInAsyncContext`]: blocking it would stop every task of that runtime, one of
///   which may hold what the call waits for.
pub(super) fn block_on<T: Send>(
    runtime: &Runtime,
    work: impl Future<Output = Result<T>> + Send,
) -> Result<T> {
    let runtime = runtime.0.as_ref().ok_or(Error::Closed)?;
    match tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Err(_) => runtime.block_on(work),
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| runtime.block_on(work)),
        Ok(_) if polled_by_a_scheduler() => Err(Error::BlockingInAsyncContext),
        Ok(_) => std::thread::scope(|scope| {
            scope
                .spawn(|| runtime.block_on(work))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

/// Whether the calling code runs under a tokio poll with a budget (a task, or a `block_on`) rather
/// than on a blocking-pool or plain thread that entered a runtime. tokio polls every task and
/// `block_on` with a constrained cooperative budget and runs `spawn_blocking` closures (and plain
/// threads) unconstrained; the budget is the one thing it lets a caller see that tells the two
/// apart. Found by spending budget until tokio refuses (a budget holds at most 255 units, 128 when
/// a poll starts), then putting back what the first unit found: the caller's budget as it was.
///
/// Two cases are judged by that budget, not by the thread: code a task runs inside
/// [`tokio::task::coop::unconstrained`] carries none and is not refused (it stalls its runtime
/// while it blocks), and `Handle::block_on` called on a `spawn_blocking` or plain thread polls
/// with one and is refused, though blocking there would stall no runtime.
fn polled_by_a_scheduler() -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(first) = tokio::task::coop::poll_proceed(&mut cx) else {
        return true;
    };
    let refused = (0..u8::MAX).any(|_| match tokio::task::coop::poll_proceed(&mut cx) {
        Poll::Ready(unit) => {
            // Spent for good: only `first`, dropped below, restores the budget.
            unit.made_progress();
            false
        }
        Poll::Pending => true,
    });
    // Dropped without `made_progress`, `first` restores the budget it found.
    drop(first);
    refused
}

/// Releases what a dropped blocking guard held: before returning, when dropped outside an async
/// runtime (as a `std::sync::MutexGuard` would); in the background, by dropping `held` (whose own
/// drop releases), when dropped inside one, where `Drop` must not block.
pub(super) fn release_dropped<G, F>(runtime: &Runtime, held: G, release: impl FnOnce(G) -> F)
where
    F: Future<Output = Result<()>> + Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        drop(held);
    } else if let Err(e) = block_on(runtime, release(held)) {
        tracing::warn!(error = %e, "releasing a dropped blocking guard failed");
    }
}
