//! The facade's private runtime, and how a blocking call runs on it.

use std::future::Future;

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
/// - a thread of a current-thread runtime blocks from a scoped helper thread, as tokio cannot say
///   whether it is the runtime's own thread (where `block_on` would panic) or one of its blocking
///   pool's. On the runtime's own thread that stalls the runtime's other tasks until the call
///   returns (the module docs say what that risks).
pub(super) fn block_on<T: Send>(
    runtime: &Runtime,
    work: impl Future<Output = Result<T>> + Send,
) -> Result<T> {
    let runtime = runtime.0.as_ref().ok_or(Error::Closed)?;
    match tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Err(_) => runtime.block_on(work),
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| runtime.block_on(work)),
        Ok(_) => std::thread::scope(|scope| {
            scope
                .spawn(|| runtime.block_on(work))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
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
