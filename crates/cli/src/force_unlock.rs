//! `rlock force-unlock`: delete a lock whoever holds it.

use std::process::ExitCode;

use serde::Serialize;

use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The lock name.
    #[arg(value_parser = crate::lock_name)]
    name: String,
}

#[derive(Debug, Serialize)]
struct Report {
    released: bool,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let client = target.client().await?;
    // The library publishes the unlock message too, so waiters (Redisson's included) wake at once.
    let released = client.lock(args.name).force_unlock().await?;
    output::emit(&Report { released })?;
    Ok(ExitCode::SUCCESS)
}
