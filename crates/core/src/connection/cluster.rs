//! Cluster requests that are sent again only when Redis proved they did not run.
//!
//! redis-rs's cluster client retries requests by itself, and some of its retries follow an I/O
//! error: a connection that broke after the request was written is classified as "reconnect and
//! send again" (`RetryMethod::Reconnect`, `RetryMethod::RetryImmediately`). For a lock script that is
//! the double apply this library exists to prevent: the first copy ran, its reply was lost, the
//! second copy runs too, and an acquire becomes a hold count of 2 that no unlock ever releases (or
//! an unlock is applied twice, a permit released twice). And the re-sent copy may run after the
//! undo rlock sends to reconcile the lost reply, on a connection that is no longer the same.
//!
//! So rlock builds its command cluster client with `retries(0)`: every failure comes back to it.
//! `retries(0)` alone would also stop the client from following `MOVED` and `ASK` (slot migration
//! and failover need them), so this module follows, and only follows, the replies that prove the
//! request did not run: a redirect (sent on to the node it names; after `ASK`, preceded by
//! `ASKING` in one pipeline) and the cluster's "not now" refusals (`TRYAGAIN`, `CLUSTERDOWN`,
//! `LOADING`, `MASTERDOWN`, `READONLY`: sent again by slot after a short pause, by which time the
//! client has refreshed its slot map, which it still does on its own). A request whose connection
//! broke or whose reply timed out is returned as it is, for rlock's reconciliation (the acquire's
//! undo, the unlock latch, `OutcomeUnknown`). rlock's own command deadline bounds the whole loop.
//!
//! A pipeline is re-sent whole: rlock's pipelines are one script and its `WAIT`, on one slot, so a
//! redirect can only come from the script, which then did not run.

use std::time::Duration;

use redis::aio::ConnectionLike as _;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisResult, ServerErrorKind, Value};

/// How many refusals one request follows before the last one is returned (redis-rs's default).
const MAX_REFUSALS: u32 = 16;
/// The first pause before a "not now" refusal is sent again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(320);

/// Where the next copy of a refused request goes.
enum Target {
    /// Wherever the cluster client routes it (by slot).
    Routed,
    /// The node a `MOVED` named.
    Node(SingleNodeRoutingInfo),
    /// The node an `ASK` named, after `ASKING`.
    Asking(SingleNodeRoutingInfo),
}

/// Sends `cmd`, following redirects and "not now" refusals (see the module docs).
pub(super) async fn command(conn: &mut ClusterConnection, cmd: &Cmd) -> RedisResult<Value> {
    let mut target = Target::Routed;
    let mut refusals = 0;
    loop {
        let reply = match &target {
            Target::Routed => conn.req_packed_command(cmd).await,
            Target::Node(node) => {
                conn.route_command(cmd.clone(), RoutingInfo::SingleNode(node.clone()))
                    .await
            }
            Target::Asking(node) => conn
                .route_pipeline(asking([cmd]), 1, 1, node.clone())
                .await
                .and_then(|mut replies| replies.pop().unwrap_or(Value::Nil).extract_error()),
        };
        match reply {
            Err(e) => target = after_refusal(e, &mut refusals).await?,
            Ok(value) => return Ok(value),
        }
    }
}

/// Sends `count` replies' worth of `pipeline` from `offset`, to `route` or wherever the cluster
/// client routes it, following redirects and "not now" refusals (see the module docs).
pub(super) async fn pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
    route: Option<&SingleNodeRoutingInfo>,
) -> RedisResult<Vec<Value>> {
    let mut target = Target::Routed;
    let mut refusals = 0;
    loop {
        let reply = match (&target, route) {
            (Target::Routed, None) => conn.req_packed_commands(pipeline, offset, count).await,
            (Target::Routed, Some(route)) => {
                conn.route_pipeline(pipeline.clone(), offset, count, route.clone())
                    .await
            }
            (Target::Node(node), _) => {
                conn.route_pipeline(pipeline.clone(), offset, count, node.clone())
                    .await
            }
            (Target::Asking(node), _) => {
                conn.route_pipeline(asking(pipeline.cmd_iter()), offset + 1, count, node.clone())
                    .await
            }
        };
        match reply {
            Err(e) => target = after_refusal(e, &mut refusals).await?,
            Ok(values) => return Ok(values),
        }
    }
}

/// `ASKING` followed by `cmds`, as one pipeline (so nothing else on that node's connection can use
/// up the `ASKING` in between).
fn asking<'a>(cmds: impl IntoIterator<Item = &'a Cmd>) -> Pipeline {
    let mut pipeline = redis::pipe();
    let _ = pipeline.cmd("ASKING");
    for cmd in cmds {
        let _ = pipeline.add_command(cmd.clone());
    }
    pipeline
}

/// Where to send a request that failed with `e` again, after a pause where Redis asked for one; or
/// `e` itself when the request may have run, or after [`MAX_REFUSALS`].
async fn after_refusal(e: RedisError, refusals: &mut u32) -> RedisResult<Target> {
    if *refusals >= MAX_REFUSALS {
        return Err(e);
    }
    let ErrorKind::Server(kind) = e.kind() else {
        // An I/O error or a timeout: the request may have run. Never sent again here.
        return Err(e);
    };
    let target = match kind {
        ServerErrorKind::Moved => Target::Node(redirect_node(&e).ok_or(e)?),
        ServerErrorKind::Ask => Target::Asking(redirect_node(&e).ok_or(e)?),
        ServerErrorKind::TryAgain
        | ServerErrorKind::ClusterDown
        | ServerErrorKind::BusyLoading
        | ServerErrorKind::MasterDown
        | ServerErrorKind::ReadOnly => {
            let pause = FIRST_PAUSE.saturating_mul(1 << (*refusals).min(6));
            tokio::time::sleep(pause.min(MAX_PAUSE)).await;
            Target::Routed
        }
        _ => return Err(e),
    };
    *refusals += 1;
    Ok(target)
}

/// The node a `MOVED`/`ASK` names (`<slot> <host>:<port>`).
fn redirect_node(e: &RedisError) -> Option<SingleNodeRoutingInfo> {
    let (address, _slot) = e.redirect_node()?;
    let (host, port) = address.rsplit_once(':')?;
    Some(SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port: port.parse().ok()?,
    })
}
