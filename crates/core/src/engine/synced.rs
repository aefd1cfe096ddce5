//! Writes that no replica acknowledged: compensated, then tried again (docs/protocol.md §5.3).

use std::future::Future;

use crate::error::{Error, Operation, Result, Subject};
use crate::services::Services;

/// What one write did, as far as replicas go.
pub(crate) enum Synced<T> {
    /// Done, and acknowledged by a replica where the topology has any.
    Done(T),
    /// Applied on the master, but none of its `replicas` acknowledged it: the write has already
    /// arranged its compensation (an acquire's undo, a permit given back).
    Unsynced {
        /// How many replicas were connected.
        replicas: u32,
    },
}

impl<T> Synced<T> {
    /// What `f` makes of a done write's outcome.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Synced<U> {
        match self {
            Self::Done(done) => Synced::Done(f(done)),
            Self::Unsynced { replicas } => Synced::Unsynced { replicas },
        }
    }
}

/// Runs `write` until a replica acknowledges it, as Redisson retries a compensated acquire: up to
/// `retry_attempts` more times after the configured back-off, then [`Error::NoSyncedReplicas`].
///
/// # Cancel safety
///
/// As cancel safe as `write`: each try is `write`'s own.
pub(crate) async fn until_synced<T, F, Fut>(
    services: &Services,
    operation: Operation,
    subject: Subject<'_>,
    mut write: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Synced<T>>>,
{
    let mut retry = 0;
    loop {
        match write().await? {
            Synced::Done(done) => return Ok(done),
            Synced::Unsynced { replicas } if retry >= services.config.retry_attempts => {
                return Err(Error::no_synced_replicas(operation, subject, replicas));
            }
            Synced::Unsynced { replicas } => {
                tracing::warn!(
                    lock = subject.name,
                    %operation,
                    replicas,
                    retry,
                    "no replica acknowledged the write; compensated, retrying"
                );
                tokio::time::sleep(services.config.retry_backoff(retry)).await;
                retry += 1;
            }
        }
    }
}
