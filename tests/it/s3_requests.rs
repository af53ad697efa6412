//! How many requests a read of a sharded array sends to the local S3 server: a counting
//! proxy on 127.0.0.1 sits between zarrbuf and the server of scripts/start-test-servers.sh
//! and records every request (method, key, byte range). A whole-array read must make at most
//! two requests per shard — the index, and the inner chunks merged into one range — however
//! many inner chunks a shard holds and however many workers read it at once.
//!
//! Arrays: the sharded fixtures written by zarr-python and tensorstore (index at the start
//! and at the end, missing shards and inner chunks, gzip/zstd/lz4, transposes), and a
//! 64 x 64 x 64 array in 32^3 shards of 8^3 inner chunks (64 inner chunks a shard) written
//! by zarrs, whose values are a formula checked here. Without the servers the tests skip
//! visibly (tests/support/src/lib.rs), failing under ZARRBUF_REQUIRE_SERVERS=1.

use crate::common::s3::{create_bucket, opts_ref, upload_dir};
use crate::common::servers;
use crate::common::{fixtures, root, s3};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, NDBuffer, options::ReadOptions};

/// The S3 server's endpoint, or a skip that names these tests.
fn endpoint() -> Option<String> {
    servers::s3_endpoint("request counts against the local S3 server")
}

fn s3_options(endpoint: &str) -> Vec<(&'static str, String)> {
    s3::options(endpoint, "30s")
}

/// One request the proxy saw.
#[derive(Clone, Debug)]
struct Request {
    method: String,
    path: String,
    range: Option<String>,
}

/// A TCP proxy on 127.0.0.1 that forwards everything and records each answered request's
/// head. The requests it sees carry no bodies (reads only), so each head ends a request.
struct CountingProxy {
    port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl CountingProxy {
    fn start(upstream: &str) -> CountingProxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let server = TcpStream::connect(&upstream).unwrap();
                        forward(client, server, s.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        CountingProxy {
            port,
            seen,
            stop,
            accept: Some(accept),
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn parse_head(head: &str) -> Request {
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let range = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("range"))
        .map(|(_, v)| v.trim().to_string());
    Request {
        method,
        path,
        range,
    }
}

/// Forwards one connection both ways. A request is recorded when the server's response to
/// it has arrived: a request sent on a keep-alive connection the server was closing, and
/// sent again by the client on a new one, is one request the server answered, not two.
fn forward(client: TcpStream, server: TcpStream, seen: Arc<Mutex<Vec<Request>>>) {
    let sent: Arc<Mutex<std::collections::VecDeque<Request>>> = Arc::default();
    {
        let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let sent = sent.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            let mut pending: Vec<u8> = Vec::new();
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                // Queued before forwarded: the response cannot overtake its request.
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&pending[..end]).into_owned();
                    sent.lock().unwrap().push_back(parse_head(&head));
                    pending.drain(..end + 4);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
        });
    }
    std::thread::spawn(move || {
        let (mut from, mut to) = (server, client);
        let mut buf = vec![0u8; 64 << 10];
        let mut pending: Vec<u8> = Vec::new();
        let mut body_left = 0usize;
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
            pending.extend_from_slice(&buf[..n]);
            loop {
                if body_left > 0 {
                    let k = body_left.min(pending.len());
                    pending.drain(..k);
                    body_left -= k;
                    if body_left > 0 {
                        break;
                    }
                }
                let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                    break;
                };
                let head = String::from_utf8_lossy(&pending[..end]).into_owned();
                pending.drain(..end + 4);
                let request = sent.lock().unwrap().pop_front();
                let status: u16 = head
                    .split(' ')
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let length = head
                    .split("\r\n")
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let is_head = request.as_ref().is_some_and(|r| r.method == "HEAD");
                if !(is_head || status == 204 || status == 304 || (100..200).contains(&status)) {
                    body_left = length;
                }
                if let Some(r) = request {
                    seen.lock().unwrap().push(r);
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

fn runtime() -> tokio::runtime::Runtime {
    s3::runtime(4)
}

/// Requests per shard object among `requests` (keys under `prefix` that hold chunk data).
fn per_object(requests: &[Request], prefix: &str) -> HashMap<String, Vec<Request>> {
    let mut out: HashMap<String, Vec<Request>> = HashMap::new();
    for r in requests {
        let key = r.path.split('?').next().unwrap_or("");
        if key.contains(prefix) && !key.ends_with("zarr.json") && !key.ends_with(".zarray") {
            out.entry(key.to_string()).or_default().push(r.clone());
        }
    }
    out
}

fn assert_at_most_two_per_shard(what: &str, requests: &[Request], prefix: &str) -> usize {
    let per = per_object(requests, prefix);
    for (key, rs) in &per {
        assert!(
            rs.len() <= 2,
            "{what}: {} requests for shard {key} (want at most 2: the index and one range): {rs:?}",
            rs.len()
        );
        assert!(
            rs.iter().all(|r| r.method == "GET" && r.range.is_some()),
            "{what}: every shard request is a ranged GET: {rs:?}"
        );
    }
    per.len()
}

/// 64^3 uint16, 32^3 shards of 8^3 zstd inner chunks; value at (i, j, k) is a formula.
fn big_value(i: u64, j: u64, k: u64) -> u16 {
    ((i * 4096 + j * 64 + k).wrapping_mul(2_654_435_761) >> 7) as u16
}

fn write_big(dir: &Path) -> NDBuffer {
    use zarrbuf::ArrayWriteExt;
    use zarrs::array::{ArrayBuilder, data_type};
    let _ = std::fs::remove_dir_all(dir);
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).unwrap());
    let array = ArrayBuilder::new(
        vec![64, 64, 64],
        vec![32, 32, 32],
        data_type::uint16(),
        0u16,
    )
    .subchunk_shape(vec![8, 8, 8])
    .bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
        1, false,
    ))])
    .build(store, "/")
    .unwrap();
    array.store_metadata().unwrap();
    let mut values = Vec::with_capacity(64 * 64 * 64);
    for i in 0..64 {
        for j in 0..64 {
            for k in 0..64 {
                values.push(big_value(i, j, k));
            }
        }
    }
    let data = NDBuffer::from_vec(values, &[64, 64, 64]).unwrap();
    array.write_all(&data).unwrap();
    data
}

#[test]
fn a_whole_sharded_read_makes_at_most_two_requests_per_shard() {
    let Some(s3) = endpoint() else { return };
    let rt = runtime();
    create_bucket(&s3, "requests");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("s3-requests-big-{}.zarr", std::process::id()));
    let want = write_big(&dir);
    rt.block_on(upload_dir(&s3, "requests", "big.zarr", &dir));
    let proxy = CountingProxy::start(&s3);
    let o = s3_options(&proxy.endpoint());
    rt.block_on(async {
        let array = zarrbuf::open_opt_async(
            "s3://requests/big.zarr",
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
        )
        .await
        .unwrap();
        proxy.take();
        for concurrency in [1, 8] {
            let opts = ReadOptions::default().with_concurrency(concurrency);
            let all = [0..64u64, 0..64, 0..64];
            let got = array
                .read_opt_async(&all, &BufferPrototype::cpu(), &opts)
                .await
                .unwrap();
            assert_eq!(
                got.to_native_bytes().unwrap(),
                want.to_native_bytes().unwrap()
            );
            let seen = proxy.take();
            eprintln!(
                "whole read of 8 shards x 64 inner chunks, concurrency {concurrency}: {} requests",
                seen.len()
            );
            let shards = assert_at_most_two_per_shard(
                &format!("concurrency {concurrency}"),
                &seen,
                "big.zarr/c/",
            );
            assert_eq!(shards, 8, "every shard read: {seen:?}");
            // A subset inside one shard: still one index and one data request.
            let part = [3..29u64, 40..60, 33..63];
            let got = array
                .read_opt_async(&part, &BufferPrototype::cpu(), &opts)
                .await
                .unwrap();
            let r: Vec<Range<usize>> = part
                .iter()
                .map(|r| r.start as usize..r.end as usize)
                .collect();
            assert_eq!(
                got.to_native_bytes().unwrap(),
                want.get(&r).unwrap().to_native_bytes().unwrap()
            );
            let seen = proxy.take();
            assert_eq!(
                assert_at_most_two_per_shard("a subset", &seen, "big.zarr/c/"),
                1,
                "{seen:?}"
            );
        }
    });
}

#[test]
fn sharded_fixtures_read_exactly_with_at_most_two_requests_per_shard() {
    let Some(s3) = endpoint() else { return };
    let rt = runtime();
    create_bucket(&s3, "requests-fixtures");
    let proxy = CountingProxy::start(&s3);
    let o = s3_options(&proxy.endpoint());
    let sharded: Vec<_> = fixtures()
        .into_iter()
        .filter(|f| {
            let meta = root().join(&f.store).join(&f.path).join("zarr.json");
            std::fs::read_to_string(meta).is_ok_and(|m| m.contains("sharding_indexed"))
        })
        .collect();
    assert!(
        sharded.len() >= 6,
        "only {} sharded fixtures",
        sharded.len()
    );
    for f in &sharded {
        let name = f.store.trim_start_matches("data/").to_string();
        rt.block_on(upload_dir(
            &s3,
            "requests-fixtures",
            &name,
            &root().join(&f.store),
        ));
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        let local = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let all: Vec<Range<u64>> = local.shape().iter().map(|&n| 0..n).collect();
        rt.block_on(async {
            let array = zarrbuf::open_opt_async(
                &format!("s3://requests-fixtures/{name}"),
                &f.path,
                &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
            )
            .await
            .unwrap();
            proxy.take();
            let got = array
                .read_opt_async(&all, &BufferPrototype::cpu(), &ReadOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            assert_eq!(
                got.to_native_bytes().unwrap(),
                want.to_native_bytes().unwrap(),
                "{}",
                f.name
            );
            assert_at_most_two_per_shard(&f.name, &proxy.take(), &format!("{name}/"));
        });
        // The sync staged path (local files) takes the same merged requests.
        let staged = ReadOptions::default().with_mode(zarrbuf::options::PipelineMode::Staged);
        let got = local
            .read_opt(&all, &BufferPrototype::cpu(), &staged)
            .unwrap();
        assert_eq!(
            got.to_native_bytes().unwrap(),
            want.to_native_bytes().unwrap(),
            "{} staged",
            f.name
        );
    }
}
