//! What this client knows of its own holds.

use super::kind::Kind;
use crate::error::{Error, Operation, Result, Subject};
use crate::pubsub::Listening;
use crate::services::Services;

/// How many holds `field` has of `key` while a streak of free hand-offs lends its hold (see
/// [`crate::cohort`]): the lent holder's count is this client's, anyone else holds nothing (the
/// root's field in Redis is not the root's own any more). `None` when no hold of `key` is lent:
/// Redis knows.
pub(crate) fn held_in_streak(services: &Services, key: &str, field: &str) -> Option<u32> {
    let streak = services.cohorts.streak_on(key)?;
    Some(if streak.holder == field {
        services.holds.count(key, field)
    } else {
        0
    })
}

/// How many holds `field` has in the lock hash `key` (`HGET`, unless [`held_in_streak`] knows);
/// 0 when none.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub(crate) async fn hold_count(
    services: &Services,
    subject: Subject<'_>,
    key: &str,
    field: &str,
) -> Result<u32> {
    match held_in_streak(services, key, field) {
        Some(count) => Ok(count),
        None => count_in_redis(services, subject, key, field).await,
    }
}

/// How many holds Redis counts under `field` in the lock hash `key` (`HGET`); 0 when none.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub(crate) async fn count_in_redis(
    services: &Services,
    subject: Subject<'_>,
    key: &str,
    field: &str,
) -> Result<u32> {
    let count: Option<String> = services
        .commands
        .query(
            Operation::Query,
            subject,
            redis::cmd("HGET").arg(key).arg(field),
        )
        .await?;
    match count {
        None => Ok(0),
        Some(count) => count
            .parse()
            .map_err(|_| Error::unexpected(Operation::Query, subject, count)),
    }
}

/// Listening on the lock's channel, for a kind that hands off locally, from before a write that may
/// give Redis a hold: what lets that hold pass freely later (see [`crate::cohort`]). `None` for
/// other kinds, and while nobody of this client listens on the channel (joining it then would take
/// a round trip, and the hold passes by script instead).
pub(crate) fn listening<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    field: &str,
) -> Option<Listening> {
    if kind.hand_off().is_none() || !services.config.local_handoff {
        return None;
    }
    let (channel, _) = kind.channel(field)?;
    services.subscriber.registry().listen(&channel)
}
