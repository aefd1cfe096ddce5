//! The commands each side's `RLock` scripts run, as `MONITOR` shows them: for every lock
//! operation, rlock and the Redisson emulator (3.31 and HEAD) execute exactly the Redis commands
//! that docs/protocol.md's numbered steps list (§2.2, §2.3, §2.5), with the same arguments: the
//! expected traces below are literals, not computed by either side. The tracing is `golden`'s.

use rlock_tests::redisson::lock_channel;

use crate::golden::{FIELD, Trace, check_every_side, commands, latch, lock_tour, reentered, trace};
use crate::support::{InteropKind, Party, Side};

const NAME: &str = "interop:wire";

/// What the `RLock` scripts of `side` run for lock `name` in each phase of [`lock_tour`]. The
/// kinds built on the `RLock` (spin, fenced) start from it.
pub(crate) fn lock_expected(name: &str, side: Side) -> Trace {
    let channel = lock_channel(name);
    let l = &latch(name);
    let mut force_unlock = commands(&[&["del", name], &["publish", &channel, "0"]]);
    if side == Side::Rlock {
        // rlock refuses to delete a key that is not a lock hash (a known difference).
        force_unlock.insert(0, format!("type {name}"));
    }
    trace(vec![
        (
            "acquire",
            vec![commands(&[
                &["exists", name],
                &["hincrby", name, FIELD, "1"],
                &["pexpire", name, "30000"],
            ])],
        ),
        (
            "re-enter",
            vec![reentered(
                side,
                name,
                FIELD,
                commands(&[
                    &["exists", name],
                    &["hexists", name, FIELD],
                    &["hincrby", name, FIELD, "1"],
                    &["pexpire", name, "30000"],
                ]),
            )],
        ),
        (
            "partial unlock",
            vec![commands(&[
                &["get", l],
                &["hexists", name, FIELD],
                &["hincrby", name, FIELD, "-1"],
                &["pexpire", name, "30000"],
                &["set", l, "0", "px", "<ttl>"],
            ])],
        ),
        (
            "full unlock",
            vec![commands(&[
                &["get", l],
                &["hexists", name, FIELD],
                &["hincrby", name, FIELD, "-1"],
                &["del", name],
                &["publish", &channel, "0"],
                &["set", l, "1", "px", "<ttl>"],
            ])],
        ),
        (
            "contended try",
            vec![commands(&[
                &["exists", name],
                &["hexists", name, FIELD],
                &["pttl", name],
            ])],
        ),
        (
            "unlock by a non-owner",
            vec![commands(&[&["get", l], &["hexists", name, FIELD]])],
        ),
        ("force unlock", vec![force_unlock]),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_run_the_same_commands() {
    let tour = async |tracer: &mut _, party: &Party| {
        lock_tour(tracer, party, InteropKind::REENTRANT, NAME).await;
    };
    let expected = |side| lock_expected(NAME, side);
    check_every_side(&[NAME], tour, |_| (), expected).await;
}
