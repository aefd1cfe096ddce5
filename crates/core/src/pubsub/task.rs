//! The task that owns the subscriber connection: it connects (again, with backoff, after a loss),
//! keeps the server's subscriptions equal to the registry's desired set one batch at a time (the
//! diff is [`SubscriptionTracker`]'s), dispatches every message to its channel's waiters, pings the
//! connection, and wakes every waiter whenever messages may have been missed.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::link::{Change, Endpoint, Event, Events, Link};
use super::registry::Registry;
use super::tracker::{Batch, SubscriptionTracker};
use crate::config::{Config, redact};
use crate::connection::{Commands, Deployment, Rotating, refused};
use crate::telemetry;

/// The shortest and longest pause between reconnect attempts.
const RECONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(2));

/// The task that owns the subscriber connection.
pub(super) struct SubscriberTask {
    /// The client's command connections, marked suspect when this connection is lost.
    commands: Commands,
    registry: Arc<Registry>,
    endpoint: Endpoint,
    /// Where each connect gets fresh credentials, if it does: then the endpoint is made anew.
    rotating: Option<Rotating>,
    deployment: Deployment,
    sharded: bool,
    connect_timeout: Duration,
    keepalive: Keepalive,
    url: String,
}

/// How the subscriber connection is kept honest (Redisson's `pingConnectionInterval`): a subscriber
/// sends nothing while its channels do not change, so a connection cut without a reset (a
/// partition, a half-open TCP connection, a proxy that stopped forwarding) would stay "live" and
/// deaf for good. Every `interval` (zero: never) each link is sent a `PING`; one that is not
/// answered within `timeout` declares the connection dead: waiters are woken, every channel begins
/// a new live period (which ends the free hand-offs that relied on it, see
/// [`Listening`](super::Listening)), and the connection is made anew and re-subscribed.
#[derive(Clone, Copy, Debug)]
struct Keepalive {
    interval: Duration,
    timeout: Duration,
}

/// How serving one connection ended.
enum Served {
    /// The client shut down.
    ShutDown,
    /// The connection broke (or a subscription failed on it): connect again.
    Lost,
    /// The server refuses to subscribe (`NOPERM`, `unknown command`): waiters poll for good.
    Refused(redis::RedisError),
}

impl SubscriberTask {
    /// The task for `config`'s subscriber, serving `registry`; a lost connection marks `commands`'
    /// pooled connections as suspect.
    pub(super) fn new(
        config: &Config,
        deployment: Deployment,
        sharded: bool,
        commands: Commands,
        registry: Arc<Registry>,
    ) -> redis::RedisResult<Self> {
        Ok(Self {
            commands,
            registry,
            endpoint: Endpoint::of(config, deployment, sharded)?,
            rotating: Rotating::of(config),
            deployment,
            sharded,
            connect_timeout: config.connect_timeout,
            keepalive: Keepalive {
                interval: config.ping_connection_interval,
                timeout: config.command_timeout,
            },
            url: redact(&config.url),
        })
    }

    pub(super) async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = RECONNECT_BACKOFF.0;
        // Whether a connection was lost (or never made): the next one is a reconnect.
        let mut reconnecting = false;
        loop {
            let connect = tokio::time::timeout(self.connect_timeout, async {
                if let Some(rotating) = &self.rotating {
                    self.endpoint =
                        Endpoint::of(&rotating.config().await?, self.deployment, self.sharded)?;
                }
                self.endpoint.connect().await
            });
            let connected = tokio::select! {
                () = shutdown.cancelled() => return,
                connected = connect => connected,
            };
            match connected {
                Ok(Ok((link, events))) => {
                    backoff = RECONNECT_BACKOFF.0;
                    if reconnecting {
                        telemetry::reconnected(&self.url, self.registry.channel_count());
                    } else {
                        tracing::debug!(url = %self.url, "subscriber connected");
                    }
                    match self.serve(link, events, &shutdown).await {
                        // A connection that ends as the client shuts down was not lost.
                        _ if shutdown.is_cancelled() => return,
                        Served::ShutDown => return,
                        Served::Refused(e) => {
                            tracing::warn!(
                                url = %self.url,
                                error = %e,
                                "the server refuses subscriptions: waiters poll (every 25 ms up \
                                 to 1 s, and at the latest when the lock's TTL ends) instead of \
                                 being woken by unlock messages"
                            );
                            self.registry.refuse();
                            return shutdown.cancelled().await;
                        }
                        Served::Lost => self.commands.connection_failed(),
                    }
                    tracing::warn!(url = %self.url, "subscriber connection lost; reconnecting");
                }
                Ok(Err(e)) => {
                    tracing::warn!(url = %self.url, error = %e, "subscriber cannot connect")
                }
                Err(_) => tracing::warn!(url = %self.url, "subscriber connect timed out"),
            }
            reconnecting = true;
            self.registry.connection_lost();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(RECONNECT_BACKOFF.1);
        }
    }

    /// Serves one connection until it breaks, the client shuts down or the server refuses to
    /// subscribe.
    async fn serve(&self, link: Link, mut events: Events, shutdown: &CancellationToken) -> Served {
        let mut server = SubscriptionTracker::default();
        let mut change: Option<Change> = None;
        let Keepalive { interval, timeout } = self.keepalive;
        let mut next_ping = Instant::now() + interval;
        let mut ping: Option<Change> = None;
        loop {
            if change.is_none() {
                change = self.registry.diff(&mut server).map(|batch| match batch {
                    Batch::Unsubscribe(stale) => link.unsubscribe(owned(&stale)),
                    Batch::Subscribe(missing) => link.subscribe(owned(&missing)),
                });
            }
            tokio::select! {
                // Shutdown first: the connection may close because the client is shutting down.
                biased;
                () = shutdown.cancelled() => return Served::ShutDown,
                event = events.next() => match event {
                    Some(Event::Message { channel, payload }) => self.registry.dispatch(&channel, &payload),
                    Some(Event::Interrupted) => self.registry.wake_all(),
                    Some(Event::Unsubscribed(channel)) => {
                        if server.dropped(&channel, self.registry.wants(&channel)) {
                            telemetry::subscription_dropped(&channel);
                            self.registry.lost(&channel);
                        }
                    }
                    None => return Served::Lost,
                },
                result = async {
                    match change.as_mut() {
                        Some(pending) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if change.is_some() => {
                    change = None;
                    let subscribed = server.batch_done();
                    match result {
                        Err(e) if refused(&e) => return Served::Refused(e),
                        Err(e) => {
                            tracing::warn!(error = %e, "subscription change failed");
                            return Served::Lost;
                        }
                        Ok(()) => {}
                    }
                    self.registry.confirm(&subscribed);
                }
                () = self.registry.changed(), if change.is_none() => {}
                () = tokio::time::sleep_until(next_ping), if ping.is_none() && !interval.is_zero() => {
                    let pinging = link.ping();
                    ping = Some(Box::pin(async move {
                        match tokio::time::timeout(timeout, pinging).await {
                            Ok(pinged) => pinged,
                            Err(_) => Err(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))),
                        }
                    }));
                }
                pinged = async {
                    match ping.as_mut() {
                        Some(pending) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if ping.is_some() => {
                    ping = None;
                    next_ping = Instant::now() + interval;
                    if let Err(e) = pinged {
                        tracing::warn!(
                            url = %self.url,
                            error = %e,
                            "the subscriber connection did not answer PING in time; declaring it dead"
                        );
                        return Served::Lost;
                    }
                }
            }
        }
    }
}

/// A batch's channel names as the connection's commands take them (the tracker shares the
/// registry's names; a command needs its own copies, for as long as it is sent).
fn owned(names: &[Arc<str>]) -> Vec<String> {
    names.iter().map(|name| name.to_string()).collect()
}
