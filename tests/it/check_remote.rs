//! `check` of object stores: over HTTP (nginx at 20 ms latency, scripts/latency-server.sh,
//! which answers WebDAV's PROPFIND with 405, so the check walks the chunk grid) and over S3
//! (the local moto server, which lists, so the check classifies the listed keys). Arrays are
//! written into the servers' directories (or uploaded to S3) and damaged there; the nginx
//! access log tells how many requests were in flight at once. Without the servers the tests
//! skip visibly, failing under ZARRBUF_REQUIRE_SERVERS=1.

use crate::common::access_log::{log_len, traffic};
use crate::common::s3;
use crate::common::s3::{create_bucket, opts_ref};
use crate::common::servers::{self, Server};
use object_store::ObjectStoreExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use zarrbuf::ArrayWriteExt;
use zarrbuf::NDBuffer;
use zarrbuf::check::{CheckReport, KeySource, Problem, check_array};
use zarrbuf::options::{CheckOptions, OpenOptions};
use zarrs::array::{ArrayBuilder, data_type};

/// The nginx server `name`, or a skip that names these tests.
fn server(name: &str) -> Option<Server> {
    servers::server(name, "checks of arrays on the local HTTP servers")
}

/// The S3 server's endpoint, or a skip that names these tests.
fn s3_endpoint() -> Option<String> {
    servers::s3_endpoint("checks of arrays on the local S3 server")
}

/// A fresh store name, told apart from other tests' on the same servers.
fn unique(what: &str) -> String {
    servers::unique(&format!("check-{what}"))
}

/// A `[64, 128, 128]` float32 zstd (with checksums) array written into `dir`, chunks `chunk`³ (shards of
/// `chunk`³ with inner chunks `inner`³ when given); every chunk is stored.
fn write_array(dir: &Path, chunk: u64, inner: Option<u64>) {
    let _ = std::fs::remove_dir_all(dir);
    let store = zarrbuf::store::open_store(dir.to_str().unwrap()).unwrap();
    let shape = vec![64u64, 128, 128];
    let mut builder = ArrayBuilder::new(shape, vec![chunk; 3], data_type::float32(), 0.0f32);
    // With zstd's content checksum, damage inside a raw (incompressible) block is found too.
    builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(1, true))]);
    if let Some(inner) = inner {
        builder.subchunk_shape(vec![inner; 3]);
    }
    let array = builder.build(store, "/").unwrap();
    array.store_metadata().unwrap();
    let values: Vec<f32> = (0..64u64 * 128 * 128)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.5 + 1.0)
        .collect();
    let data = NDBuffer::from_vec(values, &[64, 128, 128]).unwrap();
    array.write_all(&data).unwrap();
}

/// Chunks of `chunk`³ in the `[64, 128, 128]` array.
fn chunk_count(chunk: u64) -> usize {
    (64 / chunk * (128 / chunk) * (128 / chunk)) as usize
}

/// Overwrites 16 bytes in the middle of the file `path` (a chunk's compressed bytes).
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(path, bytes).unwrap();
}

fn check(url: &str, opts: &CheckOptions) -> CheckReport {
    check_array(url, "", opts).unwrap_or_else(|e| panic!("check of {url}: {e}"))
}

/// The findings as (key, inner chunk, problem), for comparing two checks.
fn found(r: &CheckReport) -> Vec<(String, Option<Vec<u64>>, Problem)> {
    r.findings
        .iter()
        .map(|f| (f.key.clone(), f.inner.clone(), f.problem))
        .collect()
}

/// Over HTTP (no listing) the check walks the chunk grid: clean as written, a missing chunk
/// is no damage, a damaged chunk is found and named, a key the server refuses is unreadable
/// (not an abort), and the findings are those of a check of the same directory.
#[test]
fn http_checks_walk_the_grid_and_name_damaged_chunks() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("plain");
    let dir = sv.root.join(&name);
    write_array(&dir, 32, None);
    let url = format!("{}/{name}", sv.url);
    let opts = CheckOptions::default();
    let r = check(&url, &opts);
    assert!(r.is_clean(), "{:?}", r.findings);
    assert_eq!(r.keys, KeySource::ChunkGrid);
    assert_eq!(r.chunks_checked, chunk_count(32));
    assert!(r.stored_bytes > 0);

    std::fs::remove_file(dir.join("c/0/0/1")).unwrap();
    damage(&dir.join("c/1/2/3"));
    // A directory where a chunk belongs: nginx refuses it (403), after no retry.
    std::fs::remove_file(dir.join("c/1/0/0")).unwrap();
    std::fs::create_dir(dir.join("c/1/0/0")).unwrap();
    let r = check(&url, &opts);
    assert!(!r.is_clean());
    assert_eq!(r.chunks_checked, chunk_count(32) - 2, "{r:?}");
    let keys: Vec<&str> = r.findings.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["c/1/0/0", "c/1/2/3"], "{:?}", r.findings);
    assert_eq!(
        r.findings[0].problem,
        Problem::Unreadable,
        "{}",
        r.findings[0]
    );
    assert!(
        r.findings[0].detail.contains("cannot be fetched"),
        "{}",
        r.findings[0]
    );
    assert!(
        !r.findings[0].detail.contains('\n'),
        "one line: {}",
        r.findings[0]
    );
    assert!(r.findings[1].problem.is_damage() && r.findings[1].problem.is_repairable());
    // The local check of the same directory finds the same (the directory unreadable there).
    let local = check(dir.to_str().unwrap(), &opts);
    assert_eq!(found(&local), found(&r));
}

/// A sharded array over HTTP: shards are fetched whole, and the damaged inner chunk is named
/// as the local check names it.
#[test]
fn http_checks_of_sharded_arrays_name_the_damaged_inner_chunk() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("sharded");
    let dir = sv.root.join(&name);
    write_array(&dir, 32, Some(16));
    let url = format!("{}/{name}", sv.url);
    let opts = CheckOptions::default();
    let r = check(&url, &opts);
    assert!(r.is_clean(), "{:?}", r.findings);
    assert_eq!(r.keys, KeySource::ChunkGrid);
    assert_eq!(
        (r.chunks_checked, r.inner_chunks_checked),
        (chunk_count(32), chunk_count(32) * 8)
    );
    // The index is at the end; the middle of the shard is an inner chunk's bytes.
    damage(&dir.join("c/1/1/1"));
    let r = check(&url, &opts);
    let local = check(dir.to_str().unwrap(), &opts);
    assert_eq!(found(&r), found(&local));
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(r.findings[0].key, "c/1/1/1");
    assert!(r.findings[0].inner.is_some(), "{}", r.findings[0]);
}

/// The check's requests run ahead of its decoders: many in flight at once over the 20 ms
/// server (one per decoding thread would be 2 here), every chunk fetched once.
#[test]
fn http_checks_keep_many_requests_in_flight() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("ahead");
    write_array(&sv.root.join(&name), 16, None);
    let url = format!("{}/{name}", sv.url);
    let chunks = chunk_count(16);
    let from = log_len(&sv.log);
    let r = check(&url, &CheckOptions::default().with_concurrency(2));
    assert!(r.is_clean() && r.chunks_checked == chunks, "{r:?}");
    let t = traffic(&sv.log, from, &format!("{name}/c/"), chunks);
    let mut gets: Vec<&String> = t
        .requests
        .iter()
        .filter(|(m, _, _)| m == "GET")
        .map(|(_, p, _)| p)
        .collect();
    gets.sort();
    gets.dedup();
    let peak = t.peak_in_flight;
    assert_eq!(
        (t.requests.len(), gets.len()),
        (chunks, chunks),
        "every chunk once"
    );
    assert!(
        peak >= 16,
        "only {peak} requests were ever in flight at once"
    );
    // The limit is obeyed: io_concurrency 4, and the 2 decoding threads.
    let from = log_len(&sv.log);
    let r = check(
        &url,
        &CheckOptions::default()
            .with_concurrency(2)
            .with_io_concurrency(4),
    );
    assert!(r.is_clean());
    let peak = traffic(&sv.log, from, &format!("{name}/c/"), chunks).peak_in_flight;
    assert!(
        peak <= 4 + 2,
        "{peak} requests in flight with io_concurrency 4"
    );
}

/// A server that answers 503 to the first request of every key: the store's retries get
/// every chunk, and the check is clean.
#[test]
fn http_checks_retry_a_faulty_server() {
    let Some(sv) = server("FAULTY") else { return };
    let name = unique("faulty");
    write_array(&sv.root.join(&name), 32, None);
    let r = check(&format!("{}/{name}", sv.url), &CheckOptions::default());
    assert!(r.is_clean(), "{:?}", r.findings);
    assert_eq!(r.chunks_checked, chunk_count(32));
}

/// Puts (or, with `None`, deletes) one object.
fn put(endpoint: &str, bucket: &str, key: &str, value: Option<Vec<u8>>) {
    let o = s3::options(endpoint, "30s");
    let store =
        zarrbuf::store::object_store_for_url(&format!("s3://{bucket}"), &opts_ref(&o)).unwrap();
    let path = object_store::path::Path::from(key);
    s3::runtime(1).block_on(async {
        match value {
            Some(v) => {
                store.put(&path, v.into()).await.unwrap();
            }
            None => store.delete(&path).await.unwrap(),
        }
    });
}

/// Over S3 the check classifies the listing: clean as uploaded, then a key outside the grid
/// and an unknown key are notes, a missing chunk no damage, an overwritten chunk damage; a
/// sharded array names its damaged inner chunk.
#[test]
fn s3_checks_classify_the_listing() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let bucket = "check-remote";
    create_bucket(&endpoint, bucket);
    let o = s3::options(&endpoint, "30s");
    let opts =
        CheckOptions::default().with_open(OpenOptions::default().with_store_options(opts_ref(&o)));
    for inner in [None, Some(16)] {
        let name = unique(if inner.is_some() {
            "s3-sharded"
        } else {
            "s3-plain"
        });
        let local = std::env::temp_dir().join(&name);
        write_array(&local, 32, inner);
        s3::runtime(2).block_on(s3::upload_dir(&endpoint, bucket, &name, &local));
        let url = format!("s3://{bucket}/{name}");
        let r = check(&url, &opts);
        assert!(r.is_clean(), "{:?}", r.findings);
        assert_eq!(r.keys, KeySource::Listing);
        assert_eq!(r.chunks_checked, chunk_count(32));
        assert_eq!(
            r.inner_chunks_checked,
            if inner.is_some() {
                chunk_count(32) * 8
            } else {
                0
            }
        );

        put(
            &endpoint,
            bucket,
            &format!("{name}/c/9/0/0"),
            Some(vec![1, 2, 3]),
        );
        put(
            &endpoint,
            bucket,
            &format!("{name}/notes.txt"),
            Some(b"hello".to_vec()),
        );
        put(&endpoint, bucket, &format!("{name}/c/0/0/1"), None);
        let damaged = local.join("c/1/2/3");
        damage(&damaged);
        put(
            &endpoint,
            bucket,
            &format!("{name}/c/1/2/3"),
            Some(std::fs::read(&damaged).unwrap()),
        );
        let r = check(&url, &opts);
        assert_eq!(r.chunks_checked, chunk_count(32) - 1);
        let kinds: Vec<(&str, Problem)> = r
            .findings
            .iter()
            .map(|f| (f.key.as_str(), f.problem))
            .collect();
        assert!(
            kinds.contains(&("c/9/0/0", Problem::OutsideGrid)),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("notes.txt", Problem::Unknown)),
            "{kinds:?}"
        );
        let damage: Vec<_> = r
            .findings
            .iter()
            .filter(|f| f.problem.is_damage())
            .collect();
        assert!(
            !damage.is_empty() && damage.iter().all(|f| f.key == "c/1/2/3"),
            "{damage:?}"
        );
        assert_eq!(damage[0].inner.is_some(), inner.is_some(), "{}", damage[0]);
        let _ = std::fs::remove_dir_all(&local);
    }
}

/// A repair of an object store is refused, saying what to do instead.
#[test]
fn repairs_of_object_stores_are_refused() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("repair");
    write_array(&sv.root.join(&name), 32, None);
    for url in [
        format!("{}/{name}", sv.url),
        "s3://no-such-bucket/a.zarr".to_string(),
    ] {
        let err = check_array(&url, "", &CheckOptions::default().with_repair(true))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is an object store") && err.contains("without --repair"),
            "{err}"
        );
    }
}

fn zarrbuf_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .expect("the zarrbuf binary runs")
}

/// `zarrbuf check <http url>`: clean with a line saying the grid was walked, then exit 1
/// naming the damaged chunk; `--json` says how the keys were found; `--repair` is one error.
#[test]
fn the_cli_checks_an_http_url() {
    let Some(sv) = server("LATENCY") else { return };
    let name = unique("cli");
    let dir = sv.root.join(&name);
    write_array(&dir, 32, None);
    let url = format!("{}/{name}", sv.url);
    let o = zarrbuf_cli(&["check", &url, "--io-concurrency", "8"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("keys outside the grid and unknown files cannot be seen"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} chunks", chunk_count(32))) && err.contains("0 damaged"),
        "{err}"
    );
    damage(&dir.join("c/0/1/2"));
    let o = zarrbuf_cli(&["check", &url]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.starts_with("c/0/1/2: "), "{out}");
    let o = zarrbuf_cli(&["check", &url, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["keys"], "chunk-grid");
    assert_eq!(doc["clean"], false);
    let o = zarrbuf_cli(&["check", &url, "--repair"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !o.status.success() && err.lines().count() == 1 && err.starts_with("error: "),
        "{err}"
    );
    assert!(err.contains("is an object store"), "{err}");
}
