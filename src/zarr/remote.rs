//! Opening zarr arrays in object storage (S3, GCS, Azure, HTTP) and local files through
//! `object_store`, as async zarrs arrays.

pub use super::remote_store::RemoteStore;
use super::store::{describe_open_error, label, node_path, open_fallback};
use crate::error::{Error, Result};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

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
/// let store = zarrbuf::object_store_for_url("memory://", &[])?;
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

/// Opens the zarr array at `array_path` inside the store at `url` (any URL
/// [`object_store_for_url`] takes, or a directory path).
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// use zarrbuf::{ArrayReadAsyncExt, BufferPrototype};
/// let array = zarrbuf::open_async("s3://bucket/data.zarr", "temperature").await?;
/// let gpu = array.read_all_async(&BufferPrototype::cuda(0)).await?;
/// # Ok(()) }
/// ```
pub async fn open_async(url: &str, array_path: &str) -> Result<AsyncArray> {
    open_async_with_options(url, array_path, &[]).await
}

/// [`open_async`] with explicit object_store options (credentials, region, endpoint, timeouts).
///
/// ```no_run
/// # async fn demo() -> zarrbuf::Result<()> {
/// let array = zarrbuf::open_async_with_options(
///     "s3://bucket/data.zarr", "", &[("aws_endpoint", "http://127.0.0.1:9000"), ("aws_region", "us-east-1")],
/// ).await?;
/// # Ok(()) }
/// ```
pub async fn open_async_with_options(
    url: &str,
    array_path: &str,
    options: &[(&str, &str)],
) -> Result<AsyncArray> {
    if super::zip_path(url)?.is_some() {
        return Err(Error::Unsupported(format!(
            "{url} is a zip file: zip stores open with the synchronous reader \
             (zarrbuf::open, or the CLI without --async)"
        )));
    }
    if url.contains("://")
        && url
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .is_some_and(|name| name.to_ascii_lowercase().ends_with(".zip"))
    {
        return Err(Error::Unsupported(format!(
            "{url} names a zip file in object storage: zarrbuf reads zip stores from local \
             disk only; download the file and give its path"
        )));
    }
    let location = if url.contains("://") {
        url.to_string()
    } else {
        let abs = std::fs::canonicalize(url).map_err(|e| {
            Error::store(
                url,
                format!("no such directory ({e}); give the path of a zarr store or a URL"),
                Some(Box::new(e)),
            )
        })?;
        // Url::from_file_path percent-encodes what a URL would misread (`#`, `?`, `%`, spaces).
        url::Url::from_file_path(&abs)
            .map_err(|()| {
                Error::store(
                    url,
                    format!("{} cannot be written as a file:// URL", abs.display()),
                    None,
                )
            })?
            .to_string()
    };
    let path = node_path(array_path)?;
    let mut remote = RemoteStore::new(object_store_for_url(&location, options)?);
    if let Some(local) = super::local_reads::LocalReads::for_url(&location) {
        remote = remote.with_local_reads(local.map_err(|e| Error::store(&location, e, None))?);
    }
    let store = Arc::new(remote);
    super::codecs::register_zarrs_overrides();
    let refused = match Array::async_open(store.clone(), &path).await {
        Ok(array) => return Ok(array),
        Err(e) => e,
    };
    if let Some(group) = super::hierarchy::group_error_async(&store, url, array_path).await {
        return Err(group);
    }
    let zarray = match zarrs::node::NodePath::new(&path) {
        Ok(node) => store
            .get(&zarrs::node::meta_key_v2_array(&node))
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    let name = label(url, array_path);
    let meta = open_fallback(&name, refused, zarray.as_deref())?;
    Array::new_with_metadata(store, &path, meta)
        .map_err(|e| Error::zarr(name, describe_open_error(&e), Some(Box::new(e))))
}
