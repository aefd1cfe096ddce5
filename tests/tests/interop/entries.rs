//! The objects of map entries across the sides (docs/protocol.md §13): what Java's
//! `redisson.getMap("interop:orders").getLock(42L)` (and its fair lock, read-write lock, semaphore,
//! permit-expirable semaphore and count-down latch) is, rlock's
//! `client.map("interop:orders").lock(42i64)` is too. The emulator names the entry's objects from
//! the bytes Java's codecs wrote on the JVM and Redisson's hash ([`JAVA_KEYS`]); rlock from its own
//! codecs. The names agree for every codec, key type and container, plain and under a prefix
//! mapper; and for every kind Java hands out per entry, the two sides exclude each other, wake each
//! other, hand over at a lease's end and keep each other out while a watchdog renews. A Java
//! transaction's hold of an entry (its field carries the transaction id) keeps rlock out and shows
//! in rlock's holders.

use std::time::Duration;

use rlock_redisson::{Codec, Config, Container, EntryKey, EntryNames, EntryObject, NameMapper};
use rlock_tests::redisson::{JAVA_KEYS, JavaEntries, JavaKey};
use rlock_tests::{RedisServer, harness};
use tokio::time::Instant;

use crate::support::{
    InteropKind, Party, Redis, SemaphoreKind, Side, Site, Topology, both_directions, every_kind,
    woken,
};
use crate::wakeup::wake_rounds;

/// The map, as both sides' code names it.
const MAP: &str = "interop:orders";

/// Java's `42L` under the default codec, `Kryo5Codec`: the key of every scenario but the names'.
fn java_42l() -> &'static JavaKey {
    JAVA_KEYS
        .iter()
        .find(|key| key.codec == "Kryo5Codec" && key.key == "Long:42")
        .expect("Kryo5Codec 42L among the JVM's keys")
}

/// The rlock key and codec of a key Java wrote.
fn rlock_key(java: &JavaKey) -> (EntryKey, Codec) {
    let (kind, text) = java.key.split_once(':').expect("<type>:<value>");
    let key = match kind {
        "String" => EntryKey::from(text),
        "Long" => EntryKey::Long(text.parse().expect("a long")),
        "Integer" => EntryKey::Integer(text.parse().expect("an int")),
        "UUID" => EntryKey::Uuid(text.parse().expect("a UUID")),
        other => panic!("no rlock key for the Java type {other}"),
    };
    let codec = match java.codec {
        "Kryo5Codec" => Codec::Kryo5,
        "StringCodec" => Codec::String,
        "JsonJacksonCodec" => Codec::JsonJackson,
        "TypedJsonJacksonCodec" => Codec::TypedJsonJackson,
        other => panic!("no rlock codec for {other}"),
    };
    (key, codec)
}

/// The name of the `kind` object of `MAP`'s entry `42L`, as Java names it, checked against rlock's.
fn entry_name(kind: InteropKind) -> String {
    let suffix = kind
        .entry_suffix()
        .expect("a kind Java hands out per entry");
    let java = JavaEntries::new(MAP).object_name(&java_42l().bytes(), suffix);
    let object = [
        EntryObject::Lock,
        EntryObject::FairLock,
        EntryObject::ReadWriteLock,
    ]
    .into_iter()
    .find(|object| object.suffix() == suffix)
    .expect("a lock's suffix");
    let rlock = EntryNames::new(Container::Map, MAP, Codec::Kryo5, None);
    assert_eq!(rlock.name(42i64, object).expect("a long encodes"), java);
    java
}

/// Every codec, key type, container and object: rlock's handles carry Java's names, without a
/// mapper and under a prefix mapper (which maps the map's name, then the object's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_carry_javas_names_for_every_codec_key_and_container() {
    let server = RedisServer::start();
    let plain = harness::client(&server).await;
    let mapped = harness::client_with(&server, |config: &mut Config| {
        config.name_mapper = Some(NameMapper::prefix("app:"));
    })
    .await;
    let mut checked = 0;
    for java_key in JAVA_KEYS {
        let (key, codec) = rlock_key(java_key);
        for (client, map_raw_name, object_prefix) in [
            (&plain, MAP.to_owned(), ""),
            (&mapped, format!("app:{MAP}"), "app:"),
        ] {
            let java = JavaEntries::new(&map_raw_name);
            let name = |suffix: &str| {
                format!(
                    "{object_prefix}{}",
                    java.object_name(&java_key.bytes(), suffix)
                )
            };
            for entries in [client.map(MAP), client.multimap(MAP), client.set(MAP)] {
                let entries = entries.with_codec(codec.clone());
                let what = format!("{java_key:?} {:?}", entries.names());
                let key = key.clone();
                assert_eq!(
                    entries.lock(key.clone()).expect("encodes").name(),
                    name("lock"),
                    "{what}"
                );
                assert_eq!(
                    entries.fair_lock(key.clone()).expect("encodes").name(),
                    name("fairlock"),
                    "{what}"
                );
                assert_eq!(
                    entries
                        .read_write_lock(key.clone())
                        .expect("encodes")
                        .name(),
                    name("rw_lock"),
                    "{what}"
                );
                assert_eq!(
                    entries.semaphore(key.clone()).expect("encodes").name(),
                    name("semaphore"),
                    "{what}"
                );
                assert_eq!(
                    entries
                        .permit_expirable_semaphore(key.clone())
                        .expect("encodes")
                        .name(),
                    name("permitexpirablesemaphore"),
                    "{what}"
                );
                assert_eq!(
                    entries.count_down_latch(key).expect("encodes").name(),
                    name("countdownlatch"),
                    "{what}"
                );
                checked += 6;
            }
        }
    }
    assert_eq!(checked, JAVA_KEYS.len() * 2 * 3 * 6);
}

/// The client's codec (a Redisson file's `codec`) is the entries' default; a codec rlock cannot
/// reproduce refuses a typed key when the object is made, and takes the bytes it wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_codec_is_the_default_and_an_unknown_one_refuses_typed_keys() {
    let server = RedisServer::start();
    let strings = harness::client_with(&server, |config| config.codec = Codec::String).await;
    let java = JavaEntries::new(MAP);
    assert_eq!(
        strings.map(MAP).lock("42").expect("a string").name(),
        java.object_name(b"42", "lock")
    );
    let other = Codec::from_java_class("org.redisson.codec.SmileJacksonCodec");
    let snappy = harness::client_with(&server, |config| config.codec = other.clone()).await;
    match snappy.map(MAP).lock(42i64) {
        Err(rlock_redisson::Error::Codec { codec, .. }) => {
            assert_eq!(codec, "org.redisson.codec.SmileJacksonCodec");
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
    let raw = snappy.set(MAP).lock(EntryKey::Encoded(vec![1, 2, 3]));
    assert_eq!(
        raw.expect("bytes need no codec").name(),
        java.object_name(&[1, 2, 3], "lock")
    );
}

/// `holder` unlocks the entry's `kind` lock while `waiter` waits as its contender: the waiter owns
/// it within the wake limit (three rounds).
async fn unlock_wakes_the_entrys_waiter(
    kind: InteropKind,
    topology: Topology,
    holder: Side,
    waiter: Side,
) {
    let site = Site::start(topology);
    let holder = site.party(holder).await;
    let waiter = site.party(waiter).await;
    let name = entry_name(kind);
    let mut redis = site.redis(&name).await;
    wake_rounds(kind, &holder, &waiter, &mut redis, &name, site.label(), 3).await;
}

/// `holder` takes the entry's `kind` lock with a 500 ms lease: the waiter's try fails, and its
/// wait ends with the lease, holding the lock.
async fn a_lease_excludes_then_hands_over(kind: InteropKind, holder: Side, waiter: Side) {
    const LEASE: Duration = Duration::from_millis(500);
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = entry_name(kind);
    let contender = kind.contender();

    let taken_at = Instant::now();
    let _expiring = holder.get(kind, &name).lock_with_lease(1, LEASE).await;
    let refused = waiter
        .get(contender, &name)
        .try_lock(2, Duration::ZERO, None)
        .await;
    assert!(refused.is_none(), "the other side took a held entry lock");
    let (acquired_at, hold) = woken(waiter.get(contender, &name).spawn_lock(2)).await;
    assert!(
        acquired_at >= taken_at + LEASE,
        "taken before the lease ended"
    );
    assert_eq!(
        redis.hash(&name).await,
        contender.holds(&waiter.field(2), 1)
    );
    hold.release().await;
}

/// `holder` keeps the entry's `kind` lock past three 900 ms watchdog leases while the other side
/// waits; the waiter gets it once released.
async fn a_watchdog_keeps_the_other_side_out(kind: InteropKind, holder: Side, waiter: Side) {
    const WATCHDOG: Duration = Duration::from_millis(900);
    let server = RedisServer::start();
    let holder = Party::connect_with(holder, &server, Some(WATCHDOG)).await;
    let waiter = Party::connect_with(waiter, &server, Some(WATCHDOG)).await;
    let mut redis = Redis::connect(&server).await;
    let name = entry_name(kind);
    let contender = kind.contender();

    let hold = holder.get(kind, &name).lock(1).await;
    let waiting = waiter.get(contender, &name).spawn_lock(2);
    let until = Instant::now() + WATCHDOG * 3;
    while Instant::now() < until {
        tokio::time::sleep(WATCHDOG / 10).await;
        assert!(
            !waiting.is_finished(),
            "the waiter took a renewed entry lock"
        );
        assert!(redis.pttl(&name).await > 0, "the lease ran out");
    }
    hold.release().await;
    let (_, hold) = woken(waiting).await;
    assert_eq!(
        redis.hash(&name).await,
        contender.holds(&waiter.field(2), 1)
    );
    hold.release().await;
}

every_kind!(entry matrix: unlock_wakes_the_entrys_waiter);
every_kind!(entry both_directions: a_lease_excludes_then_hands_over, a_watchdog_keeps_the_other_side_out);

/// The synchronizers of an entry: a semaphore's release, a permit-expirable semaphore's permit and
/// a count-down latch's last count cross the sides.
async fn the_entrys_synchronizers_cross_the_sides(releaser: Side, waiter: Side) {
    let server = RedisServer::start();
    let releaser = Party::connect(releaser, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let java = JavaEntries::new(MAP);
    let bytes = java_42l().bytes();
    let rlock = EntryNames::new(Container::Map, MAP, Codec::Kryo5, None);

    let semaphore = java.object_name(&bytes, "semaphore");
    assert_eq!(
        rlock.name(42i64, EntryObject::Semaphore).expect("encodes"),
        semaphore
    );
    let plain = SemaphoreKind::Plain;
    assert!(waiter.semaphore(plain, &semaphore).try_set_permits(0).await);
    let waiting = waiter.semaphore(plain, &semaphore).spawn_acquire(1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "acquired a permit that was never there"
    );
    releaser.semaphore(plain, &semaphore).add_permits(1).await;
    let (_, permits) = woken(waiting).await;
    permits.release().await;

    let expirable = java.object_name(&bytes, "permitexpirablesemaphore");
    assert_eq!(
        rlock
            .name(42i64, EntryObject::PermitExpirableSemaphore)
            .expect("encodes"),
        expirable
    );
    assert!(releaser.expirable(&expirable).try_set_permits(1).await);
    let id = releaser.expirable(&expirable).acquire(None).await;
    assert_eq!(waiter.expirable(&expirable).available_permits().await, 0);
    waiter.expirable(&expirable).release(&id).await;
    assert_eq!(releaser.expirable(&expirable).available_permits().await, 1);

    let latch = java.object_name(&bytes, "countdownlatch");
    assert_eq!(
        rlock
            .name(42i64, EntryObject::CountDownLatch)
            .expect("encodes"),
        latch
    );
    assert!(waiter.count_down_latch(&latch).try_set_count(1).await);
    let opened = waiter.count_down_latch(&latch).spawn_await();
    releaser.count_down_latch(&latch).count_down().await;
    let _ = woken(opened).await;
    assert_eq!(releaser.count_down_latch(&latch).count().await, 0);
}

both_directions!(the_entrys_synchronizers_cross_the_sides);

/// A Java transaction (`RTransaction`) locks an entry with the entry's `lock` and a field of its
/// own, `<uuid>:<threadId>:<transactionId>`: rlock's entry lock is kept out, and its holders show
/// the Java client, with the thread and transaction as the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_transactions_entry_lock_excludes_rlock_and_shows_as_javas() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = Redis::connect(&server).await;
    let name = entry_name(InteropKind::REENTRANT);
    let node = uuid::Uuid::new_v4().to_string();
    let transaction = "6f1c0a4e9b2d4c7f8e3a5b6c7d8e9f00";
    let field = format!("{node}:57:{transaction}");
    // What RedissonTransactionalLock's acquire (the RLock script under that field) leaves.
    let () = redis::pipe()
        .hincr(&name, &field, 1)
        .ignore()
        .pexpire(&name, 30_000)
        .ignore()
        .query_async(&mut redis.conn)
        .await
        .expect("HINCRBY, PEXPIRE");

    let lock = client.map(MAP).lock(42i64).expect("a long encodes");
    assert_eq!(lock.name(), name);
    assert!(lock.try_lock().await.expect("tries").is_none());
    let holders = lock.holders().await.expect("reads");
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(
        (
            holders[0].node.as_str(),
            holders[0].owner.as_str(),
            holders[0].count
        ),
        (node.as_str(), format!("57:{transaction}").as_str(), 1)
    );
}

/// The cluster case of the default suite (the others: `scripts/interop-matrix.sh`): the entries of
/// one map share its hash tag, so an entry's lock, channel and latch live in the map's slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_lock_wakes_across_the_sides_in_a_cluster() {
    unlock_wakes_the_entrys_waiter(
        InteropKind::REENTRANT,
        Topology::Cluster,
        Side::Java,
        Side::Rlock,
    )
    .await;
}
