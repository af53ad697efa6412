//! Reads and writes of object stores at latency: nginx on 127.0.0.1 answering every request
//! after a delay (scripts/latency-server.sh, started by scripts/start-test-servers.sh), its
//! access log telling how many requests a read sent and how many were in flight at once.
//! These assert what the fetch-ahead stage guarantees — every chunk fetched once, many
//! requests in flight, the limit obeyed, faults retried or reported — never a speed.
//! Without the servers they skip visibly, failing under ZARRBUF_REQUIRE_SERVERS=1.

use crate::common::access_log::{Traffic, log_len, traffic};
use crate::common::servers::{self, Server, unique};
use std::path::Path;
use std::sync::Arc;
use zarrbuf::options::{CopyOptions, ReadOptions};
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::{ArrayBuilder, data_type};

/// The latency server `name`, or a skip that names these tests.
fn server(name: &str) -> Option<Server> {
    servers::server(name, "reads and writes against the local latency servers")
}

/// A `[64, 256, 256]` float32 zstd array written into `dir` (chunks `chunk`³, inner chunks
/// `inner`³ in shards of `chunk`³ when given), and its data.
fn write_array(dir: &Path, chunk: u64, inner: Option<u64>) -> NDBuffer {
    let _ = std::fs::remove_dir_all(dir);
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let shape = vec![64u64, 256, 256];
    let mut builder = ArrayBuilder::new(shape, vec![chunk; 3], data_type::float32(), 0.0f32);
    builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
        1, false,
    ))]);
    if let Some(inner) = inner {
        builder.subchunk_shape(vec![inner; 3]);
    }
    let array = builder.build(store, "/").unwrap();
    array.store_metadata().unwrap();
    let values: Vec<f32> = (0..64u64 * 256 * 256)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.5)
        .collect();
    let data = NDBuffer::from_vec(values, &[64, 256, 256]).unwrap();
    array.write_all(&data).unwrap();
    data
}

/// Runs `read` with `io_concurrency` 2 on two decoding threads and checks that the server
/// never had more than 2 requests for `name`'s chunks in flight (and had 2 at some point);
/// returns what `read` returned and the traffic (`expected` requests).
fn with_two_requests_in_flight<R>(
    sv: &Server,
    name: &str,
    expected: usize,
    read: impl FnOnce(&ReadOptions) -> R,
) -> (R, Traffic) {
    let opts = ReadOptions::default()
        .with_io_concurrency(2)
        .with_concurrency(2);
    let from = log_len(&sv.log);
    let got = read(&opts);
    let t = traffic(&sv.log, from, &format!("{name}/c/"), expected);
    assert_eq!(
        t.peak_in_flight, 2,
        "{name}: io_concurrency 2, yet at most {} requests in flight: {t:?}",
        t.peak_in_flight
    );
    (got, t)
}

fn same(what: &str, got: &NDBuffer, want: &NDBuffer) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert!(
        got.to_vec::<f32>().unwrap() == want.to_vec::<f32>().unwrap(),
        "{what}: the data differ"
    );
}

/// Every chunk of a whole read is fetched once, with many requests in flight (the workers
/// alone would keep one per core), on the sync and the async API alike.
#[test]
fn whole_reads_fetch_every_chunk_once_with_many_requests_in_flight() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("plain");
    let want = write_array(&sv.root.join(&name), 32, None);
    let url = format!("{}/{name}", sv.url);
    let chunks = 2 * 8 * 8;
    for api in ["sync", "async"] {
        let from = log_len(&sv.log);
        let got = match api {
            "sync" => zarrbuf::open(&url, "")
                .unwrap()
                .read_all(&BufferPrototype::cpu())
                .unwrap(),
            _ => {
                let rt = tokio::runtime::Runtime::new().unwrap();
                rt.block_on(async {
                    let array = zarrbuf::open_async(&url, "").await.unwrap();
                    array.read_all_async(&BufferPrototype::cpu()).await.unwrap()
                })
            }
        };
        same(api, &got, &want);
        let t = traffic(&sv.log, from, &format!("{name}/c/"), chunks);
        let mut keys: Vec<&String> = t.requests.iter().map(|(_, path, _)| path).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(
            (t.requests.len(), keys.len()),
            (chunks, chunks),
            "{api}: every chunk once: {t:?}"
        );
        assert!(
            t.peak_in_flight >= 16,
            "{api}: only {} requests were ever in flight at once",
            t.peak_in_flight
        );
    }
}

/// A `[128, 256, 256]` float32 zstd array of `64³` chunks (32 of them, 1 MiB each) whose
/// values barely compress, written into `dir`, and its data.
fn write_incompressible(dir: &Path) -> NDBuffer {
    let _ = std::fs::remove_dir_all(dir);
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let mut builder = ArrayBuilder::new(
        vec![128u64, 256, 256],
        vec![64u64; 3],
        data_type::float32(),
        0.0f32,
    );
    builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
        1, false,
    ))]);
    let array = builder.build(store, "/").unwrap();
    array.store_metadata().unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..128usize * 256 * 256)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f32::from_bits(0x3f80_0000 | (x as u32 >> 9))
        })
        .collect();
    let data = NDBuffer::from_vec(values, &[128, 256, 256]).unwrap();
    array.write_all(&data).unwrap();
    data
}

/// With the default limit, the window of requests in flight follows the store's time to
/// first byte: a store next door gets few (more would only contend with the
/// decoders for the CPU), one 20 ms away many (all 32 chunks here); the data are the same.
#[test]
fn the_default_window_follows_the_stores_latency() {
    let (Some(near), Some(far)) = (server("NEAR"), server("LATENCY")) else {
        return;
    };
    let mut peaks = Vec::new();
    for sv in [&near, &far] {
        let name = unique("window");
        let want = write_incompressible(&sv.root.join(&name));
        let array = zarrbuf::open(&format!("{}/{name}", sv.url), "").unwrap();
        let from = log_len(&sv.log);
        let got = array.read_all(&BufferPrototype::cpu()).unwrap();
        same(&name, &got, &want);
        let t = traffic(&sv.log, from, &format!("{name}/c/"), 32);
        assert_eq!(t.requests.len(), 32, "every chunk once: {t:?}");
        peaks.push(t.peak_in_flight);
    }
    // 16 next door (the floor, up to a 1.2 ms answer), every one of the 32 chunks at 20 ms
    // (half the default 128): asserted with room for a loaded machine's slower answers (24
    // in flight next door would take a 2.8 ms least answer).
    assert!(
        peaks[0] <= 24 && peaks[1] >= 24,
        "requests in flight at most (next door, 20 ms): {peaks:?}"
    );
}

/// A store whose metadata answers at once but whose chunks take 20 ms (a CDN caching the
/// metadata in front of a bucket) is sized by its chunks' answers: a read after the first
/// keeps as many requests in flight as a store 20 ms away, though its open just timed a
/// 1 ms answer.
#[test]
fn the_window_follows_the_chunks_latency_not_the_metadatas() {
    let Some(sv) = server("CDN") else { return };
    let name = unique("cdn");
    let want = write_incompressible(&sv.root.join(&name));
    let url = format!("{}/{name}", sv.url);
    let first = zarrbuf::open(&url, "").unwrap();
    same(
        &name,
        &first.read_all(&BufferPrototype::cpu()).unwrap(),
        &want,
    );
    let array = zarrbuf::open(&url, "").unwrap();
    let from = log_len(&sv.log);
    same(
        &name,
        &array.read_all(&BufferPrototype::cpu()).unwrap(),
        &want,
    );
    let t = traffic(&sv.log, from, &format!("{name}/c/"), 32);
    assert_eq!(t.requests.len(), 32, "every chunk once: {t:?}");
    // All 32 at 20 ms (64 allowed), 16 (the floor) if the 1 ms metadata answers counted.
    assert!(t.peak_in_flight >= 24, "requests in flight at most: {t:?}");
}

/// `io_concurrency` bounds the requests in flight, the decoding workers' own included (a
/// worker fetches its chunk itself when no fetch-ahead thread has started it).
#[test]
fn io_concurrency_bounds_the_requests_in_flight() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("bounded");
    let want = write_array(&sv.root.join(&name), 32, None);
    let array = zarrbuf::open(&format!("{}/{name}", sv.url), "").unwrap();
    let (got, t) = with_two_requests_in_flight(&sv, &name, 128, |opts| {
        array.read_all_opt(&BufferPrototype::cpu(), opts).unwrap()
    });
    same("bounded", &got, &want);
    assert_eq!(t.requests.len(), 128, "{t:?}");
}

/// A sharded read sends each shard's index request and its data in merged ranges of at
/// most 8 MiB, fetching each byte once, with several shards' requests in flight together.
#[test]
fn sharded_reads_merge_ranges_and_fetch_shards_together() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("sharded");
    let want = write_array(&sv.root.join(&name), 64, Some(16));
    let array = zarrbuf::open(&format!("{}/{name}", sv.url), "").unwrap();
    let from = log_len(&sv.log);
    let got = array.read_all(&BufferPrototype::cpu()).unwrap();
    same("sharded", &got, &want);
    let t = traffic(&sv.log, from, &format!("{name}/c/"), 32);
    let shards = 4 * 4;
    let index_requests = t
        .requests
        .iter()
        .filter(|(_, _, r)| r.starts_with("bytes=-"))
        .count();
    assert_eq!(index_requests, shards, "one index request per shard: {t:?}");
    // Each shard's 64 inner chunks lie back to back: one merged request per shard.
    assert_eq!(t.requests.len(), 2 * shards, "{t:?}");
    assert!(
        t.peak_in_flight >= 8,
        "the shards' requests went out {} at a time",
        t.peak_in_flight
    );
    // The same with `io_concurrency` 2: never more than 2 requests at once.
    let (got, _) = with_two_requests_in_flight(&sv, &name, 2 * shards, |opts| {
        array.read_all_opt(&BufferPrototype::cpu(), opts).unwrap()
    });
    same("sharded, io_concurrency 2", &got, &want);
}

/// A small sync read (a patch over 4 chunks, the small-read route) sends its 4 requests at
/// once: one round trip, not one per decoding thread.
#[test]
fn small_sync_reads_send_every_request_at_once() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("patch");
    let want = write_array(&sv.root.join(&name), 32, None);
    let array = zarrbuf::open(&format!("{}/{name}", sv.url), "").unwrap();
    let from = log_len(&sv.log);
    let got = array
        .read(&[5..6, 16..48, 16..48], &BufferPrototype::cpu())
        .unwrap();
    let want = want.to_vec::<f32>().unwrap();
    let expected: Vec<f32> = (16..48)
        .flat_map(|y| (16..48).map(move |x| (5 * 256 + y) * 256 + x))
        .map(|i| want[i])
        .collect();
    assert!(
        got.to_vec::<f32>().unwrap() == expected,
        "the patch differs"
    );
    let t = traffic(&sv.log, from, &format!("{name}/c/"), 4);
    assert_eq!(t.requests.len(), 4, "{t:?}");
    assert_eq!(t.peak_in_flight, 4, "the patch's requests: {t:?}");
}

/// A string array of `[96, 64]` written into `dir` (chunks `[8, 8]`, or inner chunks
/// `[8, 8]` in shards of `[32, 32]`), zstd-compressed, and its strings in C order.
fn write_strings(dir: &Path, sharded: bool) -> Vec<String> {
    use zarrbuf::{ArrayWriteVarLenExt, VarLenBuffer};
    let _ = std::fs::remove_dir_all(dir);
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let chunk = if sharded { 32 } else { 8 };
    let mut builder = ArrayBuilder::new(vec![96, 64], vec![chunk; 2], data_type::string(), "");
    builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
        1, false,
    ))]);
    if sharded {
        builder.subchunk_shape(vec![8, 8]);
    }
    let array = builder.build(store, "/").unwrap();
    array.store_metadata().unwrap();
    let want: Vec<String> = (0..96 * 64)
        .map(|i| format!("s{i}-{}", "x".repeat(i % 13)))
        .collect();
    array
        .write_varlen_all(&VarLenBuffer::from_strings(vec![96, 64], &want).unwrap())
        .unwrap();
    want
}

/// Variable-length reads fetch through the same fetch-ahead stage as fixed-size ones: many
/// requests in flight, each chunk once (a sharded array: its index and merged ranges), the
/// sync and the async API alike, and `io_concurrency` obeyed.
#[test]
fn string_reads_fetch_ahead_like_fixed_size_reads() {
    use zarrbuf::VarLenBuffer;
    let Some(sv) = server("LATENCY") else { return };
    for sharded in [false, true] {
        let name = unique(if sharded {
            "strings-sharded"
        } else {
            "strings"
        });
        let want = write_strings(&sv.root.join(&name), sharded);
        let url = format!("{}/{name}", sv.url);
        for api in ["sync", "async"] {
            let from = log_len(&sv.log);
            let got = match api {
                "sync" => zarrbuf::open(&url, "")
                    .unwrap()
                    .read_all_as::<VarLenBuffer>(&BufferPrototype::cpu())
                    .unwrap(),
                _ => {
                    let rt = tokio::runtime::Runtime::new().unwrap();
                    rt.block_on(async {
                        let array = zarrbuf::open_async(&url, "").await.unwrap();
                        array
                            .read_all_as_async::<VarLenBuffer>(&BufferPrototype::cpu())
                            .await
                            .unwrap()
                    })
                }
            };
            let got: Vec<String> = got.iter_str().unwrap().map(|s| s.unwrap()).collect();
            assert!(got == want, "{name} {api}: the strings differ");
            if sharded {
                // 3 × 2 shards of 16 inner chunks each, stored back to back: one index
                // request and one merged range per shard, several shards at once.
                let t = traffic(&sv.log, from, &format!("{name}/c/"), 12);
                assert_eq!(t.requests.len(), 12, "{api}: {t:?}");
                assert!(
                    t.peak_in_flight >= 4,
                    "{api}: the shards' requests went out {} at a time",
                    t.peak_in_flight
                );
            } else {
                let chunks = 12 * 8;
                let t = traffic(&sv.log, from, &format!("{name}/c/"), chunks);
                let mut keys: Vec<&String> = t.requests.iter().map(|(_, p, _)| p).collect();
                keys.sort();
                keys.dedup();
                assert_eq!(
                    (t.requests.len(), keys.len()),
                    (chunks, chunks),
                    "{api}: {t:?}"
                );
                assert!(
                    t.peak_in_flight >= 16,
                    "{api}: only {} requests were ever in flight at once",
                    t.peak_in_flight
                );
            }
        }
        if !sharded {
            let array = zarrbuf::open(&url, "").unwrap();
            let (got, _) = with_two_requests_in_flight(&sv, &name, 96, |opts| {
                array
                    .read_all_as_opt::<VarLenBuffer>(&BufferPrototype::cpu(), opts)
                    .unwrap()
            });
            assert_eq!(got.len(), want.len());
        }
    }
}

/// Faults: 503 on the first request for each chunk is retried (object_store's retries) and
/// the read is exact; a body that comes back short is an error naming the chunk, not data.
#[test]
fn failing_requests_are_retried_and_short_bodies_refused() {
    let Some(faulty) = server("FAULTY") else {
        return;
    };
    let Some(short) = server("SHORT") else { return };
    // Names never used before: the servers fault the first request for each path.
    let name = unique("retried");
    let want = write_array(&faulty.root.join(&name), 32, None);
    let url = format!("{}/{name}", faulty.url);
    let got = zarrbuf::open(&url, "")
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap();
    same("after 503s", &got, &want);
    let name = unique("cut");
    write_array(&short.root.join(&name), 32, None);
    let err = zarrbuf::open(&format!("{}/{name}", short.url), "")
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("chunk [") && err.contains("key c/"),
        "the error names no chunk: {err}"
    );
}

/// A copy into an object store uploads many chunks at once and reads back exactly.
#[test]
fn copies_to_a_server_at_latency_upload_in_parallel() {
    let Some(sv) = server("LATENCY") else { return };
    let src_dir = std::env::temp_dir().join(format!("zarrbuf-latency-src-{}", std::process::id()));
    let want = write_array(&src_dir, 32, None);
    let src = zarrbuf::open(src_dir.to_str().unwrap(), "").unwrap();
    let name = unique("uploaded");
    let dst_store = zarrbuf::store::open_store(&format!("{}/{name}", sv.url)).unwrap();
    let shape = src.shape().to_vec();
    let dst = zarrbuf::create_like(
        &src,
        &shape,
        dst_store,
        "/",
        &zarrbuf::ArrayLayout::default(),
        false,
    )
    .unwrap();
    let from = log_len(&sv.log);
    zarrbuf::copy_array(&src, &dst, &CopyOptions::default()).unwrap();
    let t = traffic(&sv.log, from, &format!("{name}/c/"), 128);
    let puts = t.requests.iter().filter(|(m, _, _)| m == "PUT").count();
    assert_eq!(puts, 128, "one PUT per chunk: {t:?}");
    assert!(
        t.peak_in_flight >= 16,
        "only {} uploads were in flight at once",
        t.peak_in_flight
    );
    let back = zarrbuf::open(sv.root.join(&name).to_str().unwrap(), "")
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap();
    same("uploaded", &back, &want);
    let _ = std::fs::remove_dir_all(&src_dir);
}
