//! Owner identity: who holds a hold.
//!
//! Redisson identifies a holder by `<client-uuid>:<thread-id>`. Threads mean nothing to async Rust, so
//! rlock replaces the thread id with an explicit [`Owner`]: a cheap `Copy` token that can be moved
//! between tasks. Holds taken with the same owner re-enter; holds taken with different owners exclude
//! each other, even inside one process.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Owner ids handed out by [`Owner::new`] start far above the small numbers Java thread ids (and ids a
/// user pins with [`Owner::from_id`]) use in practice, so the two never collide.
const FIRST_GENERATED_ID: u64 = 1 << 32;

static NEXT_ID: AtomicU64 = AtomicU64::new(FIRST_GENERATED_ID);

/// The identity a hold belongs to: the Rust counterpart of a Java thread id.
///
/// Locks taken without an explicit owner use a fresh owner per acquisition, so two tasks never
/// re-enter each other's holds by accident. To re-enter, acquire again with the same owner (see
/// [`Lock::with_owner`](crate::Lock::with_owner)).
///
/// On the wire an owner is the hash field `<node-uuid>:<id>`, where the node uuid is the
/// [`Client`](crate::Client)'s.
///
/// # Examples
///
/// ```
/// use rlock::Owner;
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
    format!("{node_id}:{}", owner.0)
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
