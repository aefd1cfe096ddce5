//! What this client knows of its own holds.

use super::lock_wire::LockWire;
use crate::error::{Error, Operation, Result, Subject};
use crate::ledger::Books;
use crate::services::Services;
use crate::watchdog::Renewed;

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

/// What the ledger needs of `kind` to keep its records (see [`crate::ledger::Books`]).
pub(super) fn books<'a, K: LockWire + ?Sized>(services: &'a Services, kind: &'a K) -> Books<'a> {
    Books {
        watchdog: &services.watchdog,
        renewal: kind.renewal(),
        kind: kind.label(),
        held: Renewed {
            key: kind.key(),
            scope: kind.scope(),
            part: kind.renewal_part(),
        },
    }
}
