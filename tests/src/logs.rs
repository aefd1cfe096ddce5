//! What rlock logs, kept in memory so that a test can assert on its warnings.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A `tracing` subscriber's output, kept in memory: install it with [`Captured::install`] (for the
/// current thread, so a test that spawns tasks runs them on a current-thread runtime).
#[derive(Clone, Debug, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Captures what the current thread logs at `info` and above until the guard is dropped.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }

    /// The warnings logged so far, one line each.
    pub fn warnings(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains("WARN"))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
