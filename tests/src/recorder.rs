//! A `metrics` recorder that keeps every value in memory (metrics-util's atomic registry) and reads
//! it back without resetting it: for tests that assert metrics, and for the benchmark that
//! measures what recording them costs.

use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};

/// Counters, gauges and histograms by key, shared by clones.
#[derive(Clone)]
pub struct MemoryRecorder(Arc<Registry<Key, AtomicStorage>>);

impl Default for MemoryRecorder {
    fn default() -> Self {
        Self(Arc::new(Registry::atomic()))
    }
}

impl std::fmt::Debug for MemoryRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRecorder").finish_non_exhaustive()
    }
}

impl Recorder for MemoryRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.0
            .get_or_create_counter(key, |counter| Counter::from_arc(counter.clone()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.0
            .get_or_create_gauge(key, |gauge| Gauge::from_arc(gauge.clone()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.0
            .get_or_create_histogram(key, |histogram| Histogram::from_arc(histogram.clone()))
    }
}

impl MemoryRecorder {
    /// Installs this recorder for the whole process (clients register their handles with it from
    /// then on); false if one was installed already.
    pub fn install_global(self) -> bool {
        metrics::set_global_recorder(self).is_ok()
    }

    /// The counter `name` with exactly these labels; 0 if it was never registered.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let counters = self.0.get_counter_handles();
        find(counters, name, labels).map_or(0, |counter| {
            counter.load(std::sync::atomic::Ordering::Acquire)
        })
    }

    /// The gauge `name` with exactly these labels; 0 if it was never registered.
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let gauges = self.0.get_gauge_handles();
        find(gauges, name, labels).map_or(0.0, |gauge| {
            f64::from_bits(gauge.load(std::sync::atomic::Ordering::Acquire))
        })
    }

    /// Every sample of the histogram `name` with exactly these labels.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        let histograms = self.0.get_histogram_handles();
        find(histograms, name, labels).map_or_else(Vec::new, |histogram| histogram.data())
    }
}

/// The handle of `name` whose label set is `labels` (in any order).
fn find<T>(
    handles: impl IntoIterator<Item = (Key, T)>,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<T> {
    handles.into_iter().find_map(|(key, handle)| {
        let same_labels = key.labels().len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v));
        (key.name() == name && same_labels).then_some(handle)
    })
}
