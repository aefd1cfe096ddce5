//! Holding what a command acquired for a while, then releasing it.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::{Result, output};

/// Waits out a hold of `hold_ms`; Ctrl-C ends it early. Returns the code the command exits with
/// once it has released what it held: success, or 130 when interrupted.
pub(crate) async fn wait(hold_ms: u64) -> Result<ExitCode> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(hold_ms)) => Ok(ExitCode::SUCCESS),
        interrupted = tokio::signal::ctrl_c() => {
            interrupted?;
            Ok(ExitCode::from(130))
        }
    }
}

/// Prints `acquired` with the fields of `held`, holds for `hold_ms` (see [`wait`]), then runs
/// `release` and prints `released` with the fields it returns.
///
/// The release runs whatever happened during the hold, so nothing acquired outlives the command.
/// `released` is stamped with the end of the hold, before the release is sent (see [`output`]).
pub(crate) async fn hold_then_release<R: Serialize>(
    held: impl Serialize,
    hold_ms: u64,
    release: impl AsyncFnOnce() -> Result<R>,
) -> Result<ExitCode> {
    let finished = match output::event("acquired", held) {
        Ok(()) => wait(hold_ms).await,
        Err(e) => Err(e),
    };
    let ended = output::epoch_ms();
    let released = release().await?;
    output::event_at("released", ended, released)?;
    finished
}
