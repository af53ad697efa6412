//! Real faults against a real S3 server, all on 127.0.0.1: the server process killed while a
//! multi-MiB read is in flight, and a server that stalls in the middle of a response (a
//! proxy in this test forwards the first bytes of each response, then sends nothing more but
//! keeps the connection open). Each fault must give one clean `Err` within a bound set by the
//! object_store options (`timeout`, `connect_timeout`, `max_retries`, `retry_timeout`),
//! never a hang or a panic; no task of the failed read may outlive it (the runtime shuts
//! down at once); and the next read, once the server is back, must succeed exactly.
//!
//! Every test starts a private `moto_server` (from `.venv`, which
//! scripts/setup-python-env.sh installs) on a free port, so killing it does not disturb the
//! shared servers of tests/it/remote.rs. Without `.venv/bin/moto_server` the tests skip visibly
//! (tests/support/src/lib.rs), and fail under ZARRBUF_REQUIRE_SERVERS=1.

use crate::common::{Need, root, skip};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::Range;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zarrbuf::{ArrayReadAsyncExt, BufferPrototype, NDBuffer, options::ReadOptions};

/// object_store's per-request limits for these tests. With 2 retries a chunk's fetch gives up
/// after at most 3 attempts of 2 s each plus backoff.
const LIMITS: [(&str, &str); 4] = [
    ("timeout", "2s"),
    ("connect_timeout", "2s"),
    ("max_retries", "2"),
    ("retry_timeout", "10s"),
];

/// How long a failed read may take, from those limits with room for a loaded 2-core machine
/// (3 attempts x 2 s + backoff is about 7 s per chunk; chunks fail in parallel).
const ERROR_WITHIN: Duration = Duration::from_secs(30);

/// Past this, the read counts as hung.
const HANG: Duration = Duration::from_secs(120);

/// The array: 16 MiB of uint32 in eight 2 MiB chunks, uncompressed.
const SHAPE: [u64; 3] = [8, 512, 1024];
const CHUNK: [u64; 3] = [1, 512, 1024];

fn value(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ 0x5a5a_5a5a
}

fn expected() -> NDBuffer {
    let n = SHAPE.iter().product::<u64>() as usize;
    let shape: Vec<usize> = SHAPE.iter().map(|&n| n as usize).collect();
    NDBuffer::from_vec((0..n).map(value).collect::<Vec<u32>>(), &shape).unwrap()
}

fn all() -> Vec<Range<u64>> {
    SHAPE.iter().map(|&n| 0..n).collect()
}

fn options(endpoint: &str) -> Vec<(&'static str, String)> {
    let mut o = vec![
        ("aws_endpoint", endpoint.to_string()),
        ("aws_access_key_id", "testing".to_string()),
        ("aws_secret_access_key", "testing".to_string()),
        ("aws_region", "us-east-1".to_string()),
    ];
    o.extend(LIMITS.iter().map(|(k, v)| (*k, v.to_string())));
    o
}

fn opts_ref<'a>(o: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    o.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Drops the runtime with a deadline and asserts it was met: a blocking task or a spawned
/// future of a failed read still running would hold the shutdown to its deadline.
fn shut_down_promptly(rt: tokio::runtime::Runtime) {
    let deadline = Duration::from_secs(10);
    let t = Instant::now();
    rt.shutdown_timeout(deadline);
    let took = t.elapsed();
    assert!(
        took < deadline - Duration::from_secs(1),
        "the runtime took {took:?} to shut down: work of a failed read was left running"
    );
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// `.venv/bin/moto_server`, or `None` after a visible skip.
fn moto_binary() -> Option<PathBuf> {
    let path = root().join("../.venv/bin/moto_server");
    if path.exists() {
        Some(path)
    } else {
        skip(
            Need::Servers,
            "fault tests against a private S3 server",
            &format!(
                "{} is missing: bash scripts/setup-python-env.sh",
                path.display()
            ),
        );
        None
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private moto_server on 127.0.0.1:`port`, killed when dropped.
struct Moto {
    child: Child,
}

impl Moto {
    fn start(binary: &PathBuf, port: u16) -> Moto {
        let log_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("s3-faults");
        std::fs::create_dir_all(&log_dir).unwrap();
        let log = log_dir.join(format!("moto-{port}.log"));
        let child = Command::new(binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap();
        let mut moto = Moto { child };
        let t = Instant::now();
        loop {
            if let Some(status) = moto.child.try_wait().unwrap() {
                panic!(
                    "moto_server on port {port} exited ({status}): {}",
                    std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
                );
            }
            if http_ok(port, "GET /moto-api/ HTTP/1.0\r\n\r\n") {
                return moto;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "moto_server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `request` to 127.0.0.1:`port`; whether a 2xx answer came back.
fn http_ok(port: u16, request: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && head[9] == b'2'
}

/// Creates the bucket and uploads the array straight to the server at `port`.
fn populate(rt: &tokio::runtime::Runtime, port: u16) {
    assert!(
        http_ok(
            port,
            &format!(
                "PUT /faults HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        ),
        "CreateBucket failed"
    );
    let o = options(&format!("http://127.0.0.1:{port}"));
    let store =
        zarrbuf::store::object_store_for_url("s3://faults/big.zarr", &opts_ref(&o)).unwrap();
    let metadata = format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":{SHAPE:?},"data_type":"uint32",
"chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":{CHUNK:?}}}}},
"chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
"fill_value":0,"codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}}],"attributes":{{}}}}"#
    );
    let per_chunk = CHUNK.iter().product::<u64>() as usize;
    rt.block_on(async {
        use object_store::ObjectStoreExt;
        store
            .put(&"zarr.json".into(), metadata.into_bytes().into())
            .await
            .unwrap();
        for c in 0..(SHAPE[0] / CHUNK[0]) as usize {
            let bytes: Vec<u8> = (c * per_chunk..(c + 1) * per_chunk)
                .flat_map(|i| value(i).to_le_bytes())
                .collect();
            store
                .put(&format!("c/{c}/0/0").as_str().into(), bytes.into())
                .await
                .unwrap();
        }
    });
}

fn assert_exact(got: &NDBuffer, what: &str) {
    let want = expected();
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert!(
        got.to_vec::<u32>().unwrap() == want.to_vec::<u32>().unwrap(),
        "{what}: contents differ"
    );
}

/// Checks a failed read: an error (not a hang, not a panic), within [`ERROR_WITHIN`], that
/// names the array.
fn assert_clean_error(
    result: Result<zarrbuf::Result<NDBuffer>, tokio::time::error::Elapsed>,
    took: Duration,
    what: &str,
) -> String {
    let outcome = result.unwrap_or_else(|_| panic!("{what}: the read hung for {HANG:?}"));
    let err = match outcome {
        Ok(_) => panic!("{what}: the read succeeded"),
        Err(e) => e,
    };
    let msg = err.to_string();
    println!("{what}: error after {took:?}: {msg}");
    assert!(
        took < ERROR_WITHIN,
        "{what}: the error took {took:?} (limit {ERROR_WITHIN:?}): {msg}"
    );
    assert!(
        msg.contains("big.zarr") || msg.contains("c/"),
        "{what}: the error should name the array or chunk: {msg}"
    );
    msg
}

#[test]
fn killing_the_server_mid_read_gives_one_error_and_the_next_read_succeeds() {
    let Some(binary) = moto_binary() else { return };
    let port = free_port();
    let moto = Arc::new(Mutex::new(Moto::start(&binary, port)));
    let rt = runtime();
    populate(&rt, port);
    let o = options(&format!("http://127.0.0.1:{port}"));
    let array = rt
        .block_on(zarrbuf::open_opt_async(
            "s3://faults/big.zarr",
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
        ))
        .unwrap();
    let opts = ReadOptions::default().with_concurrency(2);
    // A first read fills the connection pool: its tasks are the baseline.
    let baseline = rt.block_on(async {
        let got = array
            .read_opt_async(&all(), &BufferPrototype::cpu(), &opts)
            .await
            .unwrap();
        assert_exact(&got, "before the fault");
        alive_tasks()
    });

    // Kill the server once the first chunk of the next read is in: the other chunks are in
    // flight or not yet asked for (one request fetched ahead at a time, so that the read
    // cannot have fetched them all before the first is decoded).
    let killed_at = Arc::new(AtomicUsize::new(0));
    let (killer, k) = (moto.clone(), killed_at.clone());
    let faulty = opts.clone().with_io_concurrency(1).with_progress(move |p| {
        if k.load(Ordering::SeqCst) == 0 {
            killer.lock().unwrap().kill();
            k.store(p.chunks_done, Ordering::SeqCst);
        }
    });
    rt.block_on(async {
        let t = Instant::now();
        let result = tokio::time::timeout(
            HANG,
            array.read_opt_async(&all(), &BufferPrototype::cpu(), &faulty),
        )
        .await;
        assert_clean_error(result, t.elapsed(), "server killed mid-read");
        assert!(
            killed_at.load(Ordering::SeqCst) < 8,
            "the server was killed only after the last chunk"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = alive_tasks();
        assert!(
            alive <= baseline,
            "{alive} tasks alive after the failed read, {baseline} before it"
        );
    });

    // The same port, a fresh server (moto keeps its objects in memory): the same array
    // handle reads again.
    *moto.lock().unwrap() = Moto::start(&binary, port);
    populate(&rt, port);
    rt.block_on(async {
        let got = tokio::time::timeout(
            HANG,
            array.read_opt_async(&all(), &BufferPrototype::cpu(), &opts),
        )
        .await
        .expect("the read after the restart hung")
        .expect("the read after the restart failed");
        assert_exact(&got, "after the restart");
    });
    drop(array);
    shut_down_promptly(rt);
}

#[test]
fn a_server_stalling_mid_response_gives_one_error_and_the_next_read_succeeds() {
    let Some(binary) = moto_binary() else { return };
    let port = free_port();
    let _moto = Moto::start(&binary, port);
    let rt = runtime();
    populate(&rt, port);
    let proxy = StallProxy::start(port);
    let o = options(&format!("http://127.0.0.1:{}", proxy.port));
    let array = rt
        .block_on(zarrbuf::open_opt_async(
            "s3://faults/big.zarr",
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
        ))
        .unwrap();
    let opts = ReadOptions::default().with_concurrency(2);
    let baseline = rt.block_on(async {
        let got = array
            .read_opt_async(&all(), &BufferPrototype::cpu(), &opts)
            .await
            .unwrap();
        assert_exact(&got, "before the stall");
        alive_tasks()
    });

    // Headers and the first 64 KiB of each 2 MiB chunk, then silence on an open connection.
    proxy.stall_after(64 << 10);
    rt.block_on(async {
        let t = Instant::now();
        let result = tokio::time::timeout(
            HANG,
            array.read_opt_async(&all(), &BufferPrototype::cpu(), &opts),
        )
        .await;
        let took = t.elapsed();
        assert_clean_error(result, took, "server stalled mid-response");
        assert!(
            took >= Duration::from_secs(2),
            "the error came after {took:?}, before the 2 s timeout: it was not the stall"
        );
        assert!(
            proxy.stalled.load(Ordering::SeqCst),
            "no response was ever held"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = alive_tasks();
        assert!(
            alive <= baseline,
            "{alive} tasks alive after the failed read, {baseline} before it"
        );
    });

    proxy.stall_after(usize::MAX);
    rt.block_on(async {
        let got = tokio::time::timeout(
            HANG,
            array.read_opt_async(&all(), &BufferPrototype::cpu(), &opts),
        )
        .await
        .expect("the read after the stall hung")
        .expect("the read after the stall failed");
        assert_exact(&got, "after the stall");
    });
    drop(array);
    shut_down_promptly(rt);
    drop(proxy);
}

/// A TCP proxy on 127.0.0.1 in front of the server. While a stall is set, each connection
/// forwards that many more bytes of the server's answers, then holds: it stops sending to
/// the client but keeps both connections open, until the client goes away or the stall is
/// lifted.
struct StallProxy {
    port: u16,
    /// Bytes each connection may still forward once a stall starts; `usize::MAX`: no stall.
    limit: Arc<AtomicUsize>,
    /// Set once some connection held back data.
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl StallProxy {
    fn start(upstream: u16) -> StallProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let limit = Arc::new(AtomicUsize::new(usize::MAX));
        let stalled = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s, st) = (limit.clone(), stalled.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let server = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
                        proxy_connection(client, server, l.clone(), s.clone(), st.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        StallProxy {
            port,
            limit,
            stalled,
            stop,
            accept: Some(accept),
        }
    }

    fn stall_after(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::SeqCst);
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn proxy_connection(
    client: TcpStream,
    server: TcpStream,
    limit: Arc<AtomicUsize>,
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let closed = Arc::new(AtomicBool::new(false));
    // Client to server: everything; when the client leaves, both sides close.
    {
        let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let closed = closed.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            closed.store(true, Ordering::SeqCst);
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
        });
    }
    // Server to client: up to the stall limit.
    std::thread::spawn(move || {
        let (mut from, mut to) = (server, client);
        let mut buf = vec![0u8; 16 << 10];
        let mut sent_while_stalling = 0usize;
        'read: while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut at = 0;
            while at < n {
                let cap = limit.load(Ordering::SeqCst);
                if cap == usize::MAX {
                    sent_while_stalling = 0;
                    if to.write_all(&buf[at..n]).is_err() {
                        break 'read;
                    }
                    at = n;
                    continue;
                }
                let room = cap.saturating_sub(sent_while_stalling);
                if room == 0 {
                    // Hold: nothing more to the client, the connection stays open.
                    stalled.store(true, Ordering::SeqCst);
                    if closed.load(Ordering::SeqCst) || stop.load(Ordering::SeqCst) {
                        break 'read;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                let k = room.min(n - at);
                if to.write_all(&buf[at..at + k]).is_err() {
                    break 'read;
                }
                sent_while_stalling += k;
                at += k;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// The retry options these tests rely on are zarrbuf's own (object_store has no keys for
/// them): they are taken, and bad values are errors naming the option.
#[test]
fn retry_options_are_taken_and_checked() {
    let base = options("http://127.0.0.1:9");
    assert!(zarrbuf::store::object_store_for_url("s3://faults", &opts_ref(&base)).is_ok());
    for (key, value) in [
        ("max_retries", "x"),
        ("max_retries", "-1"),
        ("retry_timeout", "soon"),
        ("retry_timeout", "5 parsecs"),
    ] {
        let mut o = base.clone();
        o.retain(|(k, _)| *k != key);
        o.push((key, value.to_string()));
        let e = zarrbuf::store::object_store_for_url("s3://faults", &opts_ref(&o))
            .err()
            .unwrap_or_else(|| panic!("{key}={value} was accepted"));
        assert!(e.to_string().contains(key), "{key}={value}: {e}");
    }
    for value in ["500ms", "2.5s", "2m", "1h", "30"] {
        let mut o = base.clone();
        o.retain(|(k, _)| *k != "retry_timeout");
        o.push(("retry_timeout", value.to_string()));
        assert!(
            zarrbuf::store::object_store_for_url("s3://faults", &opts_ref(&o)).is_ok(),
            "retry_timeout={value}"
        );
    }
}

/// A chunk write cut off mid-upload never becomes visible: zarrbuf stores each key with one
/// PUT (zarrs_object_store's `set`; no multipart upload that could be left half done), and a
/// proxy that forwards only the first 64 KiB of each request, then closes both sides, makes
/// every attempt fail. The key must then be absent on the server, while the same write sent
/// straight to the server lands whole.
#[test]
fn an_interrupted_put_never_becomes_visible() {
    let Some(binary) = moto_binary() else { return };
    let port = free_port();
    let _moto = Moto::start(&binary, port);
    let rt = runtime();
    populate(&rt, port);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { break };
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)) else {
                break;
            };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 16 << 10];
                let mut forwarded = 0usize;
                while forwarded < (64 << 10) {
                    match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) if server.write_all(&buf[..n]).is_err() => break,
                        Ok(n) => forwarded += n,
                    }
                }
                let _ = server.shutdown(Shutdown::Both);
                let _ = client.shutdown(Shutdown::Both);
            });
        }
    });
    let value: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 251) as u8).collect();
    let key = "c/9/0/0";
    let store_at = |endpoint: String| {
        let o = options(&endpoint);
        zarrbuf::store::object_store_for_url("s3://faults/big.zarr", &opts_ref(&o)).unwrap()
    };
    let put = |endpoint: String| {
        let store = store_at(endpoint);
        let value = value.clone();
        rt.block_on(async move {
            use object_store::ObjectStoreExt;
            store.put(&key.into(), value.into()).await.map(|_| ())
        })
    };
    let size_on_server = || {
        let store = store_at(format!("http://127.0.0.1:{port}"));
        rt.block_on(async move {
            use object_store::ObjectStoreExt;
            match store.head(&key.into()).await {
                Ok(meta) => Some(meta.size),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => panic!("HEAD {key}: {e}"),
            }
        })
    };
    let cut = put(format!("http://127.0.0.1:{proxy_port}"));
    assert!(cut.is_err(), "a PUT cut off after 64 KiB succeeded");
    assert_eq!(
        size_on_server(),
        None,
        "the interrupted PUT of {key} became visible"
    );
    put(format!("http://127.0.0.1:{port}")).unwrap();
    assert_eq!(
        size_on_server(),
        Some(value.len() as u64),
        "the whole PUT of {key}"
    );
}
