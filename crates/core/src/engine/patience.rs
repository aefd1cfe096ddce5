//! How long an acquisition keeps trying.

use std::time::Duration;

use tokio::time::Instant;

/// How long to keep trying.
#[derive(Clone, Copy, Debug)]
pub enum Patience {
    /// Until acquired.
    Forever,
    /// Until this much time has passed (zero: one attempt).
    For(Duration),
}

impl Patience {
    /// Whether the caller makes one attempt only (`try_lock()`): no queue entry, no waiting.
    pub(crate) fn one_try(self) -> bool {
        matches!(self, Self::For(wait) if wait.is_zero())
    }

    /// When to give up, from now; `None` for never.
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Self::Forever => None,
            Self::For(wait) => Some(Instant::now().checked_add(wait).unwrap_or_else(far_future)),
        }
    }
}

/// An instant no deadline reaches (for waits too long to represent).
pub(super) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
