//! What every synchronizer handle (a semaphore, a latch) is: a named object on the client's
//! services, with the channel its waiters listen on.

use std::borrow::Cow;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use redis::Script;

use super::admission::admit;
use super::detached::Replicas;
use super::lock_wire::Attempt;
use super::lock_wire::degraded_poll;
use super::patience::Patience;
use super::update::update;
use super::wait::{Listen, Polls, wait_on};
use crate::connection::Queueing;
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;
use crate::services::Services;
use crate::telemetry::{Acquisition, KindLabel};
use crate::wake::WakeRule;

/// A named Redis object with a wake-up channel: the state every synchronizer handle shares.
#[derive(Clone)]
pub(crate) struct Object {
    pub(crate) services: Arc<Services>,
    pub(crate) name: Arc<str>,
    pub(crate) channel: Arc<str>,
    /// What the object is, in words, for errors ("semaphore", "count-down latch").
    what: &'static str,
}

impl Object {
    pub(crate) fn new(
        services: Arc<Services>,
        what: &'static str,
        name: String,
        channel: String,
    ) -> Self {
        Self {
            services,
            name: name.into(),
            channel: channel.into(),
            what,
        }
    }

    /// What the object's errors are about: its kind, in words, and its name.
    pub(crate) fn subject(&self) -> Subject<'_> {
        Subject::new(self.what, &self.name)
    }

    /// Refuses an empty name before anything is sent.
    pub(crate) fn check_name(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "a {} name must not be empty",
                self.what
            )));
        }
        Ok(())
    }

    /// The integer stored at the name (`GET`): 0 when there is none; the read waits for an
    /// in-flight slot as `queueing` says.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub(crate) async fn read_integer<T: FromStr + Default>(&self, queueing: Queueing) -> Result<T> {
        self.check_name()?;
        let value: Option<String> = self
            .services
            .commands
            .query_queueing(
                Operation::Query,
                self.subject(),
                redis::cmd("GET").arg(&*self.name),
                queueing,
            )
            .await?;
        value.map_or(Ok(T::default()), |value| {
            value
                .parse()
                .map_err(|_| Error::unexpected(Operation::Query, self.subject(), value))
        })
    }

    /// Runs a set-like write on the object (see [`update`]).
    pub(crate) async fn update<T: redis::FromRedisValue>(
        &self,
        call: ScriptCall,
        replicas: Replicas,
    ) -> Result<T> {
        update(&self.services, self.subject(), call, replicas).await
    }

    /// Deletes the object: the key at its name and `others` (`DEL`); returns whether any existed.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the keys may or may not have been deleted.
    pub(crate) async fn delete(&self, others: &[&str]) -> Result<bool> {
        self.check_name()?;
        let deleted: i64 = self
            .services
            .commands
            .query(
                Operation::Update,
                self.subject(),
                redis::cmd("DEL").arg(&*self.name).arg(others),
            )
            .await?;
        Ok(deleted > 0)
    }

    /// A call of `script` with the name and the channel as its keys.
    pub(crate) fn call(&self, script: &'static LazyLock<Script>) -> ScriptCall {
        ScriptCall::new(script).key(&*self.name).key(&*self.channel)
    }

    /// An acquisition of the object (of `kind`), prepared to wait as `wait` says.
    pub(crate) fn acquisition(&self, kind: KindLabel, patience: Patience) -> Acquisition<'_> {
        Acquisition::start(&self.services.telemetry, kind, &self.name, None, patience)
    }

    /// Where the object's waiters listen, woken as `rule` says, for `acquisition`.
    pub(crate) fn listen<'a>(
        &'a self,
        rule: WakeRule,
        acquisition: &'a Acquisition<'a>,
    ) -> Listen<'a> {
        Listen {
            channel: Some((Cow::Borrowed(&self.channel), rule)),
            hooks: &Polls(degraded_poll),
            acquisition,
        }
    }

    /// Waits on the object ([`wait_on`], listening as `listen` says) until an attempt that `write`
    /// makes acquires, or `patience` runs out; each attempt is one write, built only once the client
    /// admits it (see [`admit`]).
    ///
    /// # Cancel safety
    ///
    /// As [`wait_on`], and as the writes' own.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn keeps its arguments twice in every waiter's future"
    )]
    pub(crate) fn wait<'a, T, Fut>(
        &'a self,
        listen: Listen<'a>,
        patience: Patience,
        write: impl Fn() -> Fut + 'a,
    ) -> impl Future<Output = Result<Option<T>>> + 'a
    where
        Fut: Future<Output = Result<Attempt<T>>> + 'a,
    {
        async move {
            let (services, write) = (&*self.services, &write);
            wait_on(services, listen, patience, move || async move {
                let _admitted = admit(services, patience).await;
                write().await
            })
            .await
        }
    }
}
