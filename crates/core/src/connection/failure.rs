//! What the error of a failed command says: whether the command may still have run, whether its
//! connection is done for, and whether the server refuses the command for good. The commands' pool,
//! the engine's reconciliation, the subscriber and the probe all sort errors by these.

use redis::RedisError;

/// Whether `e` says the connection broke.
fn is_broken(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// Whether a command that failed with `e` may still have run: the connection broke or the reply
/// timed out. Any other error is Redis refusing the command, which then changed nothing.
pub(crate) fn outcome_unknown(e: &RedisError) -> bool {
    is_broken(e) || e.is_timeout()
}

/// Whether `e` is the server refusing a command for good: an ACL denies it (`NOPERM`) or the server
/// does not know it (a proxy or a service that does not offer it).
pub(crate) fn refused(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}

/// Whether `e` means this connection should not be used again: it broke, or it talks to a master
/// that became a replica (a failover happened; new connections find the new master).
pub(super) fn retires_connection(e: &RedisError) -> bool {
    is_broken(e) || e.code() == Some("READONLY")
}
