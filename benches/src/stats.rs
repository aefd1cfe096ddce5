//! Distributions of measured durations.

use std::time::Duration;

use serde::Serialize;

/// Percentiles of a set of durations, in microseconds. Samples are signed nanoseconds because some
/// measured intervals (a hand-off between processes) can legitimately be negative.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct Summary {
    pub(crate) count: usize,
    pub(crate) min_us: f64,
    pub(crate) p50_us: f64,
    pub(crate) p90_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) max_us: f64,
    pub(crate) mean_us: f64,
    /// Samples below zero (only signed intervals have any).
    pub(crate) negative: usize,
}

impl Summary {
    /// Summarises samples given in nanoseconds (sorted in place).
    pub(crate) fn of_ns(samples: &mut [i64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let us = |ns: i64| ns as f64 / 1_000.0;
        let at = |q: f64| {
            // Nearest rank: the smallest sample with at least q of all samples at or below it.
            let rank = (q * samples.len() as f64).ceil() as usize;
            us(samples[rank.clamp(1, samples.len()) - 1])
        };
        let sum: i128 = samples.iter().map(|&s| i128::from(s)).sum();
        Self {
            count: samples.len(),
            min_us: us(samples[0]),
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            max_us: us(samples[samples.len() - 1]),
            mean_us: sum as f64 / samples.len() as f64 / 1_000.0,
            negative: samples.partition_point(|&s| s < 0),
        }
    }
}

/// The median and the range of a few values, one per round.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) count: usize,
}

impl Spread {
    /// The median (of an even count: the mean of the middle two) and the extremes; NaN without
    /// values.
    pub(crate) fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => f64::midpoint(values[n / 2 - 1], values[n / 2]),
        };
        Self {
            median,
            min: values.first().copied().unwrap_or(f64::NAN),
            max: values.last().copied().unwrap_or(f64::NAN),
            count: n,
        }
    }
}

/// A duration as signed nanoseconds.
pub(crate) fn ns(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

/// `a / b`, or NaN when `b` is zero (shown as "n/a").
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<i64> = (1..=100).rev().map(|i| i * 1_000).collect();
        let s = Summary::of_ns(&mut samples);
        assert_eq!(s.count, 100);
        assert!((s.p50_us - 50.0).abs() < 1e-9);
        assert!((s.p99_us - 99.0).abs() < 1e-9);
        assert!((s.max_us - 100.0).abs() < 1e-9);
        assert!((s.mean_us - 50.5).abs() < 1e-9);
        assert_eq!(s.negative, 0);
    }

    #[test]
    fn spread_of_rounds() {
        let odd = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!(
            (odd.median, odd.min, odd.max, odd.count),
            (2.0, 1.0, 3.0, 3)
        );
        let even = Spread::of([4.0, 1.0, 2.0, 10.0]);
        assert_eq!((even.median, even.min, even.max), (3.0, 1.0, 10.0));
        let one = Spread::of([5.0]);
        assert_eq!((one.median, one.min, one.max), (5.0, 5.0, 5.0));
        let none = Spread::of([]);
        assert!(none.median.is_nan() && none.min.is_nan() && none.max.is_nan());
        assert_eq!(none.count, 0);
    }

    #[test]
    fn negative_samples_are_counted() {
        let s = Summary::of_ns(&mut [-3_000, -1_000, 2_000]);
        assert_eq!(s.negative, 2);
        assert!((s.p50_us + 1.0).abs() < 1e-9);
    }
}
