//! The subscriber's connection, per topology: where it connects ([`Endpoint`]), the half that
//! subscribes ([`Link`]) and the stream of what the server says ([`Event`]s).
//!
//! A single server or a Sentinel-named master is one RESP2 pub/sub connection (the master resolved
//! again on every connect); a cluster is redis' RESP3 cluster connection, which sends each
//! `SUBSCRIBE`/`SSUBSCRIBE` to the node owning the channel's slot, follows `MOVED` and re-subscribes
//! after reconnects by itself, and reports messages, interruptions and dropped subscriptions as
//! pushes. The task above sees the same [`Link`] and [`Event`]s in every topology.

#[cfg(feature = "cluster")]
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;

use crate::config::Config;
#[cfg(feature = "cluster")]
use crate::connection::cluster_builder;
#[cfg(feature = "sentinel")]
use crate::connection::sentinel_client;
use crate::connection::{Deployment, node_client};

pub(super) type Change = Pin<Box<dyn Future<Output = redis::RedisResult<()>> + Send>>;

/// Where the subscriber connects.
pub(super) enum Endpoint {
    Node(Box<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(Box<redis::sentinel::SentinelClient>),
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterEndpoint>),
}

/// How to reach the cluster, and how to subscribe there.
#[cfg(feature = "cluster")]
pub(super) struct ClusterEndpoint {
    config: Config,
    sharded: bool,
}

impl Endpoint {
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(super) fn of(
        config: &Config,
        deployment: Deployment,
        sharded: bool,
    ) -> redis::RedisResult<Self> {
        Ok(match deployment {
            Deployment::Node => Self::Node(Box::new(node_client(config, &config.url)?)),
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel => Self::Sentinel(Box::new(sentinel_client(config)?)),
            #[cfg(feature = "cluster")]
            Deployment::Cluster => Self::Cluster(Box::new(ClusterEndpoint {
                config: config.clone(),
                sharded,
            })),
        })
    }

    /// Opens the link and the stream of its events.
    pub(super) async fn connect(&mut self) -> redis::RedisResult<(Link, Events)> {
        let node = |pubsub: redis::aio::PubSub| {
            let (sink, messages) = pubsub.split();
            let events = messages.map(|m| Event::Message {
                channel: m.get_channel_name().to_owned(),
                payload: m.get_payload_bytes().to_vec(),
            });
            (Link::Node(sink), Box::pin(events) as Events)
        };
        match self {
            Self::Node(client) => Ok(node(client.get_async_pubsub().await?)),
            // Resolve the master anew on every connect: it may have failed over.
            #[cfg(feature = "sentinel")]
            Self::Sentinel(sentinel) => Ok(node(
                sentinel
                    .async_get_client()
                    .await?
                    .get_async_pubsub()
                    .await?,
            )),
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => {
                // Messages arrive as RESP3 pushes; each connection gets a channel of its own.
                let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
                let conn = cluster_builder(&cluster.config)
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(sender)
                    .build()?
                    .get_async_connection()
                    .await?;
                let events =
                    tokio_stream_of(pushes).filter_map(|push| async move { Event::of_push(push) });
                Ok((
                    Link::Cluster {
                        conn,
                        sharded: cluster.sharded,
                    },
                    Box::pin(events),
                ))
            }
        }
    }
}

/// An unbounded receiver as a stream.
#[cfg(feature = "cluster")]
fn tokio_stream_of<T: Send + 'static>(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// What the link reports.
// Only the cluster link reports interruptions and dropped subscriptions.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(super) enum Event {
    /// A message on a channel.
    Message { channel: String, payload: Vec<u8> },
    /// The cluster connection lost a node connection; it re-subscribes by itself, but messages may
    /// have been missed meanwhile.
    Interrupted,
    /// The server dropped a subscription (a sharded channel whose slot moved, or our own unsubscribe).
    Unsubscribed(String),
}

impl Event {
    #[cfg(feature = "cluster")]
    fn of_push(push: redis::PushInfo) -> Option<Self> {
        use redis::PushKind;
        let text = |value: &redis::Value| match value {
            redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
            redis::Value::SimpleString(text) => Some(text.clone()),
            _ => None,
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                let channel = text(push.data.first()?)?;
                let payload = match push.data.get(1)? {
                    redis::Value::BulkString(bytes) => bytes.clone(),
                    other => text(other)?.into_bytes(),
                };
                Some(Self::Message { channel, payload })
            }
            PushKind::Disconnection => Some(Self::Interrupted),
            PushKind::Unsubscribe | PushKind::SUnsubscribe => {
                Some(Self::Unsubscribed(text(push.data.first()?)?))
            }
            _ => None,
        }
    }
}

pub(super) type Events = Pin<Box<dyn futures::Stream<Item = Event> + Send>>;

/// The subscribing half of a connection.
pub(super) enum Link {
    Node(redis::aio::PubSubSink),
    #[cfg(feature = "cluster")]
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        sharded: bool,
    },
}

impl Link {
    /// A `PING` on the link: on every node that holds subscriptions, for a cluster.
    pub(super) fn ping(&self) -> Change {
        match self {
            Self::Node(sink) => {
                let mut sink = sink.clone();
                Box::pin(async move { sink.ping::<redis::Value>().await.map(drop) })
            }
            #[cfg(feature = "cluster")]
            Self::Cluster { conn, .. } => {
                use redis::cluster_routing::{
                    MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo,
                };
                let mut conn = conn.clone();
                let every_node = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                Box::pin(async move {
                    conn.route_command(redis::cmd("PING"), every_node)
                        .await
                        .map(drop)
                })
            }
        }
    }

    pub(super) fn subscribe(&self, channels: Vec<String>) -> Change {
        self.change(channels, true)
    }

    pub(super) fn unsubscribe(&self, channels: Vec<String>) -> Change {
        self.change(channels, false)
    }

    fn change(&self, channels: Vec<String>, subscribe: bool) -> Change {
        match self {
            Self::Node(sink) => {
                let mut sink = sink.clone();
                Box::pin(async move {
                    if subscribe {
                        sink.subscribe(channels).await
                    } else {
                        sink.unsubscribe(channels).await
                    }
                })
            }
            #[cfg(feature = "cluster")]
            Self::Cluster { conn, sharded } => {
                let (mut conn, sharded) = (conn.clone(), *sharded);
                Box::pin(async move {
                    // One command per slot: a sharded command's channels must share a slot.
                    for batch in by_slot(channels, sharded) {
                        match (sharded, subscribe) {
                            (true, true) => conn.ssubscribe(batch).await?,
                            (true, false) => conn.sunsubscribe(batch).await?,
                            (false, true) => conn.subscribe(batch).await?,
                            (false, false) => conn.unsubscribe(batch).await?,
                        }
                    }
                    Ok(())
                })
            }
        }
    }
}

/// `channels` grouped by cluster slot when `sharded`, else in one group.
#[cfg(feature = "cluster")]
fn by_slot(channels: Vec<String>, sharded: bool) -> Vec<Vec<String>> {
    if !sharded {
        return vec![channels];
    }
    let mut groups: HashMap<redis::cluster_routing::Slot, Vec<String>> = HashMap::new();
    for channel in channels {
        groups
            .entry(redis::cluster_routing::Slot::for_key(&channel))
            .or_default()
            .push(channel);
    }
    groups.into_values().collect()
}
