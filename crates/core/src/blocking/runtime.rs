//! The facade's private runtime, and how a blocking call runs on it.

use std::future::Future;

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

/// Refuses to run inside an async runtime, where blocking would stall (or deadlock) it.
pub(super) fn outside_async(what: &str) -> Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::InvalidArgument(format!(
            "the blocking {what} cannot be used inside an async runtime; use the async API"
        )));
    }
    Ok(())
}

pub(super) fn block_on<T>(runtime: &Runtime, work: impl Future<Output = Result<T>>) -> Result<T> {
    outside_async("API")?;
    runtime.0.as_ref().ok_or(Error::Closed)?.block_on(work)
}

/// Releases what a dropped blocking guard held: before returning, when dropped outside an async
/// runtime (as a `std::sync::MutexGuard` would); in the background, by dropping the async guard,
/// when dropped inside one.
pub(super) fn release_dropped<G, F>(runtime: &Runtime, held: G, release: impl FnOnce(G) -> F)
where
    F: Future<Output = Result<()>>,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        drop(held);
    } else if let Err(e) = block_on(runtime, release(held)) {
        tracing::warn!(error = %e, "releasing a dropped blocking guard failed");
    }
}
