//! Helpers for the tests that talk to the local S3 server (moto_server on 127.0.0.1, from
//! scripts/start-test-servers.sh): object_store options, a bucket, uploads, a runtime.

use object_store::ObjectStoreExt;
use std::io::{Read, Write};
use std::path::Path;

/// object_store options for the S3 server at `endpoint` (moto takes any credentials).
pub fn options(endpoint: &str, timeout: &str) -> Vec<(&'static str, String)> {
    vec![
        ("aws_endpoint", endpoint.to_string()),
        ("aws_access_key_id", "testing".into()),
        ("aws_secret_access_key", "testing".into()),
        ("aws_region", "us-east-1".into()),
        ("timeout", timeout.into()),
    ]
}

/// The options as the `(&str, &str)` pairs the zarrbuf API takes.
pub fn opts_ref<'a>(o: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    o.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Creates `bucket` on the S3 server (a bare CreateBucket request; moto does not check signatures).
pub fn create_bucket(endpoint: &str, bucket: &str) {
    let addr = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 200") || reply.contains("BucketAlreadyOwnedByYou"),
        "{reply}"
    );
}

/// Uploads every file under `dir` to `s3://bucket/prefix/`, straight to the server at
/// `endpoint`.
pub async fn upload_dir(endpoint: &str, bucket: &str, prefix: &str, dir: &Path) {
    let o = options(endpoint, "30s");
    let store =
        zarrbuf::store::object_store_for_url(&format!("s3://{bucket}"), &opts_ref(&o)).unwrap();
    for path in super::walk(dir) {
        let rel = path
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        store
            .put(
                &object_store::path::Path::from(format!("{prefix}/{rel}")),
                std::fs::read(&path).unwrap().into(),
            )
            .await
            .unwrap();
    }
}

/// A multi-thread tokio runtime with `workers` threads.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}
