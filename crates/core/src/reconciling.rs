//! Reconciliations in flight, by lock key and owner field: an owner does not act on a lock while a
//! reconciliation of its own holds there may still run.
//!
//! An acquire whose reply is lost is undone by a script sent after it (see [`crate::engine`]): the
//! undo removes one hold of the owner's field if the field has more holds than before the acquire.
//! That count cannot tell the hold the lost acquire added from one the same owner took since on
//! another connection, so an undo that runs late (behind a stuck connection, or re-sent on a new
//! one) would take away a legitimate hold: the owner would work in its critical section with the
//! lock free for anyone. So while an undo of `(key, field)` may still run, that owner's next
//! acquire, release or local hand-off to it waits (see [`Reconciling::settled`]) until the undo's
//! reply has been seen, or until it gave up because what it undoes has expired anyway.
//!
//! The same holds for an unlock or a local hand-off whose reply is lost after every re-send (a late
//! copy could release or pass a hold the owner took since: they go on being re-sent in the
//! background until a reply says what they did), and for a fair-lock waiter's give-up (a late one
//! would remove the owner's next queue entry).
//!
//! Only owners that act again with the same field can meet this: an owner of an
//! [`Owner::scope`](crate::Owner::scope), a blocking thread, a handle bound with `with_owner`, a
//! re-entry, or an acquisition retried after no replica acknowledged it. The fast path (nothing in
//! flight) is one map look-up.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The reconciliations in flight of one client.
#[derive(Debug, Default)]
pub(crate) struct Reconciling {
    /// Per lock key, the fields with reconciliations in flight and how many each has.
    pending: Mutex<foldhash::HashMap<String, Vec<(String, usize)>>>,
    /// Told whenever a reconciliation ends.
    ended: Notify,
}

impl Reconciling {
    /// Registers a reconciliation of `field`'s holds of `key` that may still run, until the
    /// returned [`Reconciliation`] is dropped.
    pub(crate) fn begin(self: &Arc<Self>, key: &str, field: &str) -> Reconciliation {
        {
            let mut pending = self.pending.lock();
            let fields = pending.entry(key.to_owned()).or_default();
            match fields.iter_mut().find(|(pending, _)| pending == field) {
                Some((_, count)) => *count += 1,
                None => fields.push((field.to_owned(), 1)),
            }
        }
        Reconciliation {
            registry: self.clone(),
            key: key.to_owned(),
            field: field.to_owned(),
        }
    }

    /// Whether a reconciliation of `field`'s holds of `key` may still run.
    pub(crate) fn is_pending(&self, key: &str, field: &str) -> bool {
        self.pending
            .lock()
            .get(key)
            .is_some_and(|fields| fields.iter().any(|(pending, _)| pending == field))
    }

    /// Waits until no reconciliation of `field`'s holds of `key` may still run.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn settled(&self, key: &str, field: &str) {
        while self.is_pending(key, field) {
            let ended = self.ended.notified();
            // Created before the check: an end from now on wakes it (`notify_waiters` reaches every
            // `Notified` created before it, polled or not).
            if !self.is_pending(key, field) {
                return;
            }
            ended.await;
        }
    }

    /// Waits until nothing of `field`'s on `key` is in flight, then registers one, in one step: for
    /// the acquire attempts of an owner that must run one at a time (see
    /// `LockWire::refuses_reentry`). Dropped before it registered, it leaves nothing behind.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it registers only when it completes.
    pub(crate) async fn alone(self: &Arc<Self>, key: &str, field: &str) -> Reconciliation {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered for wake-ups before the check, so an end between the two is not missed.
            let _ = ended.as_mut().enable();
            {
                let mut pending = self.pending.lock();
                let fields = pending.entry(key.to_owned()).or_default();
                if !fields.iter().any(|(pending, _)| pending == field) {
                    fields.push((field.to_owned(), 1));
                    return Reconciliation {
                        registry: self.clone(),
                        key: key.to_owned(),
                        field: field.to_owned(),
                    };
                }
            }
            ended.await;
        }
    }

    fn end(&self, key: &str, field: &str) {
        {
            let mut pending = self.pending.lock();
            if let Some(fields) = pending.get_mut(key) {
                if let Some(at) = fields.iter().position(|(pending, _)| pending == field) {
                    fields[at].1 -= 1;
                    if fields[at].1 == 0 {
                        let _ = fields.swap_remove(at);
                    }
                }
                if fields.is_empty() {
                    let _ = pending.remove(key);
                }
            }
        }
        self.ended.notify_waiters();
    }
}

/// A reconciliation in flight; dropping it says it can no longer run.
#[derive(Debug)]
pub(crate) struct Reconciliation {
    registry: Arc<Reconciling>,
    key: String,
    field: String,
}

impl Drop for Reconciliation {
    fn drop(&mut self) {
        self.registry.end(&self.key, &self.field);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_owner_waits_for_its_own_reconciliations_only() {
        let registry = Arc::new(Reconciling::default());
        registry.settled("lock", "a").await;
        let first = registry.begin("lock", "a");
        let second = registry.begin("lock", "a");
        let other = registry.begin("lock", "b");
        assert!(registry.is_pending("lock", "a"));
        assert!(!registry.is_pending("other lock", "a"));

        let waiting = tokio::spawn({
            let registry = registry.clone();
            async move { registry.settled("lock", "a").await }
        });
        drop(first);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished(), "one of a's two is still in flight");
        drop(other);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished(), "b's end does not settle a");
        drop(second);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("settled once a's last one ended")
            .expect("the waiting task");
        assert!(registry.pending.lock().is_empty());
    }
}
