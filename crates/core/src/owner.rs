//! Owner identity: who holds a hold, and which owner a call uses (see [`Owner`]).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// Owner ids handed out by [`Owner::new`] start far above the small numbers Java thread ids (and ids a
/// user pins with [`Owner::from_id`]) use in practice, so the two never collide.
const FIRST_GENERATED_ID: u64 = 1 << 32;

static NEXT_ID: AtomicU64 = AtomicU64::new(FIRST_GENERATED_ID);

/// The owner ids of blocking calls made by tokio tasks: the task's id (unique in the process) with
/// this bit set, far above the ids [`Owner::new`] hands out.
#[cfg(feature = "blocking")]
const TASK_OWNERS: u64 = 1 << 62;

thread_local! {
    /// The calling thread's owner, made on first use.
    static THREAD: Owner = Owner::new();
}

tokio::task_local! {
    /// The owner of the enclosing [`Owner::scope`].
    static SCOPE: Owner;
}

/// The identity a hold belongs to: the Rust counterpart of a Java thread id.
///
/// Redisson identifies a holder by `<client-uuid>:<thread-id>`, and a Java thread re-enters its own
/// holds. rlock writes `<client-uuid>:<owner-id>`: holds taken with the same owner re-enter; holds of
/// different owners exclude each other, even inside one process. Which owner a call uses, as a
/// Redisson user expects it:
///
/// | Java | rlock | owner of an acquisition |
/// |---|---|---|
/// | a thread | the [blocking](crate::blocking) API on a thread | [`Owner::thread`], one per OS thread, resolved on the thread that makes each call (on an async runtime's thread, the calling task's owner) |
/// | (none) | async code inside [`Owner::scope`] | the scope's owner: nested locks re-enter |
/// | `lockAsync(threadId)` | a handle bound with [`Lock::with_owner`](crate::Lock::with_owner) | that owner |
/// | (none) | other async code | a fresh owner per acquisition: tasks exclude each other |
///
/// [`Owner::current`] tells which owner a call without an explicit one uses.
///
/// On the wire an owner is the hash field `<node-uuid>:<id>`, where the node uuid is the
/// [`Client`](crate::Client)'s.
///
/// # Examples
///
/// ```
/// use rlock_redisson::Owner;
///
/// let a = Owner::new();
/// let b = Owner::new();
/// assert_ne!(a, b);
/// assert_eq!(Owner::from_id(57).id(), 57);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(u64);

impl Owner {
    /// A new owner, distinct from every other owner created in this process.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(NEXT_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// An owner with a chosen id, like Redisson's `threadId` overloads. Ids at or above 2³² are
    /// reserved for [`Owner::new`].
    pub const fn from_id(id: u64) -> Self {
        Self(id)
    }

    /// The numeric id written after the node uuid in the hash field.
    pub const fn id(self) -> u64 {
        self.0
    }

    /// The calling OS thread's owner: the same for every call on this thread, distinct from every
    /// other thread's. The blocking API uses it, as Java uses the thread id.
    ///
    /// ```
    /// use rlock_redisson::Owner;
    ///
    /// let here = Owner::thread();
    /// assert_eq!(here, Owner::thread());
    /// let there = std::thread::spawn(Owner::thread).join().unwrap();
    /// assert_ne!(here, there);
    /// ```
    pub fn thread() -> Self {
        THREAD.with(|owner| *owner)
    }

    /// The owner of a blocking call (the [blocking](crate::blocking) API) made here: the calling
    /// thread's ([`Owner::thread`]), except on a thread of an async runtime, where it is the calling
    /// task's. Tasks take turns on a runtime's threads, so a thread's owner would make every task
    /// that runs on it one owner, re-entering each other's holds; a `spawn_blocking` closure is a
    /// task of its own, whose nested calls re-enter as a thread's do.
    #[cfg(feature = "blocking")]
    pub(crate) fn blocking_caller() -> Self {
        match tokio::task::try_id().and_then(|id| id.to_string().parse::<u64>().ok()) {
            Some(task) => Self::from_id(TASK_OWNERS | task),
            None => Self::thread(),
        }
    }

    /// The owner an acquisition without an explicit owner uses here: the enclosing
    /// [`Owner::scope`]'s, else (on a thread outside any async runtime) [`Owner::thread`], else
    /// `None`: async code outside a scope gets a fresh owner per acquisition.
    ///
    /// ```
    /// use rlock_redisson::Owner;
    ///
    /// assert_eq!(Owner::current(), Some(Owner::thread()));
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// assert_eq!(Owner::current(), None);
    /// let owner = Owner::new();
    /// assert_eq!(Owner::scope(owner, async { Owner::current() }).await, Some(owner));
    /// # });
    /// ```
    pub fn current() -> Option<Self> {
        if let Ok(owner) = SCOPE.try_with(|owner| *owner) {
            return Some(owner);
        }
        tokio::runtime::Handle::try_current()
            .is_err()
            .then(Self::thread)
    }

    /// The owner a query about "the current owner" asks about: `bound`, else [`Owner::current`].
    /// Async code outside a scope with an unbound handle has none: each of its acquisitions is a
    /// new owner, so the question has no answer.
    pub(crate) fn known(bound: Option<Self>) -> crate::error::Result<Self> {
        bound.or_else(Self::current).ok_or_else(|| {
            crate::error::Error::InvalidArgument(
                "no current owner: outside Owner::scope each acquisition is a new owner".into(),
            )
        })
    }

    /// Runs `future` with `owner` as the owner of every acquisition inside it that names none, so
    /// nested locks re-enter instead of deadlocking, like nested `lock()` calls on one Java thread.
    ///
    /// The scope is a tokio task-local: it does **not** flow into `tokio::spawn`ed tasks (they are
    /// other owners unless given one), and futures polled concurrently inside one scope (`join!`,
    /// `select!`) share the owner, so they re-enter each other's holds rather than excluding.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock_redisson::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// # let client = rlock_redisson::Client::connect(&url).await?;
    /// use rlock_redisson::Owner;
    ///
    /// let lock = client.lock("doc:owner:scope");
    /// Owner::scope(Owner::new(), async {
    ///     let outer = lock.lock().await?;
    ///     let inner = lock.lock().await?; // re-enters: same owner
    ///     assert_eq!(lock.hold_count().await?, 2);
    ///     inner.unlock().await?;
    ///     outer.unlock().await
    /// })
    /// .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `future`: the scope only sets the owner while `future` is polled.
    pub fn scope<F: Future>(owner: Self, future: F) -> impl Future<Output = F::Output> {
        SCOPE.scope(owner, future)
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.0)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The hash field of `owner` on the client `node_id`: `<node-uuid>:<id>`.
pub(crate) fn field(node_id: &str, owner: Owner) -> String {
    // Written out rather than `format!`ed: every acquisition names its field.
    let mut number = itoa::Buffer::new();
    let number = number.format(owner.0);
    let mut field = String::with_capacity(node_id.len() + 1 + number.len());
    field.push_str(node_id);
    field.push(':');
    field.push_str(number);
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_is_uuid_colon_decimal() {
        let node = "3b241101-e2bb-4255-8caf-4136c566a962";
        assert_eq!(
            field(node, Owner::from_id(57)),
            "3b241101-e2bb-4255-8caf-4136c566a962:57"
        );
    }

    #[test]
    fn generated_owners_are_distinct_and_above_pinned_ids() {
        let a = Owner::new();
        let b = Owner::new();
        assert_ne!(a, b);
        assert!(a.id() >= FIRST_GENERATED_ID && b.id() >= FIRST_GENERATED_ID);
    }
}
