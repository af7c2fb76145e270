//! The checkpoint cache: store a thread's channel histories, read them back, purge the thread.
//! A cache failure (Redis down) is a miss, never an error.
//!
//! ```sh
//! cargo run -p switchyard-kit --example cache                         # in memory
//! cargo run -p switchyard-kit --example cache --features redis -- --url redis://127.0.0.1:6379
//! ```

use serde_json::json;
use switchyard_kit::CacheSettings;
use switchyard_kit::core::HistoryEntry;
use switchyard_kit::core::cache::make_history_key;

#[tokio::main]
async fn main() -> Result<(), switchyard_kit::core::Error> {
    let url = url_arg("memory://");
    // msgpack entries by default, what deer-flow's workers read and write.
    let cache = switchyard_kit::open_history_cache(&url, &CacheSettings::default()).await?;

    let prefix = "ckpt-hist:v1:example";
    let key = make_history_key(prefix, "thread-1", "", "checkpoint-1", "messages");
    let entry = HistoryEntry::from_json(vec![json!({"role": "user", "content": "hi"})], None);
    // Opening never waits for Redis: until it is connected, writes are dropped and reads miss.
    // A warm start retries for a moment; production code just carries on.
    for _ in 0..20 {
        cache.set_many(vec![(key.clone(), entry.clone())]).await;
        if cache
            .get_many(std::slice::from_ref(&key))
            .await
            .contains_key(&key)
        {
            break;
        }
        println!("miss: the cache is not connected yet; retrying");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let found = cache.get_many(std::slice::from_ref(&key)).await;
    println!("hit: {}", found.contains_key(&key));
    cache.delete_thread(prefix, "thread-1").await;
    let after = cache.get_many(std::slice::from_ref(&key)).await;
    println!("after purge, hit: {}", after.contains_key(&key));
    println!("stats: {:?}", cache.stats());
    cache.close().await;
    Ok(())
}

/// `--url URL`, or `default`.
fn url_arg(default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--url")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}
