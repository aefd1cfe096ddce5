//! Name mapping: Redisson's `NameMapper` (docs/protocol.md §9.1).

use std::fmt;
use std::sync::Arc;

/// Maps every object name before its keys and channels are derived, as Redisson's `NameMapper`
/// (`Config.setNameMapper`) does: set in [`Config::name_mapper`](crate::Config::name_mapper), it
/// applies to every kind a [`Client`](crate::Client) makes (and so to the blocking facade, the multi
/// and red locks built from those handles, and the `rlock` command's `--name-prefix`).
///
/// A Java service with a mapper derives all of its lock keys and channels from the mapped name (its
/// objects' `getRawName()`), so an rlock service that shares its locks must map alike: with
/// different mappings the two use different keys and **do not exclude each other**. A handle's
/// `name()` (e.g. [`Lock::name`](crate::Lock::name)) is the mapped name, the key in Redis:
/// Redisson's `getRawName()`. rlock has no `unmap`: it never turns a key back into a name, and the
/// name a handle was made with is the caller's own.
///
/// Cheap to clone. Two mappers are equal when both are [`NameMapper::prefix`] mappers with the same
/// prefix, or clones of one [`NameMapper::new`] mapper (the same function, compared with
/// [`Arc::ptr_eq`]).
///
/// # Examples
///
/// ```
/// use rlock_redisson::NameMapper;
///
/// let prefix = NameMapper::prefix("app:");
/// assert_eq!(prefix.map("orders"), "app:orders");
///
/// let tenant = NameMapper::new(|name| format!("tenant-7:{}", name.to_lowercase()));
/// assert_eq!(tenant.map("Orders"), "tenant-7:orders");
/// assert_eq!(tenant.clone(), tenant);
/// assert_ne!(tenant, NameMapper::new(|name| format!("tenant-7:{}", name.to_lowercase())));
/// assert_eq!(prefix, NameMapper::prefix("app:"));
/// ```
///
/// Every kind then works under the mapped name:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let mut config = rlock_redisson::Config::new(url);
/// config.name_mapper = Some(rlock_redisson::NameMapper::prefix("doc:app:"));
/// let client = rlock_redisson::Client::with_config(config).await?;
/// let lock = client.lock("orders");
/// assert_eq!(lock.name(), "doc:app:orders");
/// let guard = lock.lock().await?;
/// let holders: i64 = client.query(redis::cmd("HLEN").arg("doc:app:orders")).await?;
/// assert_eq!(holders, 1);
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct NameMapper(Mapping);

/// How a [`NameMapper`] maps.
#[derive(Clone)]
enum Mapping {
    /// The prefix, prepended.
    Prefix(Arc<str>),
    /// Any function.
    Function(Arc<dyn Fn(&str) -> String + Send + Sync>),
}

impl NameMapper {
    /// A mapper that calls `map` for every name (Redisson's `NameMapper.map`). It should be a pure
    /// function of the name, the same in every process that shares the locks.
    pub fn new<F>(map: F) -> Self
    where
        F: Fn(&str) -> String + Send + Sync + 'static,
    {
        Self(Mapping::Function(Arc::new(map)))
    }

    /// The common mapper: `prefix` in front of every name (`orders` → `app:orders`), as the prefix
    /// mappers Java services usually configure do. Such mappers' `unmap` strips the prefix, which
    /// rlock never needs. Some Java prefix mappers leave a name that already starts with the prefix
    /// as it is: for those names only, mirror them with [`NameMapper::new`].
    pub fn prefix(prefix: impl Into<String>) -> Self {
        Self(Mapping::Prefix(prefix.into().into()))
    }

    /// The name `name` maps to: the key of a lock called `name`, from which every other key and
    /// channel of it is derived.
    pub fn map(&self, name: &str) -> String {
        match &self.0 {
            Mapping::Prefix(prefix) => {
                let mut mapped = String::with_capacity(prefix.len() + name.len());
                mapped.push_str(prefix);
                mapped.push_str(name);
                mapped
            }
            Mapping::Function(map) => map(name),
        }
    }
}

impl PartialEq for NameMapper {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Mapping::Prefix(a), Mapping::Prefix(b)) => a == b,
            (Mapping::Function(a), Mapping::Function(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for NameMapper {}

impl fmt::Debug for NameMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Mapping::Prefix(prefix) => f
                .debug_struct("NameMapper")
                .field("prefix", prefix)
                .finish(),
            Mapping::Function(_) => f.write_str("NameMapper(<fn>)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_prepended_and_compared_by_value() {
        let mapper = NameMapper::prefix("app:");
        assert_eq!(mapper.map("a{b}c"), "app:a{b}c");
        assert_eq!(mapper.map(""), "app:");
        assert_eq!(mapper, NameMapper::prefix(String::from("app:")));
        assert_ne!(mapper, NameMapper::prefix("other:"));
        assert_eq!(format!("{mapper:?}"), r#"NameMapper { prefix: "app:" }"#);
    }

    #[test]
    fn functions_compare_by_identity() {
        let upper = NameMapper::new(|name| name.to_uppercase());
        assert_eq!(upper.map("lock"), "LOCK");
        assert_eq!(upper, upper.clone());
        assert_ne!(upper, NameMapper::new(|name| name.to_uppercase()));
        assert_ne!(
            NameMapper::new(|name| format!("app:{name}")),
            NameMapper::prefix("app:")
        );
        assert_eq!(format!("{upper:?}"), "NameMapper(<fn>)");
    }
}
