//! How long an acquisition keeps trying.

use std::time::Duration;

use tokio::time::Instant;

use crate::connection::Queueing;

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

    /// How its attempts wait for an in-flight slot on their connection: as long as it takes for a
    /// wait without a bound, which the client's own load must never fail; at most the command
    /// timeout otherwise, which keeps the bound a caller gave.
    pub(crate) fn queueing(self) -> Queueing {
        match self {
            Self::Forever => Queueing::Unbounded,
            Self::For(_) => Queueing::Bounded,
        }
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
