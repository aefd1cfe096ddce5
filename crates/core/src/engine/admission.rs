//! Admission: a wait-forever acquisition's write is built only once the client admits it.
//!
//! An attempt's write (its checkout, undo, script call and reply futures: over a kilobyte) used to
//! be built and then wait for its turn on a connection, so that a burst of N waiters held N of
//! them at its peak. The client's admission
//! ([`Commands::admission`](crate::connection::Commands::admission)) lets as many of these writes
//! be built at once as its connections carry; the others wait for it as a semaphore entry. An
//! attempt takes it as late as it can: after what it decides locally (a hold passed by a local
//! holder is taken up at once, its lease already running) and after the waits that depend on its
//! owner alone (its own undo or release still in flight), then builds its write, and holds the
//! admission until the write is answered.

use tokio::sync::{Semaphore, SemaphorePermit};

use super::patience::Patience;
use crate::services::Services;

/// Waits until this client admits one more write of an acquisition prepared to wait as `patience`
/// says (at once for a bounded wait, whose requests have a bounded turn of their own); the write is
/// admitted while the returned permit is held.
///
/// # Cancel safety
///
/// Cancel safe: dropping it while it waits leaves the queue.
pub(crate) async fn admit(services: &Services, patience: Patience) -> Option<SemaphorePermit<'_>> {
    admit_by(services.commands.admission(patience.queueing())).await
}

/// Waits for `admission`'s permit, if there is an admission.
async fn admit_by(admission: Option<&Semaphore>) -> Option<SemaphorePermit<'_>> {
    // The semaphore is never closed.
    admission?.acquire().await.ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_write_waits_for_its_admission_and_holds_it_until_done() {
        let admission = Semaphore::new(0);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), admit_by(Some(&admission)))
                .await
                .is_err(),
            "nothing admitted while no permit is free"
        );
        admission.add_permits(1);
        let admitted = admit_by(Some(&admission)).await;
        assert!(admitted.is_some());
        assert_eq!(
            admission.available_permits(),
            0,
            "held while the write runs"
        );
        drop(admitted);
        assert_eq!(admission.available_permits(), 1, "given back once done");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn without_an_admission_a_write_goes_at_once() {
        assert!(admit_by(None).await.is_none());
    }
}
