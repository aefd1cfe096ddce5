//! Redisson's naming rules (PROTOCOL.md §1.3–§1.5).
//!
//! The lock hash is the raw name itself; every auxiliary key and channel wraps the name in a hash tag
//! (`prefix:{name}`) unless the name already contains `{`, so that all of them land in the lock's
//! cluster slot. The odd cases (`a{b`, `{}`...) behave exactly as in Redisson, on purpose.

/// Redisson's `prefixName(prefix, name)`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The channel a reentrant lock's unlock is published on: `redisson_lock__channel:{name}`.
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// The unlock latch of one unlock request: `redisson_unlock_latch:{name}:<request-id>`.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    format!(
        "{}:{request_id}",
        prefix_name("redisson_unlock_latch", name)
    )
}

/// A fresh unlock request id: 16 random bytes as 32 lower-case hex characters.
pub(crate) fn new_request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_get_a_hash_tag() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(
            unlock_latch("myLock", "00ff"),
            "redisson_unlock_latch:{myLock}:00ff"
        );
    }

    #[test]
    fn names_with_braces_keep_their_own_tag() {
        assert_eq!(lock_channel("a{b}c"), "redisson_lock__channel:a{b}c");
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(lock_channel("a}b"), "redisson_lock__channel:{a}b}");
    }

    #[test]
    fn request_ids_are_32_lower_hex() {
        let id = new_request_id();
        assert_eq!(id.len(), 32);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        assert_ne!(id, new_request_id());
    }
}
