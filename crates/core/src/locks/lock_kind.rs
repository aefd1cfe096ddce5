//! The public bound of every lock kind, re-exported as `kind::LockKind`.

/// What every lock kind is: the bound of [`Lock<K>`](crate::Lock), for code generic over kinds.
/// Sealed: only this crate's kinds implement it.
pub trait LockKind: crate::engine::LockWire {}

impl<K: crate::engine::LockWire> LockKind for K {}
