//! The lock kinds: one file per Redisson lock object, each over the engine.
//!
//! A kind says *what* goes over the wire (its scripts, their arguments, how to read their replies,
//! where its waiters listen) by implementing the engine's [`LockWire`](crate::engine::LockWire);
//! the engine decides *when* (trying, waiting, waking, undoing, releasing, handing off), the same
//! way for every kind. [`lock`] is the handle every kind shares, [`Lock<K>`](lock::Lock), with
//! Redisson's `RLock` interface; the other files are the kinds, their handle aliases and the
//! methods of their own (`FairLock::queue`, `FencedLock::token`). [`multi_lock`] takes several
//! handles as one and [`listener`] listens to a lock's channel from the outside.
//!
//! Nothing below this folder imports from it (`tests/layers.rs` checks): a new kind is a new file
//! here plus its Lua scripts, never an edit of the engine (`docs/architecture.md`, "A new kind").

pub(crate) mod fair_lock;
pub(crate) mod fenced_lock;
pub(crate) mod group_lock;
pub(crate) mod listener;
pub(crate) mod lock;
pub(crate) mod lock_kind;
pub(crate) mod multi_lock;
pub(crate) mod non_reentrant;
pub(crate) mod reentrant;
pub(crate) mod rw_lock;
pub(crate) mod spin_lock;
