//! Listening to a lock's wake-up channel from the outside: what a monitor (`rlock watch`) needs to
//! count the releases published there, on the client's own subscriber connection (so in every
//! topology, sharded or not, exactly as the client's waiters would listen).

use std::sync::Arc;

use crate::locks::lock::Lock;
use crate::locks::lock_kind::LockKind;
use crate::pubsub::{Registry, Subscription};

/// A subscription to the channel a lock's waiters are woken on, counting the messages it receives
/// (each one a release, or a forced unlock, published by a client of either side). Dropping it ends
/// the subscription, unless a waiter of the same client still listens there.
///
/// Only releases that are published can be seen: a spin lock publishes nothing, and neither does an
/// rlock release handed straight to another task of the same process (local hand-off).
#[derive(Debug)]
pub struct ChannelListener {
    channel: Arc<str>,
    registry: Arc<Registry>,
    subscription: Subscription,
}

impl ChannelListener {
    /// The channel listened to.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// How many messages the channel has received since this client subscribed it (received by
    /// this client: shared with its own waiters on the channel, if any).
    pub fn messages(&self) -> u64 {
        self.registry.messages(&self.channel)
    }

    /// Whether the server currently delivers the channel's messages to this client.
    pub fn is_live(&self) -> bool {
        self.subscription.is_live()
    }

    /// Completes once the server has confirmed the subscription: messages published earlier are
    /// not counted. It also completes where the server refuses subscriptions (an ACL, a proxy
    /// without pub/sub); [`ChannelListener::is_live`] then stays false.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn confirmed(&self) {
        self.subscription.confirmed().await;
    }
}

impl<K: LockKind> Lock<K> {
    /// The channel a waiter whose hash field is `field` (`<uuid>:<owner>`) is woken on: the lock's
    /// one channel for every kind but the fair lock, whose waiters each have their own (the field is
    /// then part of the name); `None` for the spin lock, whose waiters poll.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock_redisson::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// let client = rlock_redisson::Client::connect(&url).await?;
    /// let lock = client.lock("orders");
    /// assert_eq!(lock.channel_of("").as_deref(), Some("redisson_lock__channel:{orders}"));
    /// let fair = client.fair_lock("orders");
    /// let field = "3b241101-e2bb-4255-8caf-4136c566a962:57";
    /// assert_eq!(
    ///     fair.channel_of(field).as_deref(),
    ///     Some("redisson_lock__channel:{orders}:3b241101-e2bb-4255-8caf-4136c566a962:57")
    /// );
    /// assert_eq!(client.spin_lock("orders").channel_of(""), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn channel_of(&self, field: &str) -> Option<String> {
        let (channel, _) = self.kind().channel(field)?;
        Some(channel.to_string())
    }

    /// Subscribes to the channel of [`Lock::channel_of`]`(field)` and counts its messages; `None`
    /// for the spin lock. The subscription is sent in the background: see
    /// [`ChannelListener::confirmed`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock_redisson::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// let client = rlock_redisson::Client::connect(&url).await?;
    /// let lock = client.lock("doc:listener:example");
    /// let listener = lock.listen("").expect("a reentrant lock has a channel");
    /// listener.confirmed().await;
    /// // The release publishes on the channel (another client's too).
    /// other_client_lock_and_unlock(&url).await?;
    /// # async fn other_client_lock_and_unlock(url: &str) -> rlock_redisson::Result<()> {
    /// #     let other = rlock_redisson::Client::connect(url).await?;
    /// #     other.lock("doc:listener:example").lock().await?.unlock().await
    /// # }
    /// # for _ in 0..100 {
    /// #     if listener.messages() == 1 { break; }
    /// #     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    /// # }
    /// assert_eq!(listener.messages(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn listen(&self, field: &str) -> Option<ChannelListener> {
        let (channel, rule) = self.kind().channel(field)?;
        let channel = channel.into_owned();
        let registry = self.services().subscriber.registry().clone();
        let subscription = registry.subscribe(channel.clone(), rule);
        Some(ChannelListener {
            channel,
            registry,
            subscription,
        })
    }
}
