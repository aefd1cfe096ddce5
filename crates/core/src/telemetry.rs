//! Tracing spans and metrics: every metric rlock records goes through this module.
//!
//! The README's "Observability" section lists each metric (name, type, labels, meaning) and the
//! span's fields; keep it in step with the names here.
//!
//! # Implementation details
//!
//! Metrics go through the [`metrics`](https://docs.rs/metrics) facade when the `metrics` feature is
//! on; without it the handles below are empty and every call compiles to nothing, so no other
//! module needs a `#[cfg]`. Label values are `&'static str` (bounded cardinality); the lock name is
//! a label only when [`Config::metrics_lock_names`] says so.
//!
//! The hot path (one acquisition) must cost nothing measurable when nobody listens: its span is a
//! `debug` span (disabled in a service that logs at `info`), its fields are plain integers and
//! static strings recorded with [`Span::record`], and its metrics are handles registered once per
//! client and kind (registering per call would build a label vector each time). Rare events (a lost
//! lease, a reconnect, a reconciled write) register their metric when they happen.
//!
//! [`Config::metrics_lock_names`]: crate::Config::metrics_lock_names

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::task::Poll;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::time::Instant;
use tracing::Span;

use crate::error::{Operation, Result};

/// What kind of object an acquisition, a hold or a lost lease belongs to: the `kind` label, which
/// each kind names itself ([`LockWire::label`](crate::engine::LockWire::label)): `lock`,
/// `fair_lock`,
/// `semaphore`, ... (the README's "Observability" section lists them).
pub(crate) type KindLabel = &'static str;

/// Why an acquisition made its latest attempt: the span's `path` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Path {
    /// The first try, before any wait.
    FirstTry = 1,
    /// The retry once the channel subscription was confirmed.
    Subscribed,
    /// Woken through the channel: an unlock message (or a re-subscription after a reconnect).
    Message,
    /// The bound the lock's TTL set ran out without a message.
    TtlExpiry,
    /// A poll: the subscription is not live (or the kind only polls).
    Polling,
    /// The last try, at the end of the wait.
    Deadline,
    /// Sent back to try by this client's local queue (a local holder released or lost its lease).
    Nudged,
    /// Passed the lock by a local holder, without a release (local hand-off).
    LocalHandOff,
}

impl Path {
    fn as_str(self) -> &'static str {
        match self {
            Self::FirstTry => "first_try",
            Self::Subscribed => "subscribed",
            Self::Message => "message",
            Self::TtlExpiry => "ttl_expiry",
            Self::Polling => "polling",
            Self::Deadline => "deadline",
            Self::Nudged => "nudged",
            Self::LocalHandOff => "local_handoff",
        }
    }

    #[cfg(test)]
    fn of(code: u8) -> Option<Self> {
        [
            Self::FirstTry,
            Self::Subscribed,
            Self::Message,
            Self::TtlExpiry,
            Self::Polling,
            Self::Deadline,
            Self::Nudged,
            Self::LocalHandOff,
        ]
        .into_iter()
        .find(|path| *path as u8 == code)
    }
}

/// How an acquisition ended: the `outcome` label and span field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Outcome {
    /// Still running, or its future was dropped.
    Cancelled = 0,
    Acquired,
    /// The wait ran out.
    Expired,
    /// An error.
    Failed,
}

impl Outcome {
    const COUNT: usize = 4;

    fn of<T>(result: &Result<Option<T>>) -> Self {
        match result {
            Ok(Some(_)) => Self::Acquired,
            Ok(None) => Self::Expired,
            Err(_) => Self::Failed,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::Acquired => "acquired",
            Self::Expired => "expired",
            Self::Failed => "failed",
        }
    }
}

/// One client's metric handles and settings, shared by its acquisitions and guards.
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    /// Whether per-lock metrics carry the lock's name as a `lock` label.
    lock_names: bool,
    /// Registered on first use of each kind, with the recorder in place then; a handful of kinds,
    /// so a list.
    kinds: RwLock<Vec<(KindLabel, Arc<KindMetrics>)>>,
}

/// The handles of one kind's per-acquisition metrics.
#[derive(Debug)]
struct KindMetrics {
    acquisitions: [sink::Counter; Outcome::COUNT],
    wait: sink::Histogram,
    holds: sink::Gauge,
    waiters: sink::Gauge,
    handoffs: sink::Counter,
    free_handoffs: sink::Counter,
    streaks: sink::Counter,
}

impl KindMetrics {
    fn register(kind: KindLabel) -> Self {
        let acquisitions = [
            Outcome::Cancelled,
            Outcome::Acquired,
            Outcome::Expired,
            Outcome::Failed,
        ]
        .map(|outcome| {
            sink::counter(
                ACQUISITIONS,
                &[("kind", kind), ("outcome", outcome.as_str())],
                None,
            )
        });
        Self {
            acquisitions,
            wait: sink::histogram(ACQUIRE_WAIT, &[("kind", kind)], None),
            holds: sink::gauge(HOLDS, &[("kind", kind)]),
            waiters: sink::gauge(WAITERS, &[("kind", kind)]),
            handoffs: sink::counter(LOCAL_HANDOFFS, &[("kind", kind)], None),
            free_handoffs: sink::counter(FREE_HANDOFFS, &[("kind", kind)], None),
            streaks: sink::counter(STREAKS, &[("kind", kind)], None),
        }
    }
}

const ACQUISITIONS: &str = "rlock_acquisitions_total";
const ACQUIRE_WAIT: &str = "rlock_acquire_wait_seconds";
const HOLDS: &str = "rlock_holds";
const WAITERS: &str = "rlock_waiters";
const LOCAL_HANDOFFS: &str = "rlock_local_handoffs_total";
const FREE_HANDOFFS: &str = "rlock_free_handoffs_total";
const STREAKS: &str = "rlock_handoff_streaks_total";
const LEASES_LOST: &str = "rlock_leases_lost_total";
const SUBSCRIPTIONS: &str = "rlock_subscriptions";
const RECONNECTS: &str = "rlock_subscriber_reconnects_total";
const RESUBSCRIPTIONS: &str = "rlock_resubscriptions_total";
const RENEWAL_ROUNDS: &str = "rlock_renewal_rounds_total";
const RENEWAL_ROUND_TIME: &str = "rlock_renewal_round_seconds";
const UNKNOWN_OUTCOMES: &str = "rlock_unknown_outcomes_total";
const ABANDONED: &str = "rlock_abandoned_releases_total";

impl Telemetry {
    /// The handles of a client whose configuration says whether lock names are labels.
    pub(crate) fn new(lock_names: bool) -> Self {
        Self {
            lock_names,
            kinds: Default::default(),
        }
    }

    fn kind(&self, kind: KindLabel) -> Arc<KindMetrics> {
        let registered = |kinds: &[(KindLabel, Arc<KindMetrics>)]| {
            kinds
                .iter()
                .find(|(label, _)| *label == kind)
                .map(|(_, metrics)| metrics.clone())
        };
        if let Some(metrics) = registered(&self.kinds.read()) {
            return metrics;
        }
        let mut kinds = self.kinds.write();
        registered(&kinds).unwrap_or_else(|| {
            let metrics = Arc::new(KindMetrics::register(kind));
            kinds.push((kind, metrics.clone()));
            metrics
        })
    }

    /// A guard of `kind` now holds (see [`Telemetry::released`]).
    pub(crate) fn held(&self, kind: KindLabel) {
        self.kind(kind).holds.increment(1.0);
    }

    /// A guard of `kind` is gone.
    pub(crate) fn released(&self, kind: KindLabel) {
        self.kind(kind).holds.decrement(1.0);
    }

    /// A lock of `kind` called `lock` passed from one local owner to another without a release.
    pub(crate) fn handed_off(&self, kind: KindLabel, lock: &str) {
        if self.lock_names {
            sink::counter(LOCAL_HANDOFFS, &[("kind", kind)], Some(lock)).increment(1);
        } else {
            self.kind(kind).handoffs.increment(1);
        }
    }

    /// A hand-off of `lock` was free (no script); `started` when it began a streak of them.
    pub(crate) fn lent(&self, kind: KindLabel, lock: &str, started: bool) {
        let named = |name| sink::counter(name, &[("kind", kind)], Some(lock));
        if self.lock_names {
            named(LOCAL_HANDOFFS).increment(1);
            named(FREE_HANDOFFS).increment(1);
            if started {
                named(STREAKS).increment(1);
            }
        } else {
            // One lookup of the kind's handles: this runs on every free hand-off.
            let metrics = self.kind(kind);
            metrics.handoffs.increment(1);
            metrics.free_handoffs.increment(1);
            if started {
                metrics.streaks.increment(1);
            }
        }
    }

    fn acquisition_ended(&self, kind: KindLabel, lock: &str, outcome: Outcome, waited: Duration) {
        if self.lock_names {
            let kind = ("kind", kind);
            sink::counter(
                ACQUISITIONS,
                &[kind, ("outcome", outcome.as_str())],
                Some(lock),
            )
            .increment(1);
            if outcome == Outcome::Acquired {
                sink::histogram(ACQUIRE_WAIT, &[kind], Some(lock)).record(waited);
            }
        } else {
            let metrics = self.kind(kind);
            metrics.acquisitions[outcome as usize].increment(1);
            if outcome == Outcome::Acquired {
                metrics.wait.record(waited);
            }
        }
    }
}

/// One acquisition, from the call to its outcome: its span (a `debug` span called `acquire`) and
/// its metrics. Dropped before [`Acquisition::track`] returned, it counts as cancelled.
#[derive(Debug)]
pub(crate) struct Acquisition<'a> {
    telemetry: &'a Telemetry,
    kind: KindLabel,
    name: &'a str,
    span: Span,
    started: Instant,
    attempts: AtomicU32,
    path: AtomicU8,
    /// Whether it is counted in the waiters gauge.
    waiting: AtomicBool,
    outcome: AtomicU8,
}

impl<'a> Acquisition<'a> {
    /// An acquisition of the `kind` called `name`, by `owner` (its hash field; `None` for kinds
    /// without owners), prepared to wait as `wait` says.
    pub(crate) fn start(
        telemetry: &'a Telemetry,
        kind: KindLabel,
        name: &'a str,
        owner: Option<&str>,
        wait: impl std::fmt::Debug,
    ) -> Self {
        let span = tracing::debug_span!(
            "acquire",
            lock = name,
            kind = kind,
            owner,
            wait = ?wait,
            attempts = 0u32,
            path = tracing::field::Empty,
            waited_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        Self {
            telemetry,
            kind,
            name,
            span,
            started: Instant::now(),
            attempts: AtomicU32::new(0),
            path: AtomicU8::new(0),
            waiting: AtomicBool::new(false),
            outcome: AtomicU8::new(Outcome::Cancelled as u8),
        }
    }

    /// Runs the acquisition `acquiring` inside the span (each poll, and its drop), and records how
    /// it ended.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `acquiring`; if dropped, the acquisition counts as cancelled.
    pub(crate) fn track<T, F>(&self, acquiring: F) -> Tracked<'_, 'a, F>
    where
        F: Future<Output = Result<Option<T>>>,
    {
        // A future of its own rather than an `async fn`, which would keep `acquiring` both as its
        // argument and as the future it awaits, and rather than `Instrument`, which would keep a
        // second handle on the span in every waiter's future.
        Tracked {
            acquiring: Some(acquiring),
            acquisition: self,
        }
    }

    /// The name of what is acquired.
    pub(crate) fn name(&self) -> &'a str {
        self.name
    }

    /// The loop makes an attempt, for this reason.
    pub(crate) fn attempt(&self, path: Path) {
        let attempts = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        self.path.store(path as u8, Ordering::Relaxed);
        let _ = self
            .span
            .record("attempts", attempts)
            .record("path", path.as_str());
    }

    /// The latest attempt was answered by a local hand-off.
    pub(crate) fn handed_off(&self) {
        self.path.store(Path::LocalHandOff as u8, Ordering::Relaxed);
        let _ = self.span.record("path", Path::LocalHandOff.as_str());
    }

    /// The acquisition waits (behind a local queue, or for the lock): counted in the waiters gauge
    /// until it ends.
    pub(crate) fn waiting(&self) {
        if !self.waiting.swap(true, Ordering::Relaxed) {
            self.telemetry.kind(self.kind).waiters.increment(1.0);
        }
    }

    /// The reason of the latest attempt, if any.
    #[cfg(test)]
    pub(crate) fn path(&self) -> Option<Path> {
        Path::of(self.path.load(Ordering::Relaxed))
    }

    /// How many attempts it made.
    #[cfg(test)]
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }
}

pin_project_lite::pin_project! {
    /// An acquisition's future, polled and dropped inside its span (as `Instrumented` does), that
    /// records its outcome when it is done (see [`Acquisition::track`]).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct Tracked<'t, 'a, F> {
        // `None` only while it is dropped, inside the span.
        #[pin]
        acquiring: Option<F>,
        acquisition: &'t Acquisition<'a>,
    }

    impl<'t, 'a, F> PinnedDrop for Tracked<'t, 'a, F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            let _entered = this.acquisition.span.enter();
            this.acquiring.set(None);
        }
    }
}

impl<T, F: Future<Output = Result<Option<T>>>> Future for Tracked<'_, '_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(acquiring) = this.acquiring.as_pin_mut() else {
            // Only while it is dropped: nothing polls it then.
            return Poll::Pending;
        };
        let polled = {
            let _entered = this.acquisition.span.enter();
            acquiring.poll(cx)
        };
        if let Poll::Ready(result) = &polled {
            this.acquisition
                .outcome
                .store(Outcome::of(result) as u8, Ordering::Relaxed);
        }
        polled
    }
}

impl Drop for Acquisition<'_> {
    fn drop(&mut self) {
        let waited = self.started.elapsed();
        let outcome = match self.outcome.load(Ordering::Relaxed) {
            code if code == Outcome::Acquired as u8 => Outcome::Acquired,
            code if code == Outcome::Expired as u8 => Outcome::Expired,
            code if code == Outcome::Failed as u8 => Outcome::Failed,
            _ => Outcome::Cancelled,
        };
        let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .span
            .record("waited_ms", waited_ms)
            .record("outcome", outcome.as_str());
        if *self.path.get_mut() == 0 {
            // Ended before any attempt (e.g. its wait in the local queue ran out).
            let _ = self.span.record("path", "none");
        }
        if *self.waiting.get_mut() {
            self.telemetry.kind(self.kind).waiters.decrement(1.0);
        }
        self.telemetry
            .acquisition_ended(self.kind, self.name, outcome, waited);
    }
}

/// The metrics of one client's watchdog: one renewal round after another.
#[derive(Debug)]
pub(crate) struct Renewals {
    renewed: sink::Counter,
    failed: sink::Counter,
    time: sink::Histogram,
}

impl Renewals {
    pub(crate) fn register() -> Self {
        Self {
            renewed: sink::counter(RENEWAL_ROUNDS, &[("outcome", "renewed")], None),
            failed: sink::counter(RENEWAL_ROUNDS, &[("outcome", "failed")], None),
            time: sink::histogram(RENEWAL_ROUND_TIME, &[], None),
        }
    }

    /// A round that renewed `locks` locks took `took`; `ok` unless some batch failed (each failed
    /// batch has logged its own warning).
    pub(crate) fn round(&self, locks: usize, ok: bool, took: Duration) {
        self.time.record(took);
        if ok { &self.renewed } else { &self.failed }.increment(1);
        tracing::debug!(
            locks,
            ok,
            took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "renewal round"
        );
    }
}

/// Why a watchdog hold was declared lost.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LostBecause {
    /// A renewal found this client's field gone from the lock.
    Gone,
    /// No renewal was confirmed for a whole lease.
    NotRenewed,
}

/// The watchdog declared the lease of `lock` (of `kind`) lost. `lock_names`: whether the lock's
/// name is a label.
pub(crate) fn lease_lost(kind: KindLabel, lock: &str, because: LostBecause, lock_names: bool) {
    let reason = match because {
        LostBecause::Gone => "gone",
        LostBecause::NotRenewed => "not_renewed",
    };
    tracing::warn!(lock, kind = kind, reason, "lease lost");
    let labels = [("kind", kind), ("reason", reason)];
    sink::counter(LEASES_LOST, &labels, lock_names.then_some(lock)).increment(1);
}

/// The number of channel subscriptions the server has confirmed and this client still wants.
#[derive(Debug)]
pub(crate) struct Subscriptions(sink::Gauge);

impl Default for Subscriptions {
    fn default() -> Self {
        Self(sink::gauge(SUBSCRIPTIONS, &[]))
    }
}

impl Subscriptions {
    /// One more channel is live.
    pub(crate) fn live(&self) {
        self.0.increment(1.0);
    }

    /// One channel stopped being live.
    pub(crate) fn gone(&self) {
        self.0.decrement(1.0);
    }
}

/// The subscriber connection came back after it was lost; `channels` channels are subscribed again.
pub(crate) fn reconnected(url: &str, channels: usize) {
    tracing::info!(url, channels, "subscriber reconnected; re-subscribing");
    sink::counter(RECONNECTS, &[], None).increment(1);
    resubscribing(channels);
}

/// The server dropped the subscription to `channel` (a slot moved): it is subscribed again.
pub(crate) fn subscription_dropped(channel: &str) {
    tracing::debug!(
        channel,
        "server dropped a wanted subscription; subscribing again"
    );
    resubscribing(1);
}

fn resubscribing(channels: usize) {
    sink::counter(RESUBSCRIPTIONS, &[], None)
        .increment(u64::try_from(channels).unwrap_or(u64::MAX));
}

/// What a write whose outcome was not known is reconciled as: the `operation` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reconciles {
    /// An acquire undone (its reply was lost, its caller left, or no replica acknowledged it).
    Acquire,
    /// A local hand-off re-sent with the same request id.
    HandOff,
    /// An unlock re-sent with the same request id.
    Unlock,
    /// A write nothing can undo whose caller left: its reply went to the handler that gives back
    /// what it took.
    Orphaned(Operation),
}

impl Reconciles {
    fn as_str(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::HandOff => "hand_off",
            Self::Unlock => "unlock",
            Self::Orphaned(operation) => match operation {
                Operation::Connect => "connect",
                Operation::Acquire => "acquire",
                Operation::Subscribe => "subscribe",
                Operation::Unlock => "unlock",
                Operation::ForceUnlock => "force_unlock",
                Operation::Renew => "renew",
                Operation::Query => "query",
                Operation::Release => "release",
                Operation::CountDown => "count_down",
                Operation::Update => "update",
            },
        }
    }
}

/// A background release or undo was dropped unfinished: its runtime shut down first. `first`: the
/// client's first such task, which says what to do about it.
pub(crate) fn abandoned(first: bool) {
    if first {
        tracing::warn!(
            "the runtime shut down before rlock's pending releases ran: their holds stay until their \
             leases run out; call `client.close().await` before the program exits"
        );
    }
    sink::counter(ABANDONED, &[], None).increment(1);
}

/// A write of `lock` whose outcome was not known has been reconciled (`resolved`: its outcome is
/// now settled) or given up on (it expires with its lease, or stays unknown).
pub(crate) fn reconciled(what: Reconciles, lock: &str, resolved: bool) {
    let operation = what.as_str();
    if resolved {
        tracing::debug!(
            lock,
            operation,
            "reconciled a write whose outcome was unknown"
        );
    } else {
        tracing::warn!(
            lock,
            operation,
            "could not reconcile a write whose outcome was unknown"
        );
    }
    let result = if resolved { "resolved" } else { "unresolved" };
    sink::counter(
        UNKNOWN_OUTCOMES,
        &[("operation", operation), ("result", result)],
        None,
    )
    .increment(1);
}

/// Label names and values, all static (the lock name, when a label, comes apart).
type Labels<'a> = &'a [(&'static str, &'static str)];

/// The metric handles: the `metrics` crate's, registered with the current recorder.
#[cfg(feature = "metrics")]
mod sink {
    use std::time::Duration;

    use super::Labels;

    pub(super) use metrics::{Counter, Gauge};

    /// A histogram of durations, in seconds.
    #[derive(Debug)]
    pub(super) struct Histogram(metrics::Histogram);

    impl Histogram {
        pub(super) fn record(&self, duration: Duration) {
            self.0.record(duration.as_secs_f64());
        }
    }

    fn key(name: &'static str, labels: Labels<'_>, lock: Option<&str>) -> metrics::Key {
        let labels = labels
            .iter()
            .map(|&(key, value)| metrics::Label::from_static_parts(key, value))
            .chain(lock.map(|lock| metrics::Label::new("lock", lock.to_owned())))
            .collect::<Vec<_>>();
        metrics::Key::from_parts(name, labels)
    }

    /// What recorders that filter by target or level see of every rlock metric.
    static METADATA: metrics::Metadata<'static> =
        metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

    pub(super) fn counter(name: &'static str, labels: Labels<'_>, lock: Option<&str>) -> Counter {
        let key = key(name, labels, lock);
        metrics::with_recorder(|recorder| recorder.register_counter(&key, &METADATA))
    }

    pub(super) fn gauge(name: &'static str, labels: Labels<'_>) -> Gauge {
        let key = key(name, labels, None);
        metrics::with_recorder(|recorder| recorder.register_gauge(&key, &METADATA))
    }

    pub(super) fn histogram(
        name: &'static str,
        labels: Labels<'_>,
        lock: Option<&str>,
    ) -> Histogram {
        let key = key(name, labels, lock);
        Histogram(metrics::with_recorder(|recorder| {
            recorder.register_histogram(&key, &METADATA)
        }))
    }
}

/// Without the `metrics` feature: handles that do nothing.
#[cfg(not(feature = "metrics"))]
mod sink {
    use std::time::Duration;

    use super::Labels;

    #[derive(Debug)]
    pub(super) struct Counter;

    impl Counter {
        pub(super) fn increment(&self, _: u64) {}
    }

    #[derive(Debug)]
    pub(super) struct Gauge;

    impl Gauge {
        pub(super) fn increment(&self, _: f64) {}
        pub(super) fn decrement(&self, _: f64) {}
    }

    #[derive(Debug)]
    pub(super) struct Histogram;

    impl Histogram {
        pub(super) fn record(&self, _: Duration) {}
    }

    pub(super) fn counter(_: &'static str, _: Labels<'_>, _: Option<&str>) -> Counter {
        Counter
    }

    pub(super) fn gauge(_: &'static str, _: Labels<'_>) -> Gauge {
        Gauge
    }

    pub(super) fn histogram(_: &'static str, _: Labels<'_>, _: Option<&str>) -> Histogram {
        Histogram
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicIsize;
    use std::task::Context;

    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;

    /// A subscriber that only counts how deep the current thread is inside spans.
    #[derive(Clone, Default)]
    struct Depth(Arc<AtomicIsize>);

    impl Subscriber for Depth {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {
            let _ = self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn exit(&self, _: &Id) {
            let _ = self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A future that never completes and notes, when dropped, how deep inside spans it was.
    struct NotesItsDrop {
        depth: Arc<AtomicIsize>,
        dropped_at: Arc<AtomicIsize>,
    }

    impl Future for NotesItsDrop {
        type Output = Result<Option<()>>;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Pending
        }
    }

    impl Drop for NotesItsDrop {
        fn drop(&mut self) {
            self.dropped_at
                .store(self.depth.load(Ordering::SeqCst), Ordering::SeqCst);
        }
    }

    #[test]
    fn a_tracked_acquisition_is_polled_and_dropped_inside_its_span_and_counts_as_cancelled() {
        let depth = Depth::default();
        let dropped_at = Arc::new(AtomicIsize::new(-1));
        tracing::subscriber::with_default(depth.clone(), || {
            let telemetry = Telemetry::default();
            let acquisition = Acquisition::start(&telemetry, "lock", "t", None, "Forever");
            let mut tracked = Box::pin(acquisition.track(NotesItsDrop {
                depth: depth.0.clone(),
                dropped_at: dropped_at.clone(),
            }));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            assert!(tracked.as_mut().poll(&mut cx).is_pending());
            assert_eq!(
                depth.0.load(Ordering::SeqCst),
                0,
                "the span is left after a poll"
            );
            drop(tracked);
            assert_eq!(
                acquisition.outcome.load(Ordering::Relaxed),
                Outcome::Cancelled as u8
            );
        });
        assert_eq!(
            dropped_at.load(Ordering::SeqCst),
            1,
            "the acquisition's future was dropped inside its span"
        );
    }
}
