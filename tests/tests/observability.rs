//! Spans, events and metrics of a contended acquisition, a lost lease, a subscriber reconnect and
//! writes whose replies were lost, as a service that collects them sees them (README,
//! "Observability").
//!
//! Each test runs on a current-thread runtime inside a thread-local tracing subscriber and metrics
//! recorder, so that every task of the client (waiters, the watchdog, the subscriber) reports to
//! them and tests running in parallel do not see each other's.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::AsyncCommands;
use rlock_redisson::{Client, LockGuard};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client_with, eventually, kill_subscribers, raw};
use rlock_tests::proxied::{Deployment, Proxied};
use rlock_tests::proxy::Match;
use rlock_tests::recorder::MemoryRecorder;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span or an event, with its fields as text.
#[derive(Clone, Debug)]
struct Captured {
    /// The span's name, or the event's message.
    name: String,
    level: Level,
    fields: HashMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Fields as text: strings as they are, everything else as its `Debug`.
#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// A layer that keeps every closed span and every event.
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Captured>>>,
    events: Arc<Mutex<Vec<Captured>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span.extensions_mut().remove::<Fields>().unwrap_or_default();
            self.spans.lock().push(Captured {
                name: span.name().to_owned(),
                level: *span.metadata().level(),
                fields: fields.0,
            });
        }
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let name = fields.0.remove("message").unwrap_or_default();
        self.events.lock().push(Captured {
            name,
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
}

impl Capture {
    fn events(&self, message: &str) -> Vec<Captured> {
        let events = self.events.lock();
        events
            .iter()
            .filter(|e| e.name == message)
            .cloned()
            .collect()
    }

    fn spans(&self, name: &str) -> Vec<Captured> {
        let spans = self.spans.lock();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

/// Runs `test` on a current-thread runtime, with a capturing subscriber and a debugging recorder as
/// this thread's defaults.
fn observed<F: Future<Output = ()>>(test: impl FnOnce(Capture, MemoryRecorder) -> F) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let recorder = MemoryRecorder::default();
    let metrics = recorder.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tracing::subscriber::with_default(subscriber, || {
        metrics::with_local_recorder(&recorder, || runtime.block_on(test(capture, metrics)));
    });
}

/// Holds `name` as another client would (a Redisson hash with a foreign field), for `ttl`.
async fn hold_elsewhere(redis: &mut redis::aio::MultiplexedConnection, name: &str, ttl: Duration) {
    let _: () = redis.hset(name, "elsewhere:1", 1).await.expect("HSET");
    let _: () = redis
        .pexpire(name, i64::try_from(ttl.as_millis()).expect("ttl"))
        .await
        .expect("PEXPIRE");
}

/// Releases a lock held with [`hold_elsewhere`] as Redisson does: delete, then the unlock message.
async fn release_elsewhere(redis: &mut redis::aio::MultiplexedConnection, name: &str) {
    let _: () = redis.del(name).await.expect("DEL");
    let _: () = redis
        .publish(format!("redisson_lock__channel:{{{name}}}"), 0)
        .await
        .expect("PUBLISH");
}

/// A task waiting for `name`, held elsewhere, once its channel subscription is live.
async fn parked_waiter(
    client: &Client,
    redis: &mut redis::aio::MultiplexedConnection,
    metrics: &MemoryRecorder,
    name: &str,
) -> tokio::task::JoinHandle<rlock_redisson::Result<LockGuard>> {
    hold_elsewhere(redis, name, Duration::from_secs(30)).await;
    let lock = client.lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await });
    assert!(
        eventually(Duration::from_secs(5), async || metrics
            .gauge("rlock_subscriptions", &[])
            == 1.0)
        .await,
        "the waiter's channel is live"
    );
    waiter
}

const HOLD: Duration = Duration::from_millis(300);

#[test]
fn a_contended_acquisition_is_one_span_woken_by_the_unlock_message() {
    let server = RedisServer::start();
    observed(|capture, metrics| async move {
        let client = client_with(&server, |_| {}).await;
        let mut redis = raw(&server).await;
        let waiter = parked_waiter(&client, &mut redis, &metrics, "obs:contended").await;
        tokio::time::sleep(HOLD).await;
        assert_eq!(metrics.gauge("rlock_waiters", &[("kind", "lock")]), 1.0);
        release_elsewhere(&mut redis, "obs:contended").await;
        let guard = waiter.await.expect("task").expect("lock");
        assert_eq!(metrics.gauge("rlock_holds", &[("kind", "lock")]), 1.0);
        guard.unlock().await.expect("unlock");

        let spans = capture.spans("acquire");
        assert_eq!(spans.len(), 1, "one span per acquisition: {spans:?}");
        let span = &spans[0];
        assert_eq!(span.level, Level::DEBUG);
        assert_eq!(span.field("lock"), Some("obs:contended"));
        assert_eq!(span.field("kind"), Some("lock"));
        assert_eq!(span.field("wait"), Some("Forever"));
        let owner = span.field("owner").expect("owner");
        assert!(owner.starts_with(client.node_id()), "{owner}");
        assert_eq!(span.field("outcome"), Some("acquired"));
        assert_eq!(span.field("path"), Some("message"));
        // A first try, a retry once subscribed, and the one the message sent.
        assert_eq!(span.field("attempts"), Some("3"));
        let waited: u64 = span
            .field("waited_ms")
            .expect("waited")
            .parse()
            .expect("ms");
        assert!(waited >= 300, "{waited} ms");

        let acquired = [("kind", "lock"), ("outcome", "acquired")];
        assert_eq!(metrics.counter("rlock_acquisitions_total", &acquired), 1);
        let waits = metrics.histogram("rlock_acquire_wait_seconds", &[("kind", "lock")]);
        assert_eq!(waits.len(), 1);
        assert!(waits[0] >= 0.3, "{waits:?}");
        assert_eq!(metrics.gauge("rlock_waiters", &[("kind", "lock")]), 0.0);
        assert_eq!(metrics.gauge("rlock_holds", &[("kind", "lock")]), 0.0);
        assert_eq!(metrics.gauge("rlock_subscriptions", &[]), 0.0);
        assert!(
            capture.events.lock().iter().all(|e| e.level > Level::INFO),
            "a healthy wait logs nothing at info or above: {:?}",
            capture.events.lock()
        );
    });
}

#[test]
fn a_lease_lost_behind_the_watchdogs_back_is_a_warning_and_a_count() {
    let server = RedisServer::start();
    observed(|capture, metrics| async move {
        let client = client_with(&server, |config| {
            config.watchdog_timeout = Duration::from_millis(600);
        })
        .await;
        let mut redis = raw(&server).await;
        let guard = client.lock("obs:lost").lock().await.expect("lock");
        let renewed = [("outcome", "renewed")];
        assert!(
            eventually(Duration::from_secs(2), async || metrics
                .counter("rlock_renewal_rounds_total", &renewed)
                >= 1)
            .await,
            "a renewal round ran"
        );
        let _: () = redis.del("obs:lost").await.expect("DEL");
        tokio::time::timeout(Duration::from_secs(2), guard.lease_lost())
            .await
            .expect("the watchdog finds the lock gone");

        let lost = capture.events("lease lost");
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].level, Level::WARN);
        assert_eq!(lost[0].field("lock"), Some("obs:lost"));
        assert_eq!(lost[0].field("kind"), Some("lock"));
        assert_eq!(lost[0].field("reason"), Some("gone"));
        let labels = [("kind", "lock"), ("reason", "gone")];
        assert_eq!(metrics.counter("rlock_leases_lost_total", &labels), 1);
        let rounds = metrics.histogram("rlock_renewal_round_seconds", &[]);
        assert!(
            !rounds.is_empty() && rounds.iter().all(|s| *s < 1.0),
            "{rounds:?}"
        );
        assert_eq!(
            metrics.counter("rlock_renewal_rounds_total", &[("outcome", "failed")]),
            0
        );
        let round = capture.events("renewal round");
        assert!(round.iter().all(|e| e.level == Level::DEBUG), "{round:?}");
        assert_eq!(round[0].field("locks"), Some("1"));
        drop(guard);
        client.close().await;
    });
}

#[test]
fn a_subscriber_reconnect_resubscribes_and_says_so() {
    let server = RedisServer::start();
    observed(|capture, metrics| async move {
        let client = client_with(&server, |_| {}).await;
        let mut redis = raw(&server).await;
        let waiter = parked_waiter(&client, &mut redis, &metrics, "obs:reconnect").await;
        let live = async || metrics.gauge("rlock_subscriptions", &[]) == 1.0;

        let killed = kill_subscribers(&mut redis).await;
        assert_eq!(killed, 1, "the client's one subscriber connection");
        let resubscribed =
            async || metrics.counter("rlock_resubscriptions_total", &[]) == 1 && live().await;
        assert!(eventually(Duration::from_secs(5), resubscribed).await);
        assert_eq!(metrics.counter("rlock_subscriber_reconnects_total", &[]), 1);

        let lost = capture.events("subscriber connection lost; reconnecting");
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].level, Level::WARN);
        let back = capture.events("subscriber reconnected; re-subscribing");
        assert_eq!(back.len(), 1, "{back:?}");
        assert_eq!(back[0].level, Level::INFO);
        assert_eq!(back[0].field("channels"), Some("1"));
        assert_eq!(back[0].field("url"), Some(server.url().as_str()));

        // The waiter still hears the unlock on the new connection.
        release_elsewhere(&mut redis, "obs:reconnect").await;
        let guard = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("woken by the message")
            .expect("task")
            .expect("lock");
        guard.unlock().await.expect("unlock");
        let spans = capture.spans("acquire");
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].field("outcome"), Some("acquired"));
        let attempts: u32 = spans[0]
            .field("attempts")
            .expect("attempts")
            .parse()
            .expect("n");
        assert!(
            attempts >= 4,
            "the reconnect sent the waiter to retry: {attempts}"
        );
    });
}

#[test]
fn writes_whose_replies_were_lost_are_reconciled_and_counted() {
    let proxied = Proxied::start(Deployment::Single);
    observed(|capture, metrics| async move {
        let mut config = proxied.config();
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
        let client = Client::with_config(config).await.expect("client");
        let name = "obs:lost-reply";
        let proxy = proxied.proxy_of(name);
        let script_on_name = || Match::command("EVALSHA").with_arg(name);

        proxy.lose_reply(script_on_name(), 1);
        let failed = client.lock(name).lock().await;
        assert!(failed.is_err(), "the acquire's reply was lost: {failed:?}");
        let undone = [("operation", "acquire"), ("result", "resolved")];
        assert!(
            eventually(Duration::from_secs(5), async || metrics
                .counter("rlock_unknown_outcomes_total", &undone)
                == 1)
            .await,
            "the acquire was undone"
        );

        let guard = client.lock(name).lock().await.expect("lock");
        proxy.lose_reply(script_on_name(), 1);
        guard.unlock().await.expect("the unlock is re-sent");
        let resent = [("operation", "unlock"), ("result", "resolved")];
        assert_eq!(metrics.counter("rlock_unknown_outcomes_total", &resent), 1);
        assert_eq!(proxy.lost_replies(), 2);

        let reconciled = capture.events("reconciled a write whose outcome was unknown");
        let operations: Vec<_> = reconciled
            .iter()
            .map(|e| (e.level, e.field("operation"), e.field("lock")))
            .collect();
        assert_eq!(
            operations,
            [
                (Level::DEBUG, Some("acquire"), Some(name)),
                (Level::DEBUG, Some("unlock"), Some(name)),
            ]
        );
        let unresolved = [("operation", "acquire"), ("result", "unresolved")];
        assert_eq!(
            metrics.counter("rlock_unknown_outcomes_total", &unresolved),
            0
        );
    });
}

#[test]
fn lock_names_are_labels_only_when_the_config_says_so() {
    let server = RedisServer::start();
    observed(|_, metrics| async move {
        for (lock_names, name) in [(true, "obs:named"), (false, "obs:unnamed")] {
            let client =
                client_with(&server, |config| config.metrics_lock_names = lock_names).await;
            let guard = client.lock(name).try_lock().await.expect("try_lock");
            guard.expect("free").unlock().await.expect("unlock");
        }
        let acquired = [("kind", "lock"), ("outcome", "acquired")];
        let named = [acquired[0], acquired[1], ("lock", "obs:named")];
        assert_eq!(metrics.counter("rlock_acquisitions_total", &named), 1);
        assert_eq!(metrics.counter("rlock_acquisitions_total", &acquired), 1);
        let waits = [("kind", "lock"), ("lock", "obs:named")];
        assert_eq!(
            metrics
                .histogram("rlock_acquire_wait_seconds", &waits)
                .len(),
            1
        );
        let unnamed = [acquired[0], acquired[1], ("lock", "obs:unnamed")];
        assert_eq!(metrics.counter("rlock_acquisitions_total", &unnamed), 0);
    });
}

/// Each kind names its own `kind` label: the non-reentrant kinds are counted apart from their
/// reentrant twins, and a refused re-entry is a failed acquisition of its kind.
#[test]
fn every_kind_is_counted_under_its_own_label() {
    let server = RedisServer::start();
    observed(|capture, metrics| async move {
        let client = client_with(&server, |_| {}).await;
        let owner = rlock_redisson::Owner::new();
        client
            .lock("obs:twins")
            .lock()
            .await
            .expect("lock")
            .unlock()
            .await
            .expect("unlock");
        let held = client
            .non_reentrant_lock("obs:nr")
            .with_owner(owner)
            .lock()
            .await
            .expect("lock");
        let refused = client
            .non_reentrant_lock("obs:nr")
            .with_owner(owner)
            .try_lock()
            .await;
        assert!(matches!(
            refused,
            Err(rlock_redisson::Error::ReentryRefused { .. })
        ));
        held.unlock().await.expect("unlock");
        let fair = client
            .non_reentrant_fair_lock("obs:nr-fair")
            .lock()
            .await
            .expect("lock");
        fair.unlock().await.expect("unlock");
        let group = client
            .group_lock("obs:group", ["a", "b"])
            .expect("strings encode")
            .lock()
            .await
            .expect("lock");
        group.unlock().await.expect("unlock");

        for (kind, acquired, failed) in [
            ("lock", 1, 0),
            ("non_reentrant_lock", 1, 1),
            ("non_reentrant_fair_lock", 1, 0),
            ("group_lock", 1, 0),
        ] {
            let count = |outcome| {
                metrics.counter(
                    "rlock_acquisitions_total",
                    &[("kind", kind), ("outcome", outcome)],
                )
            };
            assert_eq!(
                (count("acquired"), count("failed")),
                (acquired, failed),
                "{kind}"
            );
        }
        let kinds: Vec<String> = capture
            .spans("acquire")
            .iter()
            .filter_map(|span| span.field("kind").map(str::to_owned))
            .collect();
        assert_eq!(
            kinds,
            [
                "lock",
                "non_reentrant_lock",
                "non_reentrant_lock",
                "non_reentrant_fair_lock",
                "group_lock"
            ]
        );
    });
}

/// A runtime that shuts down with a dropped guard's release still pending (a program returning from
/// `main` without `client.close().await`): the hold stays in Redis, and the client says so, once,
/// in a warning that names the cure, and in a counter. With `close()` first, neither.
#[test]
fn a_runtime_shut_down_before_its_pending_releases_warns() {
    let server = RedisServer::start();
    for close in [false, true] {
        let name = format!("obs:abandoned:{close}");
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        let recorder = MemoryRecorder::default();
        tracing::subscriber::with_default(subscriber, || {
            metrics::with_local_recorder(&recorder, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    let client = client_with(&server, |_| {}).await;
                    let mut guards = Vec::new();
                    for i in 0..3 {
                        let guard = client.lock(format!("{name}:{i}")).lock().await;
                        guards.push(guard.expect("lock"));
                    }
                    // Their releases are spawned, and nothing runs them before the runtime stops.
                    drop(guards);
                    if close {
                        client.close().await;
                    }
                });
                drop(runtime);
            });
        });
        let warnings: Vec<Captured> = capture
            .events
            .lock()
            .iter()
            .filter(|e| e.level == Level::WARN && e.name.contains("close().await"))
            .cloned()
            .collect();
        let abandoned = recorder.counter("rlock_abandoned_releases_total", &[]);
        let mut redis = server.client().get_connection().expect("raw connection");
        let held: usize = (0..3)
            .filter(|i| redis::Commands::exists(&mut redis, format!("{name}:{i}")).expect("EXISTS"))
            .count();
        if close {
            assert_eq!((warnings.len(), abandoned, held), (0, 0, 0));
        } else {
            assert_eq!(warnings.len(), 1, "one warning per client: {warnings:?}");
            assert_eq!(abandoned, 3, "each abandoned release counted");
            assert_eq!(
                held, 3,
                "the abandoned holds stay until their leases run out"
            );
        }
    }
}
