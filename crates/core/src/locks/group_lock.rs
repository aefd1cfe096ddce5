//! The group lock: Redisson's `RedissonFasterMultiLock`, `getMultiLock(group, values)`
//! (docs/protocol.md §8.9): many values of one group locked together, all or none, in one script on
//! one hash.
//!
//! # Implementation details
//!
//! The group is one hash at the group's (mapped) name. Each value is encoded with a codec (the
//! client's, as Java encodes it with its client's) and hashed as Redisson hashes it
//! (`Hash.hash128toBase64`); a value held by an owner has three fields: the hash, naming the owner
//! `<node-uuid>:<owner-id>`; `<hash>:<owner>:expire_time`, when that hold ends (epoch ms); and
//! `<hash>:<owner>:lock_count`, its hold count. One acquire script takes every value or none: it is
//! busy while another owner's hold of one of them has not ended, and then replies how long until
//! the last of those ends (the bound of the wait). Waiters listen on the lock channel of the group
//! (`redisson_lock__channel:{group}`), where every release that frees a value publishes `0`.
//!
//! The kind, [`Group`], is one more [`LockWire`] over the engine, which waits, undoes lost
//! acquires, releases under an unlock latch and renews as for every kind. Two things differ, and
//! the engine has a seam for each: a group lock's holds are of its values, not of the whole key, so
//! it keeps its books under its [scope](LockWire::scope) (the group and its value set) and the
//! watchdog renews it with its values ([`LockWire::renewal_part`]); and an undo counts the owner's
//! holds of *these* values, so the acquire refuses an owner whose holds of them are not what this
//! client counts (held through another value set of the same group): the one re-entry the undo
//! could not tell apart. The handle is [`GroupLock`] rather than a [`Lock`](crate::Lock): the
//! reentrant lock's inspection (`HEXISTS`, `HGET`, `PTTL` of the key) says nothing about a value
//! set; its own are scripts.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{RedisError, Script, Value};

use crate::codec::{Codec, EntryKey};
use crate::engine::{
    self, Attempt, ChannelName, Guard, Lease, LockWire, Patience, Taken, epoch_millis,
};
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::owner::Owner;
use crate::scripts::{ScriptCall, lua};
use crate::services::Services;
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static ACQUIRE: LazyLock<Script> = lua!("group_prelude.lua", "group_acquire.lua");
static UNDO_ACQUIRE: LazyLock<Script> = lua!("group_prelude.lua", "group_undo_acquire.lua");
static UNLOCK: LazyLock<Script> = lua!("group_prelude.lua", "group_unlock.lua");
static FORCE_UNLOCK: LazyLock<Script> = lua!("group_prelude.lua", "group_force_unlock.lua");
static RENEW: LazyLock<Script> = lua!("group_prelude.lua", "group_renew.lua");
static IS_LOCKED: LazyLock<Script> = lua!("group_prelude.lua", "group_is_locked.lua");
static IS_HELD: LazyLock<Script> = lua!("group_prelude.lua", "group_is_held.lua");

/// The acquire script's refusal of an owner that holds some of the values otherwise.
const REENTRY: &str = "GROUP_LOCK_REENTRY";

/// The message that wakes the group's waiters (Java's `LockPubSub.UNLOCK_MESSAGE`).
const UNLOCK_MESSAGE: &str = "0";

/// Renewal of group locks (docs/protocol.md §8.9): each group with the time, this client's fields
/// and the values; a group is renewed only while one of the fields holds every value.
static RENEWAL: Renewal = Renewal {
    name: "group",
    script: &RENEW,
    add: |call, key, fields, values| {
        let call = fields
            .iter()
            .fold(
                call.key(key).arg(epoch_millis()).arg(fields.len()),
                |call, field| call.arg(field),
            )
            .arg(values.len());
        with_values(call, values)
    },
};

/// `call` with `values` appended, one argument each.
fn with_values(call: ScriptCall, values: &[String]) -> ScriptCall {
    values.iter().fold(call, |call, value| call.arg(value))
}

/// The group lock's kind: a group and a set of its values' hashes.
#[derive(Debug)]
pub(crate) struct Group {
    name: String,
    channel: Arc<str>,
    /// `PUBLISH` or `SPUBLISH`, as the client decided (docs/protocol.md §2.6).
    publish: &'static str,
    /// The values' hashes: the fields that name their holders. Sorted, without repeats.
    values: Vec<String>,
    /// What this client keeps the holds under: the group and the value set (see
    /// [`LockWire::scope`]). NUL separates them: no value hash has one, and no sane key starts
    /// with one.
    scope: String,
}

impl Group {
    /// The group `name` over the values hashed as `hashes` (repeats dropped, as Java's set drops
    /// them).
    fn new(name: String, publish: &'static str, hashes: Vec<String>) -> Result<Self> {
        let mut values = hashes;
        values.sort_unstable();
        values.dedup();
        if values.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "the group lock {name:?} needs at least one value"
            )));
        }
        let scope = values
            .iter()
            .fold(format!("\0{name}"), |scope, value| scope + "\0" + value);
        Ok(Self {
            channel: names::lock_channel(&name).into(),
            name,
            publish,
            values,
            scope,
        })
    }
}

impl LockWire for Group {
    type Token = ();

    fn name(&self) -> &str {
        &self.name
    }

    fn label(&self) -> &'static str {
        "group_lock"
    }

    fn what(&self) -> &'static str {
        "group lock"
    }

    fn scope(&self) -> &str {
        &self.scope
    }

    fn renewal_part(&self) -> &[String] {
        &self.values
    }

    /// Every message wakes every waiter: waiters of one group wait for different values.
    fn channel(&self, _field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        Some((Cow::Borrowed(&self.channel), WakeRule::All))
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        let call = ScriptCall::new(&ACQUIRE)
            .key(&self.name)
            .arg(lease.as_millis())
            .arg(epoch_millis())
            .arg(field)
            .arg(held_before);
        with_values(call, &self.values)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        Attempt::from_count_or_pttl(reply)
    }

    fn acquire_refused(&self, error: &RedisError) -> Option<Error> {
        error
            .to_string()
            .contains(REENTRY)
            .then(|| Error::reentry_refused(self.subject()))
    }

    /// A refused acquire counts nothing: the engine runs an owner's attempts one at a time, so the
    /// count the script checks and the undo compares with is exact.
    fn refuses_reentry(&self) -> bool {
        true
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        _lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        let call = ScriptCall::new(&UNDO_ACQUIRE)
            .key(&self.name)
            .key(&*self.channel)
            .arg(field)
            .arg(held_before)
            .arg(self.publish)
            .arg(UNLOCK_MESSAGE);
        with_values(call, &self.values)
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        let call = ScriptCall::new(&UNLOCK)
            .key(&self.name)
            .key(&*self.channel)
            .key(latch)
            .arg(field)
            .arg(UNLOCK_MESSAGE)
            .arg(lease.as_millis())
            .arg(self.publish)
            .arg(latch_ttl.as_millis())
            .arg(epoch_millis());
        with_values(call, &self.values)
    }

    fn force_unlock_call(&self) -> ScriptCall {
        let call = ScriptCall::new(&FORCE_UNLOCK)
            .key(&self.name)
            .key(&*self.channel)
            .arg(UNLOCK_MESSAGE)
            .arg(self.publish);
        with_values(call, &self.values)
    }

    fn renewal(&self) -> &'static Renewal {
        &RENEWAL
    }
}

/// Many values of one group locked together, all or none: Redisson's `RedissonFasterMultiLock`,
/// what Java's `redisson.getMultiLock(group, values)` returns. Made by
/// [`Client::group_lock`](crate::Client::group_lock).
///
/// The group is one hash at the group's name (mapped by
/// [`Config::name_mapper`](crate::Config::name_mapper), as Java maps it); each value is encoded
/// with the codec and hashed as Redisson does, and repeats count once. Two handles of one group
/// exclude each other on the values they share, and only on those, in Rust and in Java alike;
/// their waiters listen on the group's lock channel, so Java's releases wake rlock's waiters and
/// rlock's wake Java's.
///
/// An owner re-enters its holds as with a [`Lock`](crate::Lock) (a thread's, a scope's or the
/// bound owner, see [`Lock`](crate::Lock)), through any handle of the same values. It may hold
/// several value sets of one group at once as long as they share no value; an acquisition of
/// values that the owner holds through another set fails with
/// [`Error::ReentryRefused`](crate::Error::ReentryRefused) (Java counts them per value).
///
/// Holds taken without a lease are renewed by the watchdog; Java's `getHoldCount` and
/// `remainTimeToLive` throw on this object, and the handle has neither.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// // Java: redisson.getMultiLock("doc:class:100", List.of("Jack_001", "Mary_002"))
/// let students = client.group_lock("doc:class:100", ["Jack_001", "Mary_002"])?;
/// let guard = students.lock().await?;
/// // Mary is taken; another owner cannot lock her, even with someone else.
/// let mary_and_tom = client.group_lock("doc:class:100", ["Mary_002", "Tom_003"])?;
/// assert!(mary_and_tom.try_lock().await?.is_none());
/// guard.unlock().await?;
///
/// let guard = mary_and_tom.try_lock_for(Duration::from_secs(1)).await?.expect("free now");
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct GroupLock {
    services: Arc<Services>,
    kind: Arc<Group>,
    owner: Option<Owner>,
}

impl GroupLock {
    /// The group `name` (mapped) over `values`, encoded and hashed with `codec`.
    pub(crate) fn new(
        services: Arc<Services>,
        name: String,
        codec: &Codec,
        values: impl IntoIterator<Item = impl Into<EntryKey>>,
    ) -> Result<Self> {
        let hashes = values
            .into_iter()
            .map(|value| codec.hash(&value.into()))
            .collect::<Result<_>>()?;
        let kind = Group::new(name, services.publish, hashes)?;
        Ok(Self {
            services,
            kind: Arc::new(kind),
            owner: None,
        })
    }

    /// The group's name in Redis (the key of its hash): the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        self.kind.name()
    }

    /// The values' hashes, sorted: the hash fields that name the values' holders.
    pub fn value_hashes(&self) -> &[String] {
        &self.kind.values
    }

    /// This handle bound to `owner`, as [`Lock::with_owner`](crate::Lock::with_owner).
    #[must_use]
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The owner this handle is bound to, if any.
    pub fn owner(&self) -> Option<Owner> {
        self.owner
    }

    /// The owner an acquisition through this handle would use right now, if known in advance: see
    /// [`Lock::current_owner`](crate::Lock::current_owner).
    pub fn current_owner(&self) -> Option<Owner> {
        self.owner.or_else(Owner::current)
    }

    /// Waits until every value is acquired; the holds are kept alive by the watchdog until
    /// released.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty group name; [`Error::ReentryRefused`] when the
    /// owner holds some of the values through another value set of the group (nothing is
    /// changed); [`Error::WrongType`] when the key holds something else than a hash;
    /// [`Error::Timeout`] or [`Error::Backend`] only when Redis fails an attempt that was sent,
    /// never because this client is busy (as [`Lock::lock`](crate::Lock::lock)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future never leaves a hold behind. If the acquire script may have
    /// run, it is undone in the background.
    pub async fn lock(&self) -> Result<GroupGuard> {
        self.acquire_until_held(Lease::Watchdog).await
    }

    /// Waits until every value is acquired, for holds that end after `lease` unless released
    /// first.
    ///
    /// # Errors
    ///
    /// As [`GroupLock::lock`], plus [`Error::InvalidArgument`] for a lease under 1 ms or over ten
    /// years.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`GroupLock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<GroupGuard> {
        self.acquire_until_held(Lease::fixed(lease)?).await
    }

    /// Tries once; `None` if another owner holds one of the values. The holds are kept alive by
    /// the watchdog.
    ///
    /// # Errors
    ///
    /// As [`GroupLock::lock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`GroupLock::lock`].
    pub async fn try_lock(&self) -> Result<Option<GroupGuard>> {
        self.acquire(Patience::For(Duration::ZERO), Lease::Watchdog)
            .await
    }

    /// Waits up to `wait` for every value; `None` if one stayed held. The holds are kept alive by
    /// the watchdog.
    ///
    /// # Errors
    ///
    /// As [`GroupLock::lock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`GroupLock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<GroupGuard>> {
        self.acquire(Patience::For(wait), Lease::Watchdog).await
    }

    /// Waits up to `wait` for every value, for holds that end after `lease` unless released first.
    ///
    /// # Errors
    ///
    /// As [`GroupLock::lock_with_lease`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`GroupLock::lock`].
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<GroupGuard>> {
        self.acquire(Patience::For(wait), Lease::fixed(lease)?)
            .await
    }

    async fn acquire_until_held(&self, lease: Lease) -> Result<GroupGuard> {
        self.acquire(Patience::Forever, lease)
            .await?
            .ok_or_else(|| Error::timeout(Operation::Acquire, self.kind.subject(), Duration::MAX))
    }

    async fn acquire(&self, patience: Patience, lease: Lease) -> Result<Option<GroupGuard>> {
        self.check_name()?;
        let owner = self.current_owner().unwrap_or_else(Owner::new);
        let guard = engine::acquire(&self.services, &self.kind, owner, patience, lease).await?;
        Ok(guard.map(GroupGuard))
    }

    /// Releases one hold of every value by `owner`, like Redisson's `unlock(threadId)`. Usually you
    /// release through the [`GroupGuard`] instead.
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] when `owner` did not hold one of the values (the values it did hold are
    /// released all the same, as Java releases them), and [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis could not be reached even after re-sending.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs to completion in the background even if this future is
    /// dropped.
    pub async fn unlock(&self, owner: Owner) -> Result<()> {
        self.check_name()?;
        let field = self.services.field(owner);
        engine::Releasing::new(&self.services, self.kind.clone(), field.into(), None)
            .finish()
            .await
            .map(|_| ())
    }

    /// Frees every value whoever holds it and wakes the waiters (Java's included). Returns whether
    /// a value was held. This client's guards of these values see their lease lost.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a hash, and [`Error::Timeout`]
    /// or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the values may or may not have been freed.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check_name()?;
        engine::force_unlock(&self.services, &*self.kind).await
    }

    /// Whether any of the values is held, by anyone (Java's `isLocked`): a value whose field names
    /// a holder whose hold has not ended.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a hash, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_locked(&self) -> Result<bool> {
        let call = ScriptCall::new(&IS_LOCKED)
            .key(self.kind.name())
            .arg(epoch_millis());
        self.ask(with_values(call, &self.kind.values)).await
    }

    /// Whether `owner` holds every value (Java's `isHeldByThread`, which skips the first value).
    ///
    /// # Errors
    ///
    /// As [`GroupLock::is_locked`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let call = ScriptCall::new(&IS_HELD)
            .key(self.kind.name())
            .arg(epoch_millis())
            .arg(self.services.field(owner));
        self.ask(with_values(call, &self.kind.values)).await
    }

    /// Whether the [current owner](GroupLock::current_owner) holds every value: Java's
    /// `isHeldByCurrentThread`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when there is no current owner (async code outside
    /// [`Owner::scope`] with an unbound handle); otherwise as [`GroupLock::is_locked`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_by(Owner::known(self.owner)?).await
    }

    /// Runs a script that replies 1 or 0.
    async fn ask(&self, call: ScriptCall) -> Result<bool> {
        self.check_name()?;
        let reply: i64 = self
            .services
            .commands
            .script(Operation::Query, self.kind.subject(), &call)
            .await?;
        Ok(reply == 1)
    }

    fn check_name(&self) -> Result<()> {
        if self.name().is_empty() {
            return Err(Error::InvalidArgument(
                "a group lock name must not be empty".into(),
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for GroupLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupLock")
            .field("name", &self.kind.name)
            .field("values", &self.kind.values)
            .field("owner", &self.owner)
            .finish()
    }
}

/// The holds of a [`GroupLock`]'s values, one each: dropping it releases them in the background
/// (never blocking); [`GroupGuard::unlock`] releases them and reports.
#[must_use = "dropping the guard releases the values at once"]
#[derive(Debug)]
pub struct GroupGuard(Guard<()>);

impl GroupGuard {
    /// The group's name in Redis.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The owner of the holds.
    pub fn owner(&self) -> Owner {
        self.0.owner()
    }

    /// The owner's field, `<node-uuid>:<owner-id>`: what each value's hash field holds.
    pub fn field(&self) -> &str {
        self.0.field()
    }

    /// Whether the holds are known to be lost: the watchdog found a value no longer held by this
    /// owner or could not renew them for a whole lease, or the fixed lease has run out.
    pub fn is_lease_lost(&self) -> bool {
        self.0.is_lease_lost()
    }

    /// Completes when the holds are lost (see [`GroupGuard::is_lease_lost`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn lease_lost(&self) {
        self.0.lease_lost().await;
    }

    /// Releases one hold of every value; a value whose count reaches zero is freed, and the
    /// group's waiters are woken.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when one of the values was no longer held (the others are released),
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis could not be reached even after
    /// re-sending; the holds then end with their lease, as renewal has stopped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs to completion in the background even if this future is
    /// dropped.
    pub async fn unlock(self) -> Result<()> {
        self.0.unlock().await
    }

    /// The engine's guard, for the blocking guard.
    #[cfg(feature = "blocking")]
    pub(crate) fn into_inner(self) -> Guard<()> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(hashes: &[&str]) -> Result<Group> {
        Group::new(
            "class:100".into(),
            "PUBLISH",
            hashes.iter().map(|&h| h.to_owned()).collect(),
        )
    }

    #[test]
    fn values_are_a_set_and_name_the_scope() {
        let group = group(&["b", "a", "b"]).expect("two values");
        assert_eq!(group.values, ["a", "b"]);
        assert_eq!(group.scope(), "\0class:100\0a\0b");
        assert_eq!(group.key(), "class:100");
        assert_eq!(&*group.channel, "redisson_lock__channel:{class:100}");
    }

    #[test]
    fn a_group_lock_needs_a_value() {
        assert!(matches!(group(&[]), Err(Error::InvalidArgument(_))));
    }
}
