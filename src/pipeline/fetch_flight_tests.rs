//! The single-flight table: waiters share the leader's bytes and its error, an abandoned
//! flight is fetched again by its waiters, nothing stays in the table, and a full table
//! fetches unshared.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The tests run one at a time: a full table (the last test) would keep the others' readers
/// from sharing.
static SERIAL: Mutex<()> = Mutex::new(());

fn key(name: &str, readers: Readers) -> FlightKey {
    FlightKey {
        store: 1,
        unit: format!("fetch_flight_tests/{name}"),
        epoch: 0,
        readers,
    }
}

/// Waits (at most 20 s) until `n` readers wait on `key`'s flight.
fn until_waiting(key: &FlightKey, n: usize) {
    let start = Instant::now();
    while waiters(key) != Some(n) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the waiters never arrived"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn concurrent_sync_readers_fetch_once_and_share_bytes() {
    let _serial = lock(&SERIAL);
    let k = key("sync", Readers::Sync);
    let fetches = AtomicUsize::new(0);
    let got: Vec<_> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..6)
            .map(|_| {
                s.spawn(|| {
                    fetch_shared(&k, || {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        // The leader fetches until the five others wait on it.
                        until_waiting(&k, 5);
                        Ok(Some(vec![7u8; 100]))
                    })
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    for g in got {
        assert_eq!(g.unwrap(), Some(vec![7u8; 100]));
    }
    assert_eq!(waiters(&k), None, "a finished flight left the table");
}

#[test]
fn the_leaders_error_reaches_every_waiter() {
    let _serial = lock(&SERIAL);
    let k = key("error", Readers::Sync);
    let got: Vec<_> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    fetch_shared(&k, || {
                        until_waiting(&k, 3);
                        Err(Error::zarr("/a", "chunk [3]: damaged", None))
                    })
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for g in got {
        let e = g.unwrap_err().to_string();
        assert!(e.contains("/a") && e.contains("chunk [3]: damaged"), "{e}");
    }
    assert_eq!(waiters(&k), None);
}

#[test]
fn a_dropped_async_leader_leaves_no_waiter_hanging() {
    let _serial = lock(&SERIAL);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(dropped_leader());
}

async fn dropped_leader() {
    let k = key("abandoned", Readers::Async);
    let leader = {
        let k = k.clone();
        tokio::spawn(async move {
            fetch_shared_async(&k, async {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok(Some(vec![1u8]))
            })
            .await
        })
    };
    while waiters(&k).is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let waiter = {
        let k = k.clone();
        tokio::spawn(async move { fetch_shared_async(&k, async { Ok(Some(vec![2u8])) }).await })
    };
    while waiters(&k) != Some(1) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A waiter dropped meanwhile changes nothing for the others.
    let dropped = {
        let k = k.clone();
        tokio::spawn(async move { fetch_shared_async(&k, async { Ok(None) }).await })
    };
    while waiters(&k) != Some(2) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    dropped.abort();
    leader.abort();
    // The waiter fetches the unit itself.
    let got = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter hung after its leader was dropped")
        .unwrap();
    assert_eq!(got.unwrap(), Some(vec![2u8]));
    assert_eq!(waiters(&k), None);
}

#[test]
fn a_full_table_fetches_unshared() {
    let _serial = lock(&SERIAL);
    let held: Vec<Join> = (0..MAX_FLIGHTS)
        .map(|i| join(&key(&format!("full/{i}"), Readers::Sync)))
        .collect();
    let alone = join(&key("full/extra", Readers::Sync));
    assert!(
        matches!(alone, Join::Alone),
        "the table grew past its bound"
    );
    drop(held);
    for i in [0, MAX_FLIGHTS - 1] {
        assert_eq!(waiters(&key(&format!("full/{i}"), Readers::Sync)), None);
    }
}

/// A fetch of byte ranges of a unit is a flight of its own: never shared with the whole
/// unit's fetch, nor with a fetch of other ranges of it; the same ranges share.
#[test]
fn ranged_fetches_are_flights_of_their_own() {
    use super::super::unit_ranges::RangePolicy;
    use std::num::NonZeroU64;
    let meta = r#"{"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 8]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}]}"#;
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    let array = Array::new_with_metadata(store, "/", serde_json::from_str(meta).unwrap()).unwrap();
    let shape: Vec<NonZeroU64> = [4u64, 8]
        .iter()
        .filter_map(|&n| NonZeroU64::new(n))
        .collect();
    let row = |y: u64| Unit {
        indices: vec![0, 0],
        origin: vec![0, 0],
        shape: shape.clone(),
        region: vec![y..y + 1, 0..8],
    };
    let ranges = |u: &Unit| UnitRanges::of_unit(u, 1, RangePolicy::LOCAL).unwrap();
    let (one, two) = (row(1), row(2));
    let whole = flight_unit(&array, None, &one, None);
    let first = flight_unit(&array, None, &one, Some(&ranges(&one)));
    let second = flight_unit(&array, None, &two, Some(&ranges(&two)));
    assert_ne!(whole, first);
    assert_ne!(first, second);
    assert_eq!(
        first,
        flight_unit(&array, None, &row(1), Some(&ranges(&row(1))))
    );
    assert_eq!(whole, flight_unit(&array, None, &two, None));
}
