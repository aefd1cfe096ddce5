//! The one error type of rlock.
//!
//! Every fallible call returns [`Error`]. The variants say what went wrong in terms a lock user acts on
//! (not the owner, timed out, lease lost, bad input) and keep the underlying cause where there is one.
//! An error about an object names it and says what it is, in its message and in its fields (`kind`,
//! and `name` or `key`): `acquire of fair lock "orders" timed out after 5s`. [`Error::is_transient`] says
//! which errors a retry loop may try again.

use std::fmt;
use std::time::Duration;

/// A specialised `Result` for rlock operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The operation an error happened in, so a log line or a retry decision can tell phases apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// Opening or checking out a connection.
    Connect,
    /// An acquire attempt (the acquire script).
    Acquire,
    /// Subscribing to a lock's unlock channel.
    Subscribe,
    /// Releasing one hold (the unlock script).
    Unlock,
    /// Deleting a lock regardless of its owner.
    ForceUnlock,
    /// A watchdog renewal.
    Renew,
    /// A read such as `is_locked`, `hold_count` or `remaining_ttl`.
    Query,
    /// Giving permits back to a semaphore.
    Release,
    /// Counting a count-down latch down.
    CountDown,
    /// Another write: setting or adding permits, setting a count, updating a lease, deleting.
    Update,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Acquire => "acquire",
            Self::Subscribe => "subscribe",
            Self::Unlock => "unlock",
            Self::ForceUnlock => "force unlock",
            Self::Renew => "renew",
            Self::Query => "query",
            Self::Release => "release",
            Self::CountDown => "count down",
            Self::Update => "update",
        })
    }
}

/// Everything that can go wrong in rlock.
///
/// No variant leaves a hold behind: an operation that fails after its script may have run has already
/// reconciled (or scheduled the reconciliation of) what it did in Redis.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller does not hold the lock it tried to release: Java's `IllegalMonitorStateException`.
    /// Nothing was changed in Redis.
    #[error("{kind} {name:?} is not held by owner {field}")]
    #[non_exhaustive]
    NotOwner {
        /// What the lock is, in words (`lock`, `fair lock`, `write lock`, ...).
        kind: &'static str,
        /// The lock name.
        name: String,
        /// The hash field of the owner that tried to unlock (`<node-uuid>:<owner-id>`).
        field: String,
    },
    /// The operation did not complete within its deadline. For acquire, whatever the script may have
    /// done is undone in the background, on the same connection, before the connection is reused.
    ///
    /// A command's deadline (the command timeout) starts once it holds one of its connection's
    /// in-flight slots (50 per pooled connection), so that it measures Redis and the network (and,
    /// where lock writes wait for replicas, the `WAIT`s sent before it on its connection, which
    /// Redis answers in turn), not this client's own queue of requests; a request waits for its
    /// slot in turn, first come first served. That wait is bounded by the command timeout too
    /// (and a request that timed out there was never sent), except for the attempts of an acquisition
    /// that waits without a limit (a lock's `lock()`, a semaphore's `acquire`, a latch's
    /// `await_zero`): those wait for their slot as long as it takes, and so time out only when
    /// Redis is late to answer a request that was sent. They may hold at most 40 of a
    /// connection's slots at once, so that the requests that free or keep what they wait for
    /// (unlocks, releases, renewals) and bounded requests get through behind any burst of them.
    #[error("{} timed out after {after:?}", about(*operation, kind, name))]
    #[non_exhaustive]
    Timeout {
        /// What timed out.
        operation: Operation,
        /// What the object is, in words (`lock`, `semaphore`, ...; empty for client-wide
        /// operations).
        kind: &'static str,
        /// The object's name (empty for client-wide operations).
        name: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// A guard's lock disappeared or passed to someone else while it was held (expired, deleted or
    /// force-unlocked). The critical section it protected may have overlapped another holder's.
    #[error("the lease of {kind} {name:?} was lost before it was released")]
    #[non_exhaustive]
    LeaseLost {
        /// What the lock is, in words (`lock`, `fair lock`, `write lock`, ...).
        kind: &'static str,
        /// The lock name.
        name: String,
    },
    /// A codec that cannot encode a key the way Java does, so that the name Redisson gives the
    /// key's lock cannot be reproduced: a key of a type rlock does not encode under a codec it does
    /// not reproduce ([`Codec::Other`](crate::Codec::Other)). Nothing was sent to Redis; give the
    /// key as the bytes the codec writes ([`EntryKey::Encoded`](crate::EntryKey::Encoded)).
    #[error("codec {codec}: {reason}")]
    #[non_exhaustive]
    Codec {
        /// The codec's Java class.
        codec: String,
        /// Why, and what to do.
        reason: String,
    },
    /// A bad argument: an empty name, a zero or out-of-range duration, an invalid configuration.
    /// Nothing was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The key holds a value of another type than the object keeps there (a string where a lock keeps
    /// a hash, say). Nothing was changed in Redis.
    #[error("key {key:?} holds a value of another type {}", than(kind))]
    #[non_exhaustive]
    WrongType {
        /// What the object is, in words (`lock`, `semaphore`, ...).
        kind: &'static str,
        /// The key that holds the other type: the object's name, or another of its keys (a fair
        /// lock's queue, a fenced lock's token counter).
        key: String,
    },
    /// Redis replied with something the protocol does not allow here.
    #[error("unexpected reply to {}: {reply}", about(*operation, kind, name))]
    #[non_exhaustive]
    UnexpectedReply {
        /// The operation that got the reply.
        operation: Operation,
        /// What the object is, in words (empty for client-wide operations).
        kind: &'static str,
        /// The object's name (empty for client-wide operations).
        name: String,
        /// The reply, rendered for humans.
        reply: String,
    },
    /// Redis (or the connection to it) failed; the cause is kept.
    #[error("redis error during {}: {source}", about(*operation, kind, name))]
    #[non_exhaustive]
    Backend {
        /// The operation that failed.
        operation: Operation,
        /// What the object is, in words (empty for client-wide operations such as connecting).
        kind: &'static str,
        /// The object's name (empty for client-wide operations).
        name: String,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },
    /// No replica acknowledged a lock write although some are connected (Redisson's
    /// `NoSyncedSlavesException`), even after retrying. An acquire was undone before this error; an
    /// unlock was applied on the master but may be lost if it fails over now.
    #[error("{}: none of {replicas} replicas acknowledged the write", about(*operation, kind, name))]
    #[non_exhaustive]
    NoSyncedReplicas {
        /// What was being written.
        operation: Operation,
        /// What the object is, in words.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// How many replicas were connected to the master.
        replicas: u32,
    },
    /// The owner holds the read lock of this read-write lock and asked for its write lock. A reader
    /// cannot upgrade: Redisson would wait for itself forever, so rlock refuses at once. Release the
    /// read holds first. Nothing was sent to Redis.
    #[error(
        "owner holds the read lock of read-write lock {name:?}: taking its write lock would wait \
         forever"
    )]
    #[non_exhaustive]
    WouldDeadlock {
        /// The lock name.
        name: String,
    },
    /// The owner already holds this non-reentrant lock and asked for it again (Java's
    /// `IllegalMonitorStateException` from `RNonReentrantLock` and `RNonReentrantFairLock`), from
    /// any acquisition form, `try_lock` included. Nothing was changed in Redis: the hold stays one
    /// hold, and a fair lock's queue was not joined.
    #[error("owner already holds the {kind} {name:?}: a re-entry is refused")]
    #[non_exhaustive]
    ReentryRefused {
        /// What the lock is, in words: `non-reentrant lock` or `non-reentrant fair lock`.
        kind: &'static str,
        /// The lock name.
        name: String,
    },
    /// A write whose reply was lost and that nothing can reconcile: it may or may not have been
    /// applied. A counter semaphore's acquire or release and a latch's count-down carry no owner or
    /// id to check afterwards and are not idempotent, so rlock never re-sends them (Redisson would
    /// not either). For an acquire, the permits may be taken: check
    /// [`Semaphore::available_permits`](crate::Semaphore::available_permits) if it matters.
    #[error("{}: the reply was lost, it may or may not have been applied", about(*operation, kind, name))]
    #[non_exhaustive]
    OutcomeUnknown {
        /// The operation whose reply was lost.
        operation: Operation,
        /// What the object is, in words: `semaphore` or `count-down latch`.
        kind: &'static str,
        /// The semaphore's or latch's name.
        name: String,
        /// Why the reply was lost (a timeout or a broken connection).
        #[source]
        cause: Box<Error>,
    },
    /// A permit id that the permit-expirable semaphore does not hold: released already, expired and
    /// reclaimed, or never acquired (Java's `IllegalArgumentException`). Nothing was changed.
    #[error("permit-expirable semaphore {name:?} holds no permit {permit}")]
    #[non_exhaustive]
    PermitNotFound {
        /// The semaphore's name.
        name: String,
        /// The permit id, as 32 hex characters.
        permit: String,
    },
    /// The configuration needs a part of rlock-redisson that this build was compiled without: a
    /// topology or TLS whose crate feature is off (see the README's "Installation and features").
    /// [`Client::with_config`](crate::Client::with_config) returns it before connecting.
    #[error(
        "{needed_by} needs rlock-redisson's `{feature}` feature, which this build does not enable"
    )]
    #[non_exhaustive]
    FeatureDisabled {
        /// The crate feature to enable: `cluster`, `sentinel` or `tls`.
        feature: &'static str,
        /// What in the configuration needs it, e.g. `Topology::Cluster`.
        needed_by: &'static str,
    },
    /// The server refuses a command every lock operation of this configuration needs: an ACL denies
    /// it (`NOPERM`) or the service does not offer it (`unknown command`), e.g. `EVALSHA` on a server
    /// where scripts are disabled, or `WAIT` on a serverless service.
    /// [`Client::with_config`](crate::Client::with_config) returns it when it connects, before any
    /// lock is taken; the reason says what to change.
    #[error("the server refuses {command}: {reason}")]
    #[non_exhaustive]
    Unsupported {
        /// The command refused: `EVALSHA` or `WAIT`.
        command: &'static str,
        /// The server's reply, and what to do about it.
        reason: String,
    },
    /// A call of the [`blocking`](crate::blocking) API on the thread of a current-thread tokio
    /// runtime, in its `block_on` or one of its tasks: blocking that thread would stop every task of
    /// the runtime, one of which may hold what the call waits for. Await the async API there, or
    /// make the call inside `tokio::task::spawn_blocking`. Every blocking call may return it (the
    /// [`blocking`](crate::blocking) module says where exactly). Nothing was sent to Redis for the
    /// call, but a guard or permits it consumed (`unlock(self)`, `release(self)`) are released in
    /// the background, as when dropped.
    #[error(
        "a blocking rlock call on the thread of a current-thread tokio runtime would stop that \
         runtime's tasks: await the async API there, or call it inside tokio::task::spawn_blocking"
    )]
    BlockingInAsyncContext,
    /// The client was shut down (its runtime is gone).
    #[error("the rlock client is shut down")]
    Closed,
}

/// `acquire of fair lock "orders"` in a message (`connect for ...`: a connection is opened for
/// the object, not of it), or the bare operation for a client-wide one (no name).
fn about(operation: Operation, kind: &str, name: &str) -> String {
    let of = if operation == Operation::Connect {
        "for"
    } else {
        "of"
    };
    match (kind, name) {
        (_, "") => operation.to_string(),
        ("", name) => format!("{operation} {of} {name:?}"),
        (kind, name) => format!("{operation} {of} {kind} {name:?}"),
    }
}

/// `than a fair lock keeps there` in a message, or `than expected` when no object is known.
fn than(kind: &str) -> String {
    match kind.chars().next() {
        None => "than expected".to_owned(),
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("than an {kind} keeps there"),
        Some(_) => format!("than a {kind} keeps there"),
    }
}

/// What an error is about: the kind of object, in words, its name and the key a command acted on
/// (`fair lock`, `orders`, its queue's key); all empty for the client itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subject<'a> {
    pub(crate) kind: &'static str,
    pub(crate) name: &'a str,
    /// The key of a `WRONGTYPE` refusal: the name, unless [`Subject::at`] says another.
    key: &'a str,
}

impl<'a> Subject<'a> {
    /// The client itself: connecting, or a command sent through `query`.
    pub(crate) const CLIENT: Subject<'static> = Subject {
        kind: "",
        name: "",
        key: "",
    };

    pub(crate) fn new(kind: &'static str, name: &'a str) -> Self {
        Self {
            kind,
            name,
            key: name,
        }
    }

    /// An object whose kind is not known where the error is made (a reconciliation in the
    /// background, which only logs it).
    pub(crate) fn named(name: &'a str) -> Self {
        Self::new("", name)
    }

    /// The same object, acted on at another of its keys (a fair lock's queue, a fenced lock's
    /// token counter).
    pub(crate) fn at(self, key: &'a str) -> Self {
        Self { key, ..self }
    }
}

impl Error {
    /// Whether this is a [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// Whether the same call may succeed if tried again later, unchanged: a retry loop can trust it.
    ///
    /// | variant | transient |
    /// |---|---|
    /// | [`Timeout`](Self::Timeout) (a command's or a connect's deadline) | yes |
    /// | [`NoSyncedReplicas`](Self::NoSyncedReplicas) | yes: replicas catch up |
    /// | [`OutcomeUnknown`](Self::OutcomeUnknown) | no: the write may have been applied, and trying it again could apply it twice; check first (e.g. the semaphore's available permits) |
    /// | [`Backend`](Self::Backend), the connection refused, broken or timed out; the server loading, failing over or busy (`LOADING`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`, `READONLY`); a sentinel without a master yet | yes |
    /// | [`Backend`](Self::Backend), credentials refused (`WRONGPASS`) or missing (`NOAUTH`), a command denied (`NOPERM`), any other error reply | no: fix the configuration or the server |
    /// | [`NotOwner`](Self::NotOwner), [`LeaseLost`](Self::LeaseLost), [`ReentryRefused`](Self::ReentryRefused), [`WouldDeadlock`](Self::WouldDeadlock), [`PermitNotFound`](Self::PermitNotFound) | no: the caller's state, not Redis's |
    /// | [`InvalidArgument`](Self::InvalidArgument) (a bad URL, name or duration), [`WrongType`](Self::WrongType), [`UnexpectedReply`](Self::UnexpectedReply), [`FeatureDisabled`](Self::FeatureDisabled), [`Unsupported`](Self::Unsupported), [`BlockingInAsyncContext`](Self::BlockingInAsyncContext), [`Closed`](Self::Closed) | no |
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::NoSyncedReplicas { .. } => true,
            Self::Backend { source, .. } => transient(source),
            _ => false,
        }
    }

    /// Maps a Redis error of `operation` on `subject` to the typed error: `WRONGTYPE` on an object's
    /// key is [`Error::WrongType`] naming that key; any other, or one of a command the client sent
    /// for the caller (no object, no key known), is [`Error::Backend`] with Redis' message.
    pub(crate) fn from_redis(
        operation: Operation,
        subject: Subject<'_>,
        source: redis::RedisError,
    ) -> Self {
        if source.code() == Some("WRONGTYPE") && !subject.key.is_empty() {
            Self::WrongType {
                kind: subject.kind,
                key: subject.key.to_owned(),
            }
        } else {
            Self::backend(operation, subject, source)
        }
    }

    pub(crate) fn backend(
        operation: Operation,
        subject: Subject<'_>,
        source: redis::RedisError,
    ) -> Self {
        Self::Backend {
            operation,
            kind: subject.kind,
            name: subject.name.to_owned(),
            source,
        }
    }

    pub(crate) fn timeout(operation: Operation, subject: Subject<'_>, after: Duration) -> Self {
        Self::Timeout {
            operation,
            kind: subject.kind,
            name: subject.name.to_owned(),
            after,
        }
    }

    pub(crate) fn unexpected(
        operation: Operation,
        subject: Subject<'_>,
        reply: impl fmt::Debug,
    ) -> Self {
        Self::UnexpectedReply {
            operation,
            kind: subject.kind,
            name: subject.name.to_owned(),
            reply: format!("{reply:?}"),
        }
    }

    pub(crate) fn not_owner(subject: Subject<'_>, field: &str) -> Self {
        Self::NotOwner {
            kind: subject.kind,
            name: subject.name.to_owned(),
            field: field.to_owned(),
        }
    }

    pub(crate) fn reentry_refused(subject: Subject<'_>) -> Self {
        Self::ReentryRefused {
            kind: subject.kind,
            name: subject.name.to_owned(),
        }
    }

    pub(crate) fn no_synced_replicas(
        operation: Operation,
        subject: Subject<'_>,
        replicas: u32,
    ) -> Self {
        Self::NoSyncedReplicas {
            operation,
            kind: subject.kind,
            name: subject.name.to_owned(),
            replicas,
        }
    }
}

/// Whether a Redis error is one of the connection or the server's state that passes: connection
/// trouble (refused, broken, timed out) and a server that is loading, failing over or busy. Errors
/// of authentication, permission and every other error reply are not.
fn transient(source: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    match source.kind() {
        ErrorKind::Io
        | ErrorKind::Parse
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel => true,
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::ReadOnly,
        ) => true,
        _ => {
            source.is_timeout() || source.is_connection_dropped() || source.is_connection_refusal()
        }
    }
}
