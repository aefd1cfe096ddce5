//! The synchronizers that are not locks: Redisson's semaphores and count-down latch.
//!
//! They have no owner, so they do not implement the engine's lock seam: each is a file over
//! [`engine::Object`](crate::engine::Object) (a name, its channel and the [`WakeRule`] its waiters
//! are woken by), the engine's writes that wait for replicas or cannot be reconciled
//! (`engine::update`, `engine::write_detached`) and its wait loop (`Object::wait`: each attempt a
//! write, built once the client admits it).
//!
//! [`WakeRule`]: crate::wake::WakeRule

pub(crate) mod count_down_latch;
pub(crate) mod expirable_semaphore;
pub(crate) mod semaphore;
