//! Release: the kind's unlock script, idempotent under an unlock latch, re-sent on lost replies.

use redis::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::kind::Kind;
use crate::connection::Written;
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::services::{Background, Services};

/// What an unlock did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The last hold was released and waiters were woken.
    Fully,
    /// The owner still holds the lock re-entrantly.
    Partially,
}

/// Releases one hold of `kind` by `field`. If holds remain, their lease is re-applied: the watchdog
/// timeout while some are renewed here, else the lease of the owner's latest hold (PROTOCOL.md
/// §11.10).
///
/// Renewal stops first. The unlock is re-sent after a timeout or a broken connection with the same
/// request id, so a re-send of an unlock that had run replays its result instead of releasing twice.
///
/// # Cancel safety
///
/// Not cancel safe: run it through [`Releasing`], which finishes it in the background if dropped.
pub(crate) async fn release<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    field: &str,
) -> Result<Released> {
    let (key, renewal) = (kind.key(), kind.renewal());
    services.watchdog.deregister(renewal, key, field);
    let lease = match services.holds.remove(key, field) {
        Some(lease) if !services.watchdog.is_renewing(renewal, key) => lease,
        _ => services.watchdog.timeout(),
    };
    let latch = names::unlock_latch(key, &names::new_request_id());
    let call = kind.unlock_call(field, lease, &latch, services.config.unlock_latch_ttl());
    let name = kind.name();
    let mut retry = 0;
    loop {
        let failure = match services.commands.get(Operation::Unlock, name).await {
            Ok(mut conn) => match services.commands.write(&mut conn.conn, &call).await {
                Written::Ran(reply) => {
                    let released = match reply {
                        Value::Int(1) => Ok(Released::Fully),
                        Value::Int(0) => Ok(Released::Partially),
                        Value::Nil => {
                            return Err(Error::NotOwner {
                                name: name.to_owned(),
                                field: field.to_owned(),
                            });
                        }
                        other => Err(Error::unexpected(Operation::Unlock, name, other)),
                    };
                    services.forget_latch(latch);
                    return released;
                }
                // Applied on the master only: re-sending replays the latch and waits again.
                Written::Unsynced { replicas, .. } => Error::NoSyncedReplicas {
                    operation: Operation::Unlock,
                    name: name.to_owned(),
                    replicas,
                },
                Written::Refused(e) => return Err(Error::from_redis(Operation::Unlock, key, e)),
                Written::Unknown(unknown) => unknown.into_error(Operation::Unlock, name),
            },
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        if retry >= services.config.retry_attempts {
            return Err(failure);
        }
        tracing::debug!(lock = name, error = %failure, retry, "re-sending unlock with the same request id");
        tokio::time::sleep(services.config.retry_backoff(retry)).await;
        retry += 1;
    }
}

/// Deletes the lock `kind` whoever holds it (the kind's force-unlock script, which also wakes a
/// waiter). Returns whether a lock was deleted. This client's guards of the lock see their lease lost.
///
/// # Cancel safety
///
/// Not cancel safe: if dropped, the lock may or may not have been deleted.
pub(crate) async fn force_unlock<K: Kind + ?Sized>(services: &Services, kind: &K) -> Result<bool> {
    let name = kind.name();
    services.watchdog.forget(kind.key());
    let call = kind.force_unlock_call();
    let mut conn = services.commands.get(Operation::ForceUnlock, name).await?;
    match services.commands.write(&mut conn.conn, &call).await {
        Written::Ran(Value::Int(deleted)) => Ok(deleted == 1),
        Written::Ran(other) => Err(Error::unexpected(Operation::ForceUnlock, name, other)),
        Written::Unsynced { replicas, .. } => Err(Error::NoSyncedReplicas {
            operation: Operation::ForceUnlock,
            name: name.to_owned(),
            replicas,
        }),
        Written::Refused(e) => Err(Error::from_redis(Operation::ForceUnlock, kind.key(), e)),
        Written::Unknown(unknown) => Err(unknown.into_error(Operation::ForceUnlock, name)),
    }
}

/// A release in progress: awaited, it runs on the caller's task; dropped before it completed (or
/// never awaited), it finishes in the background. Either way it is the same release, with the same
/// request id, so it applies once.
pub(crate) struct Releasing {
    pending: Option<Pin<Box<dyn Future<Output = Result<Released>> + Send>>>,
    background: Background,
    name: String,
}

impl Releasing {
    /// A release of one hold of `field` on `kind`.
    pub(crate) fn new<K: Kind + ?Sized>(
        services: &Arc<Services>,
        kind: Arc<K>,
        field: String,
    ) -> Self {
        let name = kind.name().to_owned();
        let services_for_release = services.clone();
        Self {
            pending: Some(Box::pin(async move {
                release(&services_for_release, &*kind, &field).await
            })),
            background: services.background.clone(),
            name,
        }
    }

    /// Runs the release to its end on the caller's task.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if dropped, the release finishes in the background.
    pub(crate) async fn finish(mut self) -> Result<Released> {
        let outcome = match self.pending.as_mut() {
            Some(pending) => pending.await,
            None => Err(Error::Closed),
        };
        self.pending = None;
        outcome
    }
}

impl Drop for Releasing {
    fn drop(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        let name = std::mem::take(&mut self.name);
        drop(self.background.spawn(async move {
            match pending.await {
                Ok(_) => {}
                Err(Error::NotOwner { .. }) => {
                    tracing::debug!(lock = %name, "released after the lease was already lost");
                }
                Err(e) => tracing::warn!(lock = %name, error = %e, "a background release failed"),
            }
        }));
    }
}
