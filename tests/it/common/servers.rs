//! The local servers of scripts/start-test-servers.sh (nginx at latency and without, a faulty and a
//! short-answering one, moto's S3, all on 127.0.0.1), found through the environment
//! variables the script prints. A test whose server is not set skips visibly, failing
//! under ZARRBUF_REQUIRE_SERVERS=1 ([`skip`]).

use super::{Need, skip};
use std::path::PathBuf;

/// One nginx server: its URL, the directory it serves and its access log.
pub struct Server {
    pub url: String,
    pub root: PathBuf,
    pub log: PathBuf,
}

/// The nginx server `name` (`LATENCY`, `NEAR`, `CDN`, `FAULTY`, `SHORT`: `ZARRBUF_TEST_{name}_URL`,
/// `_ROOT`, `_LOG`), or a skip of `what` when it is not set.
pub fn server(name: &str, what: &str) -> Option<Server> {
    let var = |part: &str| std::env::var(format!("ZARRBUF_TEST_{name}_{part}"));
    match (var("URL"), var("ROOT"), var("LOG")) {
        (Ok(url), Ok(root), Ok(log)) => Some(Server {
            url,
            root: root.into(),
            log: log.into(),
        }),
        _ => {
            skip(
                Need::Servers,
                what,
                &format!(
                    "ZARRBUF_TEST_{name}_URL / _ROOT / _LOG are not set: \
                     source <(bash scripts/start-test-servers.sh)"
                ),
            );
            None
        }
    }
}

/// The S3 server's endpoint (`ZARRBUF_TEST_S3_ENDPOINT`), or a skip of `what`.
pub fn s3_endpoint(what: &str) -> Option<String> {
    match std::env::var("ZARRBUF_TEST_S3_ENDPOINT") {
        Ok(e) => Some(e),
        Err(_) => {
            skip(
                Need::Servers,
                what,
                "ZARRBUF_TEST_S3_ENDPOINT is not set: source <(bash scripts/start-test-servers.sh)",
            );
            None
        }
    }
}

/// A store name no earlier run used (the servers keep per-path state, and their logs grow).
pub fn unique(what: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{what}-{}-{n}-{nanos}.zarr", std::process::id())
}
