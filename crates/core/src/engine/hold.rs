//! What this client knows of its own holds.

use crate::error::{Error, Operation, Result, Subject};
use crate::services::Services;

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
