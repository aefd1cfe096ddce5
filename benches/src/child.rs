//! Benchmark processes: the runner starts copies of its own binary (the hidden `__worker` subcommand)
//! for the scenarios that need processes of their own, and talks to them in JSON lines: the task as
//! the argument, messages on the child's stdin and stdout. The child's stderr is the runner's.

use std::process::Stdio;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use crate::Result;

/// The hidden subcommand a child runs.
pub(crate) const WORKER_SUBCOMMAND: &str = "__worker";

/// A running child process. Dropping it kills the child.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    child: tokio::process::Child,
    link: Link<ChildStdout, ChildStdin>,
}

impl ChildProcess {
    /// Starts this binary as a worker for `task`.
    pub(crate) fn spawn(task: &impl Serialize) -> Result<Self> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .arg(WORKER_SUBCOMMAND)
            .arg(serde_json::to_string(task)?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("child has no stdout")?;
        let stdin = child.stdin.take().ok_or("child has no stdin")?;
        Ok(Self {
            child,
            link: Link::new(stdout, stdin),
        })
    }

    pub(crate) async fn send(&mut self, message: &impl Serialize) -> Result<()> {
        self.link.send(message).await
    }

    pub(crate) async fn receive<T: DeserializeOwned>(&mut self) -> Result<T> {
        self.link.receive().await
    }

    /// Waits for the child to exit, which must be with success.
    pub(crate) async fn finish(mut self) -> Result<()> {
        drop(self.link);
        let status = self.child.wait().await?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("benchmark worker exited with {status}").into())
        }
    }
}

/// The child's side of the link: the runner is on stdin and stdout.
pub(crate) type Parent = Link<tokio::io::Stdin, tokio::io::Stdout>;

impl Parent {
    pub(crate) fn connect() -> Self {
        Link::new(tokio::io::stdin(), tokio::io::stdout())
    }
}

/// JSON lines in both directions.
#[derive(Debug)]
pub(crate) struct Link<R, W> {
    lines: Lines<BufReader<R>>,
    writer: W,
}

impl<R, W> Link<R, W>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    fn new(reader: R, writer: W) -> Self {
        Self {
            lines: BufReader::new(reader).lines(),
            writer,
        }
    }

    pub(crate) async fn send(&mut self, message: &impl Serialize) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        self.writer.flush().await?;
        Ok(())
    }

    pub(crate) async fn receive<T: DeserializeOwned>(&mut self) -> Result<T> {
        let line = self
            .lines
            .next_line()
            .await?
            .ok_or("the other benchmark process closed the link")?;
        Ok(serde_json::from_str(&line)?)
    }
}
