//! Basic behaviour of the reentrant lock against a real redis-server: the hash layout, reentrancy,
//! TTLs and errors.

use std::time::Duration;

use redis::AsyncCommands;
use rlock::{Client, Error, Owner, RemainingTtl};
use rlock_tests::RedisServer;

async fn connect(server: &RedisServer) -> Client {
    Client::connect(server.url()).await.expect("connect")
}

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

#[tokio::test]
async fn hash_field_is_node_uuid_colon_owner_id_and_counts_reentry() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::from_id(57);
    let lock = client.lock("basics:reentry").with_owner(owner);

    let outer = lock.lock().await.expect("lock");
    let field = format!("{}:57", client.node_id());
    assert_eq!(outer.field(), field);
    let node = client.node_id();
    assert_eq!(node.len(), 36);
    assert!(uuid_v4_lowercase(node), "node id {node} is not a lower-case v4 uuid");

    let hash: Vec<(String, String)> = redis.hgetall("basics:reentry").await.expect("hgetall");
    assert_eq!(hash, vec![(field.clone(), "1".to_owned())]);

    let inner = lock.lock().await.expect("re-enter");
    let count: String = redis.hget("basics:reentry", &field).await.expect("hget");
    assert_eq!(count, "2");
    assert_eq!(lock.hold_count(owner).await.expect("hold_count"), 2);
    assert!(lock.is_held_by(owner).await.expect("is_held_by"));

    inner.unlock().await.expect("unlock inner");
    let count: String = redis.hget("basics:reentry", &field).await.expect("hget");
    assert_eq!(count, "1");
    outer.unlock().await.expect("unlock outer");
    let exists: bool = redis.exists("basics:reentry").await.expect("exists");
    assert!(!exists);
    assert_eq!(lock.hold_count(owner).await.expect("hold_count"), 0);
}

fn uuid_v4_lowercase(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && s.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && groups[2].starts_with('4')
}
