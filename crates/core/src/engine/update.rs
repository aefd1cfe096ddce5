//! Writes that set rather than count.

use super::detached::Replicas;
use crate::connection::Written;
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;
use crate::services::Services;

/// Runs a write that sets rather than counts (setting permits or a count, deleting, updating a
/// lease), waiting for replicas where `replicas` says so, and decodes its reply as a `T`. Such
/// writes are not reconciled: a lost reply is [`Error::Timeout`] or [`Error::Backend`], as
/// Redisson reports it.
pub(crate) async fn update<T: redis::FromRedisValue>(
    services: &Services,
    subject: Subject<'_>,
    call: ScriptCall,
    replicas: Replicas,
) -> Result<T> {
    let mut conn = services.commands.get(Operation::Update, subject).await?;
    let reply = match replicas.write(services, &mut conn, &call).await {
        Written::Ran(reply) => reply,
        Written::Unsynced { replicas, .. } => {
            return Err(Error::no_synced_replicas(
                Operation::Update,
                subject,
                replicas,
            ));
        }
        Written::Refused(e) => {
            return Err(Error::from_redis(Operation::Update, subject, e));
        }
        Written::Unknown(unknown) => {
            return Err(unknown.into_error(Operation::Update, subject));
        }
        Written::Unsent(after) => return Err(Error::timeout(Operation::Update, subject, after)),
    };
    redis::from_redis_value(reply.clone())
        .map_err(|_| Error::unexpected(Operation::Update, subject, reply))
}
