//! The fenced lock across the sides (docs/protocol.md §8.2): both count one token key, so tokens
//! strictly increase whichever side acquires (every acquisition, re-entry and plain `lock()`
//! included, takes the next one), and both sides read the same latest token.

use std::time::Duration;

use rlock_tests::RedisServer;
use rlock_tests::redisson::prefix_name;

use crate::support::{InteropKind, Party, Redis, Side, both_directions};

const NAME: &str = "interop:fenced";

/// Rounds of acquisitions alternating between `a` and `b`, each a token call, its re-entry and a
/// plain `lock()`: every one takes the next token, and both sides' `getToken` / `token()` agree
/// after each. A refused try takes none, and the key never expires.
async fn tokens_increase_across_sides(a: Side, b: Side) {
    let server = RedisServer::start();
    let a = Party::connect(a, &server).await;
    let b = Party::connect(b, &server).await;
    let mut redis = Redis::connect(&server).await;
    let parties = [&a, &b];
    for party in parties {
        assert_eq!(
            party.get(InteropKind::FENCED, NAME).token().await,
            0,
            "no token yet"
        );
    }

    let mut latest = 0;
    for _round in 0..2 {
        for holder in parties {
            let lock = holder.get(InteropKind::FENCED, NAME);
            let (outer, token) = lock.lock_with_token(1).await;
            assert_eq!(token, latest + 1, "{}'s acquisition", holder.side());
            let (inner, token) = lock.lock_with_token(1).await;
            assert_eq!(token, latest + 2, "{}'s re-entry", holder.side());
            let plain = lock.lock(1).await;
            latest += 3;
            for reader in parties {
                let token = reader.get(InteropKind::FENCED, NAME).token().await;
                assert_eq!(token, latest, "{} reads the latest token", reader.side());
            }
            for hold in [plain, inner, outer] {
                hold.release().await;
            }
        }
    }

    let hold = a.get(InteropKind::FENCED, NAME).lock(1).await;
    let other = b.get(InteropKind::FENCED, NAME);
    assert!(other.try_lock(1, Duration::ZERO, None).await.is_none());
    assert_eq!(b.get(InteropKind::FENCED, NAME).token().await, latest + 1);
    hold.release().await;
    let token_key = prefix_name("redisson_lock_token", NAME);
    assert_eq!(redis.pttl(&token_key).await, -1, "the token never expires");
}

both_directions!(tokens_increase_across_sides);
