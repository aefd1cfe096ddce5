//! `rlock latch`: Redisson's `RCountDownLatch`, a count that opens a gate for every waiter at zero.

use std::process::ExitCode;
use std::time::Duration;

use rlock_redisson::EntryObject;

use crate::entry::Named;
use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Set the count unless the latch has one already (it is closed): prints {"ok":true} if it
    /// did, {"ok":false} if not.
    SetCount { count: u64 },
    /// Count down by one (opening the latch at zero): prints a `counted` event.
    CountDown,
    /// Wait until the count is zero: prints an `opened` event, or a `timeout` event when
    /// --timeout-ms runs out first (both exit 0).
    Await {
        /// How long to wait at most; without it, forever.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
    },
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args
        .named
        .resolve(&target.config()?, EntryObject::CountDownLatch)?;
    let client = target.client().await?;
    let latch = client.count_down_latch(name);
    match args.action {
        Action::SetCount { count } => output::outcome(latch.try_set_count(count).await?)?,
        Action::CountDown => {
            let sent = output::epoch_ms();
            latch.count_down().await?;
            output::event_at("counted", sent, ())?;
        }
        Action::Await { timeout_ms: None } => {
            latch.await_zero().await?;
            output::event("opened", ())?;
        }
        Action::Await {
            timeout_ms: Some(timeout),
        } => {
            let opened = latch.await_for(Duration::from_millis(timeout)).await?;
            output::event(if opened { "opened" } else { "timeout" }, ())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
