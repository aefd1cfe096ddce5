//! Writes that nothing can reconcile: a counter semaphore's acquire or release, a latch's
//! count-down.
//!
//! They carry no owner or id to check afterwards and are not idempotent, so they are never re-sent.
//! What rlock can do instead is never throw their reply away: the write runs in a background task
//! and the caller awaits its outcome. A caller that goes away (its future dropped) leaves the reply to
//! an `orphaned` handler, which gives back what the write turned out to take. A reply that never
//! arrives (a timeout, a broken connection) is [`Error::OutcomeUnknown`].

use std::future::Future;
use std::sync::Arc;

use redis::Value;
use tokio::sync::oneshot;

use crate::connection::{Connection, Queueing, Written};
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;
use crate::services::Services;
use crate::telemetry::{self, Reconciles};

/// The reply of a write that ran.
#[derive(Debug)]
pub(crate) struct Applied {
    /// The script's reply.
    pub(crate) reply: Value,
    /// `Some(n)` when none of the master's `n` connected replicas acknowledged the write.
    pub(crate) unsynced: Option<u32>,
}

/// Whether a write waits for replicas (`WAIT`) where the topology has them: Redisson's semaphore
/// writes do, its latch's writes do not (docs/protocol.md §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replicas {
    /// Pipeline `WAIT` after the script.
    Wait,
    /// Send the script alone.
    Skip,
}

impl Replicas {
    /// Runs `call` on `conn`, waiting for replicas or not.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the script may or may not have run.
    pub(crate) async fn write(
        self,
        services: &Services,
        conn: &mut Connection,
        call: &ScriptCall,
    ) -> Written {
        match self {
            Self::Wait => services.commands.write(conn, call).await,
            Self::Skip => services.commands.write_unsynced(conn, call).await,
        }
    }
}

/// Runs `call` once, in the background, and returns its reply. If the caller drops this future
/// before the reply arrives, `orphaned` gets the reply instead (on the background task).
///
/// # Errors
///
/// [`Error::OutcomeUnknown`] when the reply was lost (the write may have run); the errors of
/// checking out a connection (nothing was sent); what Redis refused (it changed nothing).
///
/// # Cancel safety
///
/// Cancel safe: the write completes in the background, and its reply goes to `orphaned`.
pub(crate) async fn write_detached<F, Fut>(
    services: &Arc<Services>,
    operation: Operation,
    subject: Subject<'_>,
    call: ScriptCall,
    replicas: Replicas,
    queueing: Queueing,
    orphaned: F,
) -> Result<Applied>
where
    F: FnOnce(Arc<Services>, Applied) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (reply_to, reply) = oneshot::channel();
    let task_services = services.clone();
    let (kind, task_name) = (subject.kind, subject.name.to_owned());
    drop(services.background.spawn(async move {
        let subject = Subject::new(kind, &task_name);
        let outcome = write(
            &task_services,
            operation,
            subject,
            &call,
            replicas,
            queueing,
        )
        .await;
        if let Err(outcome) = reply_to.send(outcome) {
            let orphan = Reconciles::Orphaned(operation);
            match outcome {
                Ok(applied) => {
                    telemetry::reconciled(orphan, &task_name, true);
                    orphaned(task_services, applied).await;
                }
                Err(Error::OutcomeUnknown { .. }) => {
                    telemetry::reconciled(orphan, &task_name, false);
                }
                Err(e) => tracing::debug!(
                    lock = %task_name,
                    %operation,
                    error = %e,
                    "the caller of a write went away; the write failed and changed nothing"
                ),
            }
        }
    }));
    reply.await.unwrap_or(Err(Error::Closed))
}

async fn write(
    services: &Services,
    operation: Operation,
    subject: Subject<'_>,
    call: &ScriptCall,
    replicas: Replicas,
    queueing: Queueing,
) -> Result<Applied> {
    let mut conn = services
        .commands
        .get(operation, subject)
        .await?
        .queueing(queueing);
    match replicas.write(services, &mut conn, call).await {
        Written::Ran(reply) => Ok(Applied {
            reply,
            unsynced: None,
        }),
        Written::Unsynced { reply, replicas } => Ok(Applied {
            reply,
            unsynced: Some(replicas),
        }),
        Written::Refused(e) => Err(Error::from_redis(operation, subject, e)),
        Written::Unknown(unknown) => Err(Error::OutcomeUnknown {
            operation,
            kind: subject.kind,
            name: subject.name.to_owned(),
            cause: Box::new(unknown.into_error(operation, subject)),
        }),
        Written::Unsent(after) => Err(Error::timeout(operation, subject, after)),
    }
}
