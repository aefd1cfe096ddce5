//! Redisson's naming rules (docs/protocol.md §1.3–§1.5).
//!
//! The lock hash is the raw name itself; every auxiliary key and channel wraps the name in a hash tag
//! (`prefix:{name}`) unless the name already contains `{`, so that all of them land in the lock's
//! cluster slot. The odd cases (`a{b`, `{}`...) behave exactly as in Redisson, on purpose.

/// Redisson's `prefixName(prefix, name)`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    prefixed(prefix, name, 0)
}

/// [`prefix_name`] with room for `more` bytes after it. Written out rather than `format!`ed: every
/// unlock names its latch, and the formatting machinery took longer than building the string.
fn prefixed(prefix: &str, name: &str, more: usize) -> String {
    let mut prefixed = String::with_capacity(prefix.len() + name.len() + 3 + more);
    prefixed.push_str(prefix);
    prefixed.push(':');
    if name.contains('{') {
        prefixed.push_str(name);
    } else {
        prefixed.push('{');
        prefixed.push_str(name);
        prefixed.push('}');
    }
    prefixed
}

/// The channel a reentrant lock's unlock is published on: `redisson_lock__channel:{name}`.
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// Redisson's `suffixName(name, suffix)`.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// A fenced lock's token counter: `redisson_lock_token:{name}`.
pub(crate) fn fenced_token(name: &str) -> String {
    prefix_name("redisson_lock_token", name)
}

/// A fair lock's queue of waiting owner fields: `redisson_lock_queue:{name}`.
pub(crate) fn fair_queue(name: &str) -> String {
    prefix_name("redisson_lock_queue", name)
}

/// A fair lock's waiter deadlines: `redisson_lock_timeout:{name}`.
pub(crate) fn fair_timeouts(name: &str) -> String {
    prefix_name("redisson_lock_timeout", name)
}

/// The channel a read-write lock's read and write sides share: `redisson_rwlock:{name}`.
pub(crate) fn rw_channel(name: &str) -> String {
    prefix_name("redisson_rwlock", name)
}

/// The prefix of one read holder's timeout keys: `{name}:<field>:rwlock_timeout` (each hold `k` is
/// `<prefix>:<k>`).
pub(crate) fn read_timeouts(name: &str, field: &str) -> String {
    format!("{}:rwlock_timeout", suffix_name(name, field))
}

/// What every read holder's timeout keys of `name` start with: `{name}`, or `name` when it already
/// has braces (the timeout prefix cut before `:<field>`, docs/protocol.md §7.3).
pub(crate) fn read_key_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// The channel a semaphore's (and a permit-expirable semaphore's) releases are published on:
/// `redisson_sc:{name}`.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// A permit-expirable semaphore's permit expiries: `{name}:timeout`.
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffix_name(name, "timeout")
}

/// A count-down latch's channel: `redisson_countdownlatch__channel__{name}`, always with one pair of
/// braces around the whole name, even one that has its own (docs/protocol.md §1.4).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The unlock latch of one unlock request: `redisson_unlock_latch:{name}:<request-id>`, the request
/// id (16 bytes) written as 32 lower-case hex characters.
pub(crate) fn unlock_latch(name: &str, request_id: u128) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = [0_u8; 32];
    for (nibble, digit) in hex.iter_mut().rev().enumerate() {
        *digit = DIGITS[(request_id >> (4 * nibble)) as usize & 0xf];
    }
    let mut latch = prefixed("redisson_unlock_latch", name, 1 + hex.len());
    latch.push(':');
    latch.push_str(std::str::from_utf8(&hex).unwrap_or_default());
    latch
}

/// A fresh unlock request id: 16 random bytes.
pub(crate) fn new_request_id() -> u128 {
    // Redisson draws these from `java.util.Random` too: they need to be unique, not secret.
    fastrand::u128(..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_get_a_hash_tag() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(
            unlock_latch("myLock", 0x00ff),
            "redisson_unlock_latch:{myLock}:000000000000000000000000000000ff"
        );
    }

    #[test]
    fn names_with_braces_keep_their_own_tag() {
        assert_eq!(lock_channel("a{b}c"), "redisson_lock__channel:a{b}c");
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(lock_channel("a}b"), "redisson_lock__channel:{a}b}");
    }

    #[test]
    fn family_names_follow_redissons_brace_rules() {
        let field = "3b241101-e2bb-4255-8caf-4136c566a962:57";
        assert_eq!(fenced_token("myLock"), "redisson_lock_token:{myLock}");
        assert_eq!(fair_queue("myLock"), "redisson_lock_queue:{myLock}");
        assert_eq!(fair_timeouts("myLock"), "redisson_lock_timeout:{myLock}");
        assert_eq!(rw_channel("myLock"), "redisson_rwlock:{myLock}");
        assert_eq!(
            read_timeouts("myLock", field),
            format!("{{myLock}}:{field}:rwlock_timeout")
        );
        assert_eq!(
            read_timeouts("a{b}c", field),
            format!("a{{b}}c:{field}:rwlock_timeout")
        );
        assert_eq!(read_key_prefix("myLock"), "{myLock}");
        assert_eq!(read_key_prefix("a{b}c"), "a{b}c");
    }

    #[test]
    fn synchronizer_names_follow_redissons_rules() {
        assert_eq!(semaphore_channel("sem"), "redisson_sc:{sem}");
        assert_eq!(semaphore_channel("a{b}c"), "redisson_sc:a{b}c");
        assert_eq!(permit_timeouts("sem"), "{sem}:timeout");
        assert_eq!(permit_timeouts("a{b}c"), "a{b}c:timeout");
        assert_eq!(
            latch_channel("job"),
            "redisson_countdownlatch__channel__{job}"
        );
        assert_eq!(
            latch_channel("a{b}c"),
            "redisson_countdownlatch__channel__{a{b}c}"
        );
    }

    #[test]
    fn request_ids_are_32_lower_hex() {
        let latch = unlock_latch("a{b}c", new_request_id());
        let id = latch
            .strip_prefix("redisson_unlock_latch:a{b}c:")
            .unwrap_or_default();
        assert_eq!(id.len(), 32);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        assert_eq!(
            unlock_latch("n", u128::MAX - 0x0123_4567_89ab_cdef),
            "redisson_unlock_latch:{n}:fffffffffffffffffedcba9876543210"
        );
        assert_ne!(latch, unlock_latch("a{b}c", new_request_id()));
    }
}
