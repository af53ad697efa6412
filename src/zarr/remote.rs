//! Opening zarr arrays in object storage (S3, GCS, Azure, HTTP) and local files through
//! `object_store`, as async zarrs arrays.

use super::store::{describe_open_error, label, node_path};
use crate::error::{Error, Result};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs_object_store::AsyncObjectStore;

/// The async store zarrbuf builds for a URL.
pub type RemoteStore = AsyncObjectStore<Arc<dyn ObjectStore>>;

/// A zarrs array over an object store.
pub type AsyncArray = Array<RemoteStore>;

/// Builds the object store for `url` (rooted at the URL's path) with credentials, region
/// and endpoint from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, including
/// `AWS_ENDPOINT_URL` for S3-compatible servers) and from `options` (object_store's
/// configuration keys, e.g. `("aws_endpoint", "http://127.0.0.1:9000")`,
/// `("aws_region", "us-east-1")`, `("timeout", "5s")`), which take precedence.
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
    // Applies `pairs` to a builder through its `with_config(key, value)`.
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
    use object_store::ObjectStoreScheme as S;
    let store: Arc<dyn ObjectStore> = match scheme {
        #[cfg(feature = "s3")]
        S::AmazonS3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url);
            let mut pairs = with_options(Vec::new());
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
            b = configure(b, pairs, |b, k, v| b.with_config(k, v), &bad)?;
            Arc::new(object_store::prefix::PrefixStore::new(
                b.build().map_err(|e| bad(e.to_string()))?,
                prefix,
            ))
        }
        #[cfg(feature = "gcs")]
        S::GoogleCloudStorage => {
            let b = object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url);
            let b = configure(
                b,
                with_options(Vec::new()),
                |b, k, v| b.with_config(k, v),
                &bad,
            )?;
            Arc::new(object_store::prefix::PrefixStore::new(
                b.build().map_err(|e| bad(e.to_string()))?,
                prefix,
            ))
        }
        #[cfg(feature = "azure")]
        S::MicrosoftAzure => {
            let b = object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url);
            let b = configure(
                b,
                with_options(Vec::new()),
                |b, k, v| b.with_config(k, v),
                &bad,
            )?;
            Arc::new(object_store::prefix::PrefixStore::new(
                b.build().map_err(|e| bad(e.to_string()))?,
                prefix,
            ))
        }
        #[cfg(feature = "http")]
        S::Http => {
            // The store URL itself is the base; chunk keys are resolved relative to it.
            let b = object_store::http::HttpBuilder::new().with_url(url.trim_end_matches('/'));
            let plain = if url.starts_with("http://") {
                vec![("allow_http".to_string(), "true".to_string())]
            } else {
                Vec::new()
            };
            let b = configure(b, with_options(plain), |b, k, v| b.with_config(k, v), &bad)?;
            Arc::new(b.build().map_err(|e| bad(e.to_string()))?)
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
        format!("file://{}", abs.display())
    };
    let path = node_path(array_path)?;
    let store = Arc::new(AsyncObjectStore::new(object_store_for_url(
        &location, options,
    )?));
    Array::async_open(store, &path).await.map_err(|e| {
        Error::zarr(
            label(url, array_path),
            describe_open_error(&e),
            Some(Box::new(e)),
        )
    })
}
