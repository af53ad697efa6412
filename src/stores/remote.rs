//! Object storage (S3, GCS, Azure, HTTP) and local files through `object_store`: the store
//! for a URL, and the type of the async zarrs arrays over it (opened in `zarr/open/open_array.rs`).

pub use super::remote_store::RemoteStore;
use crate::errors::{Error, Result};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use zarrs::array::Array;

/// A zarrs array over an object store.
pub type AsyncArray = Array<RemoteStore>;

/// Builds the object store for `url` (rooted at the URL's path) with credentials, region
/// and endpoint from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, including
/// `AWS_ENDPOINT_URL` for S3-compatible servers) and from `options` (object_store's
/// configuration keys, e.g. `("aws_endpoint", "http://127.0.0.1:9000")`,
/// `("aws_region", "us-east-1")`, `("timeout", "5s")`), which take precedence.
///
/// Two more options set object_store's retries, which have no configuration keys of their
/// own: `max_retries` (how many times a failed or timed-out request is retried; 0 disables
/// retries; default 10) and `retry_timeout` (no retry starts later than this after the first
/// attempt, e.g. `30s`, `500ms`, `2m`; default `3m`). A request can therefore take up to
/// about `(max_retries + 1) × timeout` plus backoff before its error is returned.
///
/// ```
/// let store = zarrbuf::store::object_store_for_url("memory://", &[])?;
/// # Ok::<(), zarrbuf::Error>(())
/// ```
// Without the remote backends only file:// and memory:// remain, which need no options.
#[cfg_attr(
    not(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http")),
    allow(unused_variables, dead_code)
)]
pub fn object_store_for_url(url: &str, options: &[(&str, &str)]) -> Result<Arc<dyn ObjectStore>> {
    let bad = |m: String| Error::store(url, m, None);
    let parsed = url::Url::parse(url).map_err(|e| {
        bad(format!(
            "not a URL ({e}); use s3://bucket/path, https://host/path, ..."
        ))
    })?;
    let (scheme, path) = object_store::ObjectStoreScheme::parse(&parsed).map_err(|e| {
        bad(format!(
            "{e}; supported: s3://, gs://, az://, abfs://, http(s)://, file://, memory://"
        ))
    })?;
    let prefix = ObjectPath::parse(path.as_ref()).map_err(|e| bad(e.to_string()))?;
    let with_options = |mut pairs: Vec<(String, String)>| {
        pairs.extend(
            options
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())),
        );
        pairs
    };
    use object_store::ObjectStoreScheme as S;
    let store: Arc<dyn ObjectStore> = match scheme {
        #[cfg(feature = "s3")]
        S::AmazonS3 => s3_store(url, prefix, with_options(Vec::new()), &bad)?,
        #[cfg(feature = "gcs")]
        S::GoogleCloudStorage => gcs_store(url, prefix, with_options(Vec::new()), &bad)?,
        #[cfg(feature = "azure")]
        S::MicrosoftAzure => azure_store(url, prefix, with_options(Vec::new()), &bad)?,
        #[cfg(feature = "http")]
        S::Http => {
            let plain = if url.starts_with("http://") {
                vec![("allow_http".to_string(), "true".to_string())]
            } else {
                Vec::new()
            };
            http_store(url, with_options(plain), &bad)?
        }
        S::Local => {
            let root = parsed
                .to_file_path()
                .map_err(|_| bad("not a local path".into()))?;
            Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(root)
                    .map_err(|e| bad(e.to_string()))?,
            )
        }
        S::Memory => Arc::new(object_store::memory::InMemory::new()),
        #[cfg(not(all(feature = "s3", feature = "gcs", feature = "azure", feature = "http")))]
        S::AmazonS3 | S::GoogleCloudStorage | S::MicrosoftAzure | S::Http => {
            let feature = match scheme {
                S::AmazonS3 => "s3",
                S::GoogleCloudStorage => "gcs",
                S::MicrosoftAzure => "azure",
                _ => "http",
            };
            return Err(bad(format!(
                "this build of zarrbuf has no {feature} support; rebuild it with the `{feature}` \
                 feature (on by default: `cargo build --features {feature}`)"
            )));
        }
        other => return Err(bad(format!("{other:?} URLs are not supported"))),
    };
    Ok(store)
}

/// The S3 store of `url` under `prefix`; `pairs` are the lower-cased options. A plain-HTTP
/// endpoint (from the options or `AWS_ENDPOINT_URL` / `AWS_ENDPOINT`) is allowed as such.
#[cfg(feature = "s3")]
fn s3_store(
    url: &str,
    prefix: ObjectPath,
    mut pairs: Vec<(String, String)>,
    bad: &dyn Fn(String) -> Error,
) -> Result<Arc<dyn ObjectStore>> {
    let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url);
    b = b.with_retry(take_retry_config(&mut pairs, bad)?);
    let endpoint = pairs
        .iter()
        .find(|(k, _)| k.contains("endpoint"))
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT").ok());
    if endpoint
        .as_deref()
        .is_some_and(|e| e.starts_with("http://"))
    {
        pairs.push(("aws_allow_http".into(), "true".into()));
    }
    b = configure(b, pairs, |b, k, v| b.with_config(k, v), bad)?;
    Ok(Arc::new(object_store::prefix::PrefixStore::new(
        b.build().map_err(|e| bad(e.to_string()))?,
        prefix,
    )))
}

/// The Google Cloud Storage store of `url` under `prefix`.
#[cfg(feature = "gcs")]
fn gcs_store(
    url: &str,
    prefix: ObjectPath,
    mut pairs: Vec<(String, String)>,
    bad: &dyn Fn(String) -> Error,
) -> Result<Arc<dyn ObjectStore>> {
    let b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
        .with_url(url)
        .with_retry(take_retry_config(&mut pairs, bad)?);
    let b = configure(b, pairs, |b, k, v| b.with_config(k, v), bad)?;
    Ok(Arc::new(object_store::prefix::PrefixStore::new(
        b.build().map_err(|e| bad(e.to_string()))?,
        prefix,
    )))
}

/// The Azure store of `url` under `prefix`.
#[cfg(feature = "azure")]
fn azure_store(
    url: &str,
    prefix: ObjectPath,
    mut pairs: Vec<(String, String)>,
    bad: &dyn Fn(String) -> Error,
) -> Result<Arc<dyn ObjectStore>> {
    let b = object_store::azure::MicrosoftAzureBuilder::from_env()
        .with_url(url)
        .with_retry(take_retry_config(&mut pairs, bad)?);
    let b = configure(b, pairs, |b, k, v| b.with_config(k, v), bad)?;
    Ok(Arc::new(object_store::prefix::PrefixStore::new(
        b.build().map_err(|e| bad(e.to_string()))?,
        prefix,
    )))
}

/// The HTTP store of `url`: the store URL itself is the base, chunk keys are resolved
/// relative to it.
#[cfg(feature = "http")]
fn http_store(
    url: &str,
    mut pairs: Vec<(String, String)>,
    bad: &dyn Fn(String) -> Error,
) -> Result<Arc<dyn ObjectStore>> {
    let b = object_store::http::HttpBuilder::new().with_url(url.trim_end_matches('/'));
    let b = b.with_retry(take_retry_config(&mut pairs, bad)?);
    let b = configure(b, pairs, |b, k, v| b.with_config(k, v), bad)?;
    Ok(Arc::new(b.build().map_err(|e| bad(e.to_string()))?))
}

/// Applies `pairs` to a builder through its `with_config(key, value)`.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn configure<B, K: std::str::FromStr>(
    mut b: B,
    pairs: Vec<(String, String)>,
    set: fn(B, K, String) -> B,
    bad: &dyn Fn(String) -> Error,
) -> Result<B>
where
    K::Err: std::fmt::Display,
{
    for (k, v) in pairs {
        let key = k.parse().map_err(|e| bad(format!("option {k}: {e}")))?;
        b = set(b, key, v);
    }
    Ok(b)
}

/// Takes zarrbuf's retry options (`max_retries`, `retry_timeout`) out of `pairs`: object_store
/// has no configuration keys for its `RetryConfig`.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn take_retry_config(
    pairs: &mut Vec<(String, String)>,
    bad: &dyn Fn(String) -> Error,
) -> Result<object_store::RetryConfig> {
    let mut config = object_store::RetryConfig::default();
    let mut error = None;
    pairs.retain(|(k, v)| match k.as_str() {
        "max_retries" => {
            match v.trim().parse() {
                Ok(n) => config.max_retries = n,
                Err(_) => error = Some(format!("option max_retries: {v:?} is not a count")),
            }
            false
        }
        "retry_timeout" => {
            match parse_duration(v) {
                Some(d) => config.retry_timeout = d,
                None => {
                    error = Some(format!(
                        "option retry_timeout: {v:?} is not a duration such as 30s, 500ms or 2m"
                    ))
                }
            }
            false
        }
        _ => true,
    });
    match error {
        Some(m) => Err(bad(m)),
        None => Ok(config),
    }
}

/// `500ms`, `30s`, `2.5s`, `2m`, `1h`; a bare number is seconds.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    std::time::Duration::try_from_secs_f64(seconds).ok()
}
