//! The demo's live progress on stderr: a bar per lock redrawn in place on a terminal, a plain line
//! every second otherwise (so logs stay readable).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use super::{Acquisition, lock_name};
use crate::stats;

const BAR_WIDTH: usize = 30;

#[derive(Debug)]
pub(super) struct Progress {
    done: Vec<usize>,
    expected: Vec<usize>,
    terminal: bool,
    /// Lines drawn last time, to move back over on a terminal.
    drawn: usize,
}

impl Progress {
    pub(super) fn new(expected: &[usize]) -> Self {
        Self {
            done: vec![0; expected.len()],
            expected: expected.to_vec(),
            terminal: std::io::stderr().is_terminal(),
            drawn: 0,
        }
    }

    /// How often to [`Progress::draw`].
    pub(super) fn period(&self) -> Duration {
        if self.terminal {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(1)
        }
    }

    pub(super) fn record(&mut self, acquisition: &Acquisition) {
        if let Some(done) = self.done.get_mut(acquisition.lock as usize) {
            *done += 1;
        }
    }

    pub(super) fn draw(&mut self, elapsed: Duration) {
        let total: usize = self.done.iter().sum();
        let expected: usize = self.expected.iter().sum();
        let rate = stats::rate(total, elapsed);
        // Progress is best effort: a failed write to stderr must not stop the demo.
        let mut err = std::io::stderr().lock();
        if !self.terminal {
            let _ = writeln!(err, "acquisitions so far: {total}/{expected} ({rate:.0}/s)");
            return;
        }
        let mut screen = String::new();
        if self.drawn > 0 {
            screen.push_str(&format!("\x1b[{}A", self.drawn));
        }
        for (lock, (&done, &expected)) in self.done.iter().zip(&self.expected).enumerate() {
            screen.push_str(&format!(
                "\r\x1b[2K  {:<14} {}  {done:>6}/{expected}\n",
                lock_name(lock as u32),
                bar(done, expected)
            ));
        }
        screen.push_str(&format!(
            "\r\x1b[2K  {:<14} {}  {total:>6}/{expected}  {rate:.0}/s\n",
            "all locks",
            bar(total, expected)
        ));
        self.drawn = self.done.len() + 1;
        let _ = err.write_all(screen.as_bytes());
    }
}

fn bar(done: usize, expected: usize) -> String {
    let filled = (done * BAR_WIDTH)
        .checked_div(expected)
        .unwrap_or(BAR_WIDTH);
    let filled = filled.min(BAR_WIDTH);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR_WIDTH - filled))
}
