//! Latency percentiles.

use std::time::Duration;

/// The `p`-th percentile (nearest rank) of `samples`, in milliseconds; 0 when there are none.
pub(crate) fn percentile_ms(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    let Some(last) = samples.len().checked_sub(1) else {
        return 0.0;
    };
    // Nearest rank: the smallest sample with at least p% of the samples at or below it.
    let rank = (p / 100.0 * samples.len() as f64).ceil() as usize;
    // Whole microseconds, so the JSON shows 6.259 rather than 6.2589999999999995.
    samples[rank.saturating_sub(1).min(last)].as_micros() as f64 / 1000.0
}

/// Events per second.
pub(crate) fn rate(count: usize, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&mut samples, 50.0), 50.0);
        assert_eq!(percentile_ms(&mut samples, 99.0), 99.0);
        assert_eq!(percentile_ms(&mut [Duration::from_millis(7)], 99.0), 7.0);
        assert_eq!(percentile_ms(&mut [], 50.0), 0.0);
    }
}
