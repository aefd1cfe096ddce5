//! The error table of `error.rs`, case by case against real servers: what each failure a retry loop
//! meets comes out as, whether `is_transient()` says to retry it, and that its message names what
//! failed.

use std::net::TcpListener;
use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Client, Config, Error, Operation, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness;
use rlock_tests::redisson::KINDS;
use rlock_tests::rlock_object;

/// A client with short deadlines, so that the failures below come quickly.
fn quick(url: String) -> Config {
    let mut config = Config::new(url);
    config.connect_timeout = Duration::from_millis(500);
    config.command_timeout = Duration::from_millis(500);
    config.retry_attempts = 0;
    config
}

async fn connect_error(config: Config) -> Error {
    match Client::with_config(config).await {
        Ok(_) => panic!("connected"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn credentials_refused_or_missing_are_not_transient() {
    let server = RedisServer::start_authenticated(None, "pw", &["--requirepass", "pw"]);
    for (case, url) in [
        (
            "wrong password",
            format!("redis://:nope@127.0.0.1:{}/", server.port()),
        ),
        (
            "no password (NOAUTH)",
            format!("redis://127.0.0.1:{}/", server.port()),
        ),
    ] {
        let error = connect_error(quick(url)).await;
        assert!(
            matches!(
                error,
                Error::Backend {
                    operation: Operation::Connect,
                    ..
                }
            ),
            "{case}: {error:?}"
        );
        assert!(
            !error.is_transient(),
            "{case}: a retry would spin forever: {error:?}"
        );
        assert!(
            !error.to_string().contains("nope"),
            "{case}: the password leaked"
        );
    }
}

#[tokio::test]
async fn a_bad_url_is_an_invalid_argument_that_names_it() {
    let url = "redis://127.0.0.1:notaport/";
    let error = connect_error(quick(url.into())).await;
    assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
    assert!(error.to_string().contains(url), "{error}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let error = connect_error(quick(format!("redis://127.0.0.1:{port}/"))).await;
    assert!(error.is_transient(), "{error:?}");
}

#[tokio::test]
async fn a_connect_that_times_out_is_a_transient_timeout() {
    // Accepted by the kernel (the backlog), never answered: the handshake waits out the deadline.
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("address").port();
    let mut config = quick(format!("redis://127.0.0.1:{port}/"));
    config.connect_timeout = Duration::from_millis(300);
    config.command_timeout = Duration::from_secs(2);
    let error = connect_error(config).await;
    assert!(
        matches!(
            error,
            Error::Timeout { operation: Operation::Connect, after, .. }
                if after == Duration::from_millis(300)
        ),
        "the connect's own deadline: {error:?}"
    );
    assert!(error.is_transient());
    drop(listener);
}

#[tokio::test]
async fn a_script_denied_by_an_acl_is_unsupported_and_not_transient() {
    let server = RedisServer::start();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg(&["on", ">pw", "~*", "&*", "+@all", "-@scripting"][..])
        .query(&mut server.client().get_connection().expect("connect"))
        .expect("ACL SETUSER");
    let url = format!("redis://app:pw@127.0.0.1:{}/", server.port());
    let error = connect_error(quick(url)).await;
    assert!(matches!(error, Error::Unsupported { .. }), "{error:?}");
    assert!(!error.is_transient());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_wrong_type_for_every_call() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let () = redis.set("errors:string", "x").await.expect("SET");
    let lock = client.lock("errors:string");
    let errors = [
        lock.try_lock().await.map(|_| ()),
        lock.is_locked().await.map(|_| ()),
        lock.hold_count_of(rlock_redisson::Owner::new())
            .await
            .map(|_| ()),
    ];
    for error in errors {
        let error = error.expect_err("a string is no lock");
        assert!(
            matches!(error, Error::WrongType { ref key, .. } if key == "errors:string"),
            "{error:?}"
        );
        assert!(!error.is_transient());
    }
}

/// Asserts that `error` is `WrongType` about `key` for a `kind`, and says both.
fn assert_wrong_type(error: &Error, kind: &str, key: &str) {
    match error {
        Error::WrongType {
            kind: said,
            key: at,
            ..
        } => assert_eq!((*said, at.as_str()), (kind, key), "{error:?}"),
        other => panic!("{kind}: expected WrongType, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains(&format!("{key:?}")) && message.contains(&format!("a {kind} ")),
        "{kind}: {message}"
    );
}

/// Every kind's errors name the object and say what it is, so a log line of a service with many
/// kinds on one name space tells which failed: the same foreign key refused by each kind, the
/// acquire and a read of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_names_itself_and_the_object_in_its_errors() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let key = "errors:kinds";
    let () = redis.rpush(key, "x").await.expect("RPUSH");
    let mut locks = Vec::new();
    for kind in KINDS {
        let lock = kind.rlock(&client, key);
        let outcome = rlock_object!(lock, lock => lock.try_lock().await.map(drop));
        locks.push((kind.described_as(), outcome));
    }
    locks.push((
        "fair lock",
        client
            .fair_lock(key)
            .hold_count_of(Owner::new())
            .await
            .map(drop),
    ));
    locks.push((
        "write lock",
        client
            .read_write_lock(key)
            .write()
            .force_unlock()
            .await
            .map(drop),
    ));
    for (kind, outcome) in locks {
        assert_wrong_type(&outcome.expect_err(kind), kind, key);
    }
    let synchronizers = [
        (
            "semaphore",
            client.semaphore(key).try_acquire(1).await.map(drop),
        ),
        (
            "semaphore",
            client.semaphore(key).available_permits().await.map(drop),
        ),
        (
            "permit-expirable semaphore",
            client
                .permit_expirable_semaphore(key)
                .try_acquire()
                .await
                .map(drop),
        ),
        (
            "count-down latch",
            client.count_down_latch(key).count().await.map(drop),
        ),
        (
            "count-down latch",
            client.count_down_latch(key).count_down().await.map(drop),
        ),
    ];
    for (kind, outcome) in synchronizers {
        assert_wrong_type(&outcome.expect_err(kind), kind, key);
    }

    // A command of the caller's own, through the client: no object, so Redis' own words.
    let error = client
        .query::<Option<String>>(rlock_redisson::redis::cmd("GET").arg(key))
        .await
        .expect_err("GET of a list");
    assert!(matches!(error, Error::Backend { .. }), "{error:?}");
    assert!(error.to_string().contains("WRONGTYPE"), "{error}");

    // Another key of the object: the error names that key, not the object's name.
    let queue = "redisson_lock_queue:{errors:queued}";
    let () = redis.set(queue, "x").await.expect("SET");
    let error = client
        .fair_lock("errors:queued")
        .queue()
        .await
        .expect_err("a string is no queue");
    assert_wrong_type(&error, "fair lock", queue);

    // Not the owner: the lock's kind and name, and the owner's field.
    let fair = client.fair_lock("errors:unheld");
    let guard = fair.lock().await.expect("lock");
    let error = fair
        .unlock(Owner::new())
        .await
        .expect_err("another owner holds it");
    guard.unlock().await.expect("unlock");
    assert!(
        matches!(
            error,
            Error::NotOwner {
                kind: "fair lock",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("fair lock \"errors:unheld\" is not held by owner "),
        "{error}"
    );
    // A permit the semaphore does not hold.
    let semaphore = client.permit_expirable_semaphore("errors:permits");
    assert!(semaphore.try_set_permits(1).await.expect("set permits"));
    let id = semaphore.acquire().await.expect("a permit");
    semaphore.release(id).await.expect("release");
    let error = semaphore.release(id).await.expect_err("released already");
    assert!(
        error
            .to_string()
            .starts_with("permit-expirable semaphore \"errors:permits\" holds no permit "),
        "{error}"
    );
}

/// A waiter whose server dies is told so as connection trouble a retry may get past, not as a lost
/// write: it was only waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_wait_is_transient() {
    let mut server = RedisServer::start();
    let client = Client::with_config(quick(server.url()))
        .await
        .expect("connect");
    // Held by another client (a Java one, say), for longer than the waits.
    let mut redis = harness::raw(&server).await;
    let () = redis
        .hset("errors:killed", "elsewhere:1", 1)
        .await
        .expect("HSET");
    let () = redis
        .pexpire("errors:killed", 60_000)
        .await
        .expect("PEXPIRE");
    let semaphore = client.semaphore("errors:killed:semaphore");
    assert!(semaphore.try_set_permits(0).await.expect("set permits"));
    let lock_waiter = {
        let lock = client.lock("errors:killed");
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await })
    };
    let semaphore_waiter = tokio::spawn(async move {
        semaphore
            .try_acquire_for(1, Duration::from_secs(20))
            .await
            .map(|permits| permits.is_some())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    let waits = [
        (
            "lock \"errors:killed\"",
            lock_waiter
                .await
                .expect("task")
                .map(|guard| guard.is_some()),
        ),
        (
            "semaphore \"errors:killed:semaphore\"",
            semaphore_waiter.await.expect("task"),
        ),
    ];
    for (waiter, outcome) in waits {
        let error = outcome.expect_err("the server is gone");
        assert!(error.is_transient(), "{waiter}: {error:?}");
        assert!(error.to_string().contains(waiter), "{error}");
        assert!(
            !matches!(error, Error::OutcomeUnknown { .. }),
            "{waiter} was only waiting: {error:?}"
        );
    }
}

#[tokio::test]
async fn a_lease_out_of_range_says_so_in_one_unit() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let error = client
        .lock("errors:lease")
        .lock_with_lease(Duration::ZERO)
        .await
        .expect_err("a zero lease");
    assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("between 1 ms and 315360000000 ms"),
        "{error}"
    );
}
