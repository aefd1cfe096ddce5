//! What this process costs: CPU time and resident memory.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};
use serde::{Deserialize, Serialize};

use crate::Result;

/// User plus system CPU time this process (all its threads, exited ones too) has used so far.
pub(crate) fn cpu_time() -> Result<Duration> {
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let micros = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(tv.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(tv.tv_usec()).unwrap_or(0))
    };
    Ok(micros(usage.user_time()) + micros(usage.system_time()))
}

/// Resident memory of this process, from `/proc/self/status`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Memory {
    /// `VmRSS`: resident now, in MiB.
    pub(crate) rss_mib: f64,
    /// `VmHWM`: the peak resident size so far, in MiB.
    pub(crate) peak_rss_mib: f64,
}

pub(crate) fn memory() -> Result<Memory> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> Result<f64> {
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .ok_or_else(|| format!("/proc/self/status has no {name}"))?;
        let kib: f64 = line
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .map_err(|e| format!("/proc/self/status {name}{line}: {e}"))?;
        Ok(kib / 1024.0)
    };
    Ok(Memory {
        rss_mib: field("VmRSS:")?,
        peak_rss_mib: field("VmHWM:")?,
    })
}
