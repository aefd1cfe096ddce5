//! What a fault scenario does to the workers' locks from outside the fleet: force unlocks by
//! another client, rlock's or the emulated Java client's, through any kind that shares the lock's
//! hash, and deletes that publish nothing, as an operator's `DEL` does.
//!
//! The two differ in what a client that holds the lock, or lends it along a streak of free
//! hand-offs, can hear: a force unlock publishes an unlock message on the lock's channel (rlock's
//! of every kind, docs/protocol.md §12; Java's `RLock`, `RFencedLock` and `RNonReentrantLock`),
//! a silent delete publishes nothing there (README: "What a successful `unlock()` proves").

use std::time::Duration;

use rlock_redisson::Client;

use super::fleet::HASH_SHARING;
use super::record::FaultKind;
use crate::redisson::{
    FairKind, FencedKind, JavaClient, JavaObject, NonReentrantKind, ObjectKind, RedissonVersion,
    ReentrantKind, SpinKind,
};
use crate::{java_object, rlock_object};

/// Another client on the workers' Redis, with a runtime of its own: the test's hands.
pub struct Operator {
    runtime: tokio::runtime::Runtime,
    rlock: Client,
    java: JavaClient,
    conn: redis::Connection,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("rlock", &self.rlock)
            .field("java", &self.java)
            .finish_non_exhaustive()
    }
}

/// The Java objects whose `forceUnlock` publishes an unlock message on the lock's channel.
const JAVA_PUBLISHING: [&dyn ObjectKind; 3] = [&ReentrantKind, &FencedKind, &NonReentrantKind];

/// The Java objects whose `forceUnlock` publishes nothing there: the spin lock's is a bare `DEL`,
/// the fair lock's wakes the head of its queue on the head's own channel only.
const JAVA_SILENT: [&dyn ObjectKind; 2] = [&SpinKind, &FairKind];

impl Operator {
    /// Connects an rlock client, an emulated Redisson 4.x client and a plain connection to `url`.
    ///
    /// # Panics
    ///
    /// When Redis cannot be reached.
    pub fn connect(url: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let (rlock, java) = runtime.block_on(async {
            let rlock = Client::connect(url).await.expect("the operator's client");
            let java = JavaClient::connect(url, RedissonVersion::V4)
                .await
                .expect("the operator's Java client");
            (rlock, java)
        });
        let conn = redis::Client::open(url)
            .expect("a valid URL")
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("the operator's connection");
        conn.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        Self {
            runtime,
            rlock,
            java,
            conn,
        }
    }

    /// `force_unlock` of lock `name` by the operator's rlock client through `kind`'s handle
    /// (Redisson's `forceUnlock`); whether it found the lock held.
    ///
    /// # Panics
    ///
    /// When the force unlock fails.
    pub fn force_unlock(&self, kind: &dyn ObjectKind, name: &str) -> bool {
        rlock_object!(kind.rlock(&self.rlock, name), lock => {
            self.runtime.block_on(lock.force_unlock()).expect("force unlock")
        })
    }

    /// A force unlock of lock `name` that publishes an unlock message on its channel, by a kind
    /// picked at random: rlock's through any of the kinds that share the hash ([`HASH_SHARING`]),
    /// or Java's `RLock`, `RFencedLock` or `RNonReentrantLock`. The fault to record when it found
    /// the lock held.
    ///
    /// # Panics
    ///
    /// When the force unlock fails.
    pub fn any_force_unlock(&self, name: &str) -> Option<FaultKind> {
        let which = fastrand::usize(..HASH_SHARING.len() + JAVA_PUBLISHING.len());
        let hit = match HASH_SHARING.get(which) {
            Some(kind) => self.force_unlock(*kind, name),
            None => self.java_force_unlock(JAVA_PUBLISHING[which - HASH_SHARING.len()], name),
        };
        hit.then_some(FaultKind::ForceUnlock)
    }

    /// A delete of lock `name` that publishes nothing on its channel, picked at random: an
    /// operator's `DEL` or `UNLINK`, or Java's `RSpinLock` or `RFairLock` `forceUnlock`. The
    /// fault to record when it found the lock held.
    ///
    /// # Panics
    ///
    /// When the delete fails.
    pub fn silent_delete(&mut self, name: &str) -> Option<FaultKind> {
        let hit = match fastrand::usize(..4) {
            0 => self.delete("DEL", name),
            1 => self.delete("UNLINK", name),
            java => self.java_force_unlock(JAVA_SILENT[java - 2], name),
        };
        hit.then_some(FaultKind::SilentDelete)
    }

    /// `command` (`DEL`, `UNLINK`) of the key of lock `name`; whether it existed.
    fn delete(&mut self, command: &str, name: &str) -> bool {
        let deleted: i64 = redis::cmd(command)
            .arg(name)
            .query(&mut self.conn)
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        deleted == 1
    }

    /// `forceUnlock()` of the Java object of `kind` on lock `name`; whether it existed.
    fn java_force_unlock(&self, kind: &dyn ObjectKind, name: &str) -> bool {
        let object: JavaObject = kind.java(&self.java, name);
        java_object!(object, lock => {
            self.runtime.block_on(lock.force_unlock()).expect("Java forceUnlock")
        })
    }
}
