//! Icechunk repositories (feature `icechunk`), read and written through zarrs_icechunk's
//! store over the icechunk crate: zarrbuf adds no format code of its own.
//!
//! A repository is opened from a local directory or an `s3://`, `gs://` or `az://` prefix
//! (with those features; credentials, region and endpoint from the environment, as
//! object_store reads them). Reads go through a read-only session at a branch tip, tag or
//! snapshot ([`IcechunkVersion`]); [`IcechunkStore`] wraps zarrs_icechunk's store so that
//! a missing key reads as missing, virtual chunk references that cannot be fetched are
//! errors naming the chunk and what to do, and writes to a read-only session are refused
//! with a sentence. Writes go through [`IcechunkWriter`]: a writable session on a branch
//! that becomes one snapshot when committed, and nothing when dropped.
//!
//! Synchronous callers wait on the process-wide store runtime (`store_runtime`), as they
//! do for object-store URLs.

use super::location::Location;
use super::open_options::{IcechunkVersion, OpenOptions};
use super::store_runtime::{WaitOnRuntime, runtime, wait};
use crate::errors::{Error, Result};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::storage_adapter::async_to_sync::AsyncToSyncStorageAdapter;
use zarrs::storage::{
    AsyncListableStorageTraits, AsyncMaybeBytesIterator, AsyncReadableStorageTraits,
    AsyncWritableStorageTraits, Bytes, MaybeBytes, OffsetBytesIterator,
    ReadableWritableListableStorageTraits, StorageError, StoreKey, StoreKeys, StoreKeysPrefixes,
    StorePrefix,
};
use zarrs_icechunk::AsyncIcechunkStore;
use zarrs_icechunk::icechunk::{self, Repository, Storage, repository::VersionInfo};

/// An icechunk error's message without the span trace icechunk appends to it.
fn ic_text(e: impl std::fmt::Display) -> String {
    let text = e.to_string();
    match text.find("\n\ncontext:") {
        Some(i) => text[..i].trim_end().to_string(),
        None => text,
    }
}

/// `bucket/some/prefix/` → (`bucket`, `Some("some/prefix")`).
#[cfg_attr(
    not(any(feature = "s3", feature = "gcs", feature = "azure")),
    allow(dead_code)
)]
fn bucket_and_prefix(location: &str, rest: &str) -> Result<(String, Option<String>)> {
    let rest = rest.trim_matches('/');
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::store(
            location,
            "the URL names no bucket; write it like s3://bucket/path/to/repo",
            None,
        ));
    }
    Ok((
        bucket.to_string(),
        (!prefix.is_empty()).then(|| prefix.to_string()),
    ))
}

/// The first of these environment variables that is set.
#[cfg_attr(not(any(feature = "s3", feature = "azure")), allow(dead_code))]
fn env_var(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| std::env::var(n).ok())
}

/// What opening a repository does where there is none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IfMissing {
    /// Fails: reads open only what exists.
    Fail,
    /// Creates one (in an empty directory or prefix): a writer's first commit.
    Create,
}

/// icechunk's storage for a location: a local directory (created with
/// [`IfMissing::Create`] when missing), or an object-store prefix.
async fn storage_for(location: &str, missing: IfMissing) -> Result<Arc<dyn Storage + Send + Sync>> {
    let failed = |e: icechunk::StorageError| {
        Error::store(
            location,
            format!("cannot reach the icechunk repository: {}", ic_text(&e)),
            None,
        )
    };
    let parsed = Location::parse(location)?;
    let rest = parsed.after_scheme().unwrap_or_default();
    match parsed.local_path() {
        Some(dir) => {
            if missing == IfMissing::Create {
                std::fs::create_dir_all(dir).map_err(|e| Error::Io {
                    path: dir.display().to_string(),
                    source: e,
                })?;
            }
            let dir = std::fs::canonicalize(dir).map_err(|e| {
                Error::store(
                    location,
                    format!(
                        "no such directory ({e}); give the directory of an icechunk repository"
                    ),
                    Some(Box::new(e)),
                )
            })?;
            // icechunk opens the files itself, without zarrbuf's safe opens.
            super::icechunk_files::check_files(&dir).map_err(|why| {
                Error::store(
                    location,
                    format!("cannot open the icechunk repository: {why}"),
                    None,
                )
            })?;
            icechunk::new_local_filesystem_storage(&dir)
                .await
                .map_err(failed)
        }
        None => url_storage(location, parsed.scheme(), rest).await,
    }
}

/// icechunk's storage for an object-store prefix (`rest`: what follows `scheme://`).
#[cfg_attr(
    not(any(feature = "s3", feature = "gcs", feature = "azure")),
    allow(unused_variables)
)]
async fn url_storage(
    location: &str,
    scheme: &str,
    rest: &str,
) -> Result<Arc<dyn Storage + Send + Sync>> {
    let failed = |e: icechunk::StorageError| {
        Error::store(
            location,
            format!("cannot reach the icechunk repository: {}", ic_text(&e)),
            None,
        )
    };
    match scheme {
        #[cfg(feature = "s3")]
        "s3" | "s3a" => {
            use icechunk::storage::{S3Credentials, S3Options};
            let (bucket, prefix) = bucket_and_prefix(location, rest)?;
            let endpoint = env_var(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT"]);
            let mut options = S3Options::default();
            options.region = env_var(&["AWS_REGION", "AWS_DEFAULT_REGION"]);
            options.allow_http = endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("http://"));
            options.endpoint_url = endpoint;
            options.force_path_style = true;
            icechunk::storage::new_s3_object_store_storage(
                options,
                bucket,
                prefix,
                Some(S3Credentials::FromEnv),
                Vec::new(),
                Vec::new(),
            )
            .await
            .map_err(failed)
        }
        #[cfg(feature = "gcs")]
        "gs" | "gcs" => {
            let (bucket, prefix) = bucket_and_prefix(location, rest)?;
            icechunk::storage::new_gcs_storage(bucket, prefix, None, None, Vec::new(), Vec::new())
                .map_err(failed)
        }
        #[cfg(feature = "azure")]
        "az" | "azure" => {
            let (container, prefix) = bucket_and_prefix(location, rest)?;
            let account = env_var(&["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"])
                .ok_or_else(|| {
                    Error::store(
                        location,
                        "icechunk on Azure needs the storage account: set \
                         AZURE_STORAGE_ACCOUNT_NAME (the URL is az://container/path)",
                        None,
                    )
                })?;
            icechunk::storage::new_azure_blob_storage(account, container, prefix, None, None)
                .await
                .map_err(failed)
        }
        other => Err(Error::store(
            location,
            format!(
                "icechunk repositories open from local directories and s3://, gs:// or az:// \
                 URLs (with zarrbuf's s3, gcs and azure features), not {other}:// URLs"
            ),
            None,
        )),
    }
}

/// Opens the repository at `location`, or creates one there as `missing` says (the directory
/// or prefix must then be empty).
async fn repository(location: &str, opts: &OpenOptions, missing: IfMissing) -> Result<Repository> {
    let storage = storage_for(location, missing).await?;
    let access: HashMap<String, Option<icechunk::config::Credentials>> = opts
        .virtual_access
        .iter()
        .map(|prefix| (prefix.clone(), None))
        .collect();
    let result = if missing == IfMissing::Create {
        Repository::open_or_create(storage)
            .authorize_virtual_chunk_access(access)
            .execute()
            .await
    } else {
        Repository::open(storage)
            .authorize_virtual_chunk_access(access)
            .execute()
            .await
    };
    result.map_err(|e| {
        use icechunk::repository::RepositoryErrorKind as K;
        let why = match &e.kind {
            K::RepositoryDoesntExist => "no icechunk repository here; give the directory or \
                                          URL prefix of one (leave out --branch, --tag and \
                                          --snapshot to open a zarr store)"
                .to_string(),
            K::ParentDirectoryNotClean => "neither an icechunk repository nor empty: a new \
                                            repository is made only in an empty directory or \
                                            prefix"
                .to_string(),
            _ => format!("cannot open the icechunk repository: {}", ic_text(&e)),
        };
        Error::store(location, why, None)
    })
}

/// The error for a version that does not open, naming the branches or tags there are.
async fn version_error(
    repo: &Repository,
    location: &str,
    version: &IcechunkVersion,
    e: impl std::fmt::Display,
) -> Error {
    let names = match version {
        IcechunkVersion::Branch(_) => repo.list_branches().await.ok(),
        IcechunkVersion::Tag(_) => repo.list_tags().await.ok(),
        IcechunkVersion::Snapshot(_) => None,
    };
    match names {
        Some(names) if !names.contains(version.name()) => {
            let all: Vec<&str> = names.iter().map(String::as_str).collect();
            let plural = if version.kind() == "branch" {
                "branches"
            } else {
                "tags"
            };
            Error::store(
                location,
                format!(
                    "the icechunk repository has no {} {:?}; its {plural}: {}",
                    version.kind(),
                    version.name(),
                    if all.is_empty() {
                        "none".to_string()
                    } else {
                        all.join(", ")
                    }
                ),
                None,
            )
        }
        _ => Error::store(
            location,
            format!("cannot open {version}: {}", ic_text(e)),
            None,
        ),
    }
}

/// icechunk's name for a version.
fn version_info(location: &str, version: &IcechunkVersion) -> Result<VersionInfo> {
    Ok(match version {
        IcechunkVersion::Branch(b) => VersionInfo::BranchTipRef(b.clone()),
        IcechunkVersion::Tag(t) => VersionInfo::TagRef(t.clone()),
        IcechunkVersion::Snapshot(s) => {
            let id = icechunk::format::SnapshotId::try_from(s.as_str()).map_err(|_| {
                Error::store(
                    location,
                    format!(
                        "{s:?} is not an icechunk snapshot id (20 characters of Crockford \
                         base32, such as 1CECHNKREP0F1RSTCMT0)"
                    ),
                    None,
                )
            })?;
            VersionInfo::SnapshotId(id)
        }
    })
}

/// A read-only store over `opts.version` (default branch `main`) of the repository at
/// `location`.
pub(crate) async fn readonly_store(location: &str, opts: &OpenOptions) -> Result<IcechunkStore> {
    let version = opts.version.clone().unwrap_or_default();
    let info = version_info(location, &version)?;
    let repo = repository(location, opts, IfMissing::Fail).await?;
    let session = match repo.readonly_session(&info).await {
        Ok(session) => session,
        Err(e) => return Err(version_error(&repo, location, &version, e).await),
    };
    Ok(IcechunkStore {
        inner: AsyncIcechunkStore::new(session),
        location: location.to_string(),
        version,
        writable: false,
    })
}

/// [`readonly_store`] run on the store runtime, from any async context (icechunk spawns
/// tokio tasks while it opens a session).
pub(crate) async fn readonly_store_async(
    location: &str,
    opts: &OpenOptions,
) -> Result<IcechunkStore> {
    let (location, opts) = (location.to_string(), opts.clone());
    runtime()?
        .spawn(async move { readonly_store(&location, &opts).await })
        .await
        .map_err(|e| {
            Error::InvalidArgument(format!("opening the icechunk repository failed: {e}"))
        })?
}

/// [`readonly_store`] behind the synchronous store traits.
pub(crate) fn readonly_sync_store(
    location: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn ReadableWritableListableStorageTraits>> {
    let store = wait(readonly_store(location, opts))??;
    Ok(Arc::new(AsyncToSyncStorageAdapter::new(
        Arc::new(store),
        WaitOnRuntime::new()?,
    )))
}

/// A read-only store over an icechunk session that icechunk serialized (`Session::as_bytes`:
/// what the icechunk Python package's `Session` pickles to): the same snapshot, storage,
/// settings and virtual chunk access as that session. A writable session is refused: its
/// uncommitted changes belong to the process that holds it.
pub(crate) fn session_store(bytes: &[u8]) -> Result<IcechunkStore> {
    let session = icechunk::session::Session::from_bytes(bytes).map_err(|e| {
        Error::Unsupported(format!(
            "cannot use this icechunk session: {} (zarrbuf reads sessions over local or \
             object_store storage, serialized by icechunk 2)",
            ic_text(e)
        ))
    })?;
    if !session.read_only() {
        return Err(Error::Unsupported(
            "a writable icechunk session: zarrbuf reads read-only sessions only (open one \
             with repo.readonly_session(...), or commit and read the snapshot)"
                .into(),
        ));
    }
    let id = session.snapshot_id().to_string();
    Ok(IcechunkStore {
        inner: AsyncIcechunkStore::new(session),
        location: format!("icechunk session at snapshot {id}"),
        version: IcechunkVersion::Snapshot(id),
        writable: false,
    })
}

/// Whether icechunk says the key does not exist.
fn is_not_found(e: &icechunk::store::StoreError) -> bool {
    matches!(e.kind(), icechunk::store::StoreErrorKind::NotFound(_))
}

/// zarrs_icechunk's store over one icechunk session, with zarrbuf's messages.
pub(crate) struct IcechunkStore {
    inner: AsyncIcechunkStore,
    /// The repository as the user named it, for messages.
    location: String,
    /// The version the session was opened at.
    version: IcechunkVersion,
    /// Whether the session takes writes (an [`IcechunkWriter`]'s).
    writable: bool,
}

impl std::fmt::Debug for IcechunkStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IcechunkStore({} at {})", self.location, self.version)
    }
}

impl IcechunkStore {
    /// A store error for `key`, said in zarrbuf's words.
    fn error(&self, key: &str, e: impl std::fmt::Display) -> StorageError {
        let text = ic_text(e);
        if text.contains("virtual chunk") || text.contains("virtual ref") {
            StorageError::Other(format!(
                "{key} is a virtual chunk reference that cannot be fetched: {text}. zarrbuf \
                 fetches virtual chunks only from the containers it is told to (credentials \
                 from the environment): --virtual-access URL_PREFIX on the command line, \
                 OpenOptions::with_virtual_access in Rust, virtual_access=[...] in Python"
            ))
        } else {
            StorageError::Other(format!(
                "icechunk repository {}: {key}: {text}",
                self.location
            ))
        }
    }

    /// What every write to a read-only session is refused with.
    fn refuse(&self) -> StorageError {
        StorageError::Unsupported(match &self.version {
            IcechunkVersion::Branch(b) => format!(
                "the icechunk repository {} is open for reading at branch {b}; writes to a \
                 branch go into a session committed as one snapshot: zarrbuf copy SRC {} \
                 --branch {b} --message TEXT, or zarrbuf::icechunk::IcechunkWriter in Rust",
                self.location, self.location
            ),
            other => format!(
                "the icechunk repository {} is open at {other}, which is read-only (tags and \
                 snapshots never change); write to a branch instead: zarrbuf copy SRC {} \
                 --branch NAME --message TEXT",
                self.location, self.location
            ),
        })
    }

    fn check_writable(&self) -> Result<(), StorageError> {
        if self.writable {
            Ok(())
        } else {
            Err(self.refuse())
        }
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for IcechunkStore {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.inner
            .get(key)
            .await
            .map_err(|e| self.error(key.as_str(), e))
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        // icechunk's store directly: zarrs_icechunk reports a missing key inside the parts
        // as an error, where a store says `None`.
        use icechunk::format::ByteRange as IcRange;
        use zarrs::storage::byte_range::ByteRange;
        let ranges: Vec<(String, IcRange)> = byte_ranges
            .map(|range| {
                let range = match range {
                    ByteRange::FromStart(offset, None) => IcRange::from_offset(offset),
                    ByteRange::FromStart(offset, Some(length)) => {
                        IcRange::from_offset_with_length(offset, length)
                    }
                    ByteRange::Suffix(length) => IcRange::Last(length),
                };
                (key.as_str().to_string(), range)
            })
            .collect();
        let store = icechunk::Store::from_session(self.inner.session()).await;
        let results = match store.get_partial_values(ranges).await {
            Ok(results) => results,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(self.error(key.as_str(), e)),
        };
        let mut parts = Vec::with_capacity(results.len());
        for result in results {
            match result {
                Ok(bytes) => parts.push(Ok(bytes)),
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(self.error(key.as_str(), e)),
            }
        }
        Ok(Some(futures::stream::iter(parts).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        // zarrs_icechunk reports a missing key as an error; a store says `None`.
        let store = icechunk::Store::from_session(self.inner.session()).await;
        match store.getsize(key.as_str()).await {
            // icechunk sizes a chunk never written as 0: ask whether it is there.
            Ok(0) => match store.exists(key.as_str()).await {
                Ok(true) => Ok(Some(0)),
                Ok(false) => Ok(None),
                Err(e) => Err(self.error(key.as_str(), e)),
            },
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.kind(), icechunk::store::StoreErrorKind::NotFound(_)) => Ok(None),
            Err(e) => Err(self.error(key.as_str(), e)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl AsyncWritableStorageTraits for IcechunkStore {
    async fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        self.check_writable()?;
        self.inner
            .set(key, value)
            .await
            .map_err(|e| self.error(key.as_str(), e))
    }

    async fn set_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        offset_values: OffsetBytesIterator<'a>,
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.inner.set_partial_many(key, offset_values).await
    }

    async fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        self.check_writable()?;
        self.inner
            .erase(key)
            .await
            .map_err(|e| self.error(key.as_str(), e))
    }

    async fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        self.check_writable()?;
        self.inner
            .erase_prefix(prefix)
            .await
            .map_err(|e| self.error(prefix.as_str(), e))
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl AsyncListableStorageTraits for IcechunkStore {
    async fn list(&self) -> Result<StoreKeys, StorageError> {
        self.inner.list().await.map_err(|e| self.error("/", e))
    }

    async fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.inner
            .list_prefix(prefix)
            .await
            .map_err(|e| self.error(prefix.as_str(), e))
    }

    async fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.inner
            .list_dir(prefix)
            .await
            .map_err(|e| self.error(prefix.as_str(), e))
    }

    async fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.inner
            .size_prefix(prefix)
            .await
            .map_err(|e| self.error(prefix.as_str(), e))
    }
}

/// A writable session on a branch of an icechunk repository: everything written through
/// [`store`](IcechunkWriter::store) becomes one snapshot when
/// [`commit`](IcechunkWriter::commit)ted; dropped without a commit, the branch stays as it
/// was. This is how `zarrbuf copy SRC REPO --branch B --message TEXT` writes.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayLayout, ArrayReadExt, BufferPrototype, options::{CopyOptions, OpenOptions}};
/// use zarrbuf::icechunk::IcechunkWriter;
/// let dir = std::env::temp_dir().join(format!("zarrbuf-doc-icechunk-{}", std::process::id()));
/// let repo = dir.to_str().unwrap();
/// let src = zarrbuf::open("fixtures/data/v3_int8.zarr", "")?;
/// let writer = IcechunkWriter::open(repo, "main")?; // makes the repository: the directory is new
/// let dst = zarrbuf::create_like(&src, src.shape(), writer.store(), "/x", &ArrayLayout::default(), false)?;
/// zarrbuf::copy_array(&src, &dst, &CopyOptions::default())?;
/// let snapshot = writer.commit("copy v3_int8")?;
/// let back = zarrbuf::open_opt(repo, "x", &OpenOptions::default().with_snapshot(&snapshot))?;
/// let cpu = BufferPrototype::cpu();
/// assert_eq!(back.read_all(&cpu)?.to_vec::<i8>()?, src.read_all(&cpu)?.to_vec::<i8>()?);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct IcechunkWriter {
    store: Arc<IcechunkStore>,
    /// The store runtime, which synchronous writes wait on.
    runtime: tokio::runtime::Handle,
}

impl IcechunkWriter {
    /// Opens a writable session on `branch` of the repository at `location` (a local
    /// directory, or an `s3://`, `gs://`, `az://` prefix). A missing or empty directory
    /// (an empty prefix) gets a new repository, whose one branch is `main`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the location holds neither a repository nor nothing, or the
    /// branch does not exist (the message names the branches there are).
    pub fn open(location: &str, branch: &str) -> Result<Self> {
        let version = IcechunkVersion::Branch(branch.to_string());
        if branch.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "the branch name is empty; give the branch to commit to, e.g. main".into(),
            ));
        }
        let location_owned = location.to_string();
        let session = wait(async move {
            let location = location_owned.as_str();
            let repo = repository(location, &OpenOptions::default(), IfMissing::Create).await?;
            match repo.writable_session(version.name()).await {
                Ok(session) => Ok(session),
                Err(e) => Err(version_error(&repo, location, &version, e).await),
            }
        })??;
        Ok(IcechunkWriter {
            runtime: runtime()?.handle().clone(),
            store: Arc::new(IcechunkStore {
                inner: AsyncIcechunkStore::new(session),
                location: location.to_string(),
                version: IcechunkVersion::Branch(branch.to_string()),
                writable: true,
            }),
        })
    }

    /// The session's store, for [`create_like`](crate::create_like),
    /// [`copy_array`](crate::copy_array) or zarrs' own arrays.
    pub fn store(&self) -> Arc<dyn ReadableWritableListableStorageTraits> {
        Arc::new(AsyncToSyncStorageAdapter::new(
            self.store.clone(),
            WaitOnRuntime(self.runtime.clone()),
        ))
    }

    /// Commits everything written as one snapshot on the branch, with `message`; returns
    /// the new snapshot's id.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when nothing was written, or the branch moved since the session
    /// opened (another writer committed first: the copy must be run again).
    pub fn commit(self, message: &str) -> Result<String> {
        let session = self.store.inner.session();
        let location = self.store.location.clone();
        let branch = self.store.version.to_string();
        let message = message.to_string();
        wait(async move {
            let mut session = session.write().await;
            if !session.has_uncommitted_changes() {
                return Err(Error::store(
                    &location,
                    format!("nothing was written, so there is nothing to commit to {branch}"),
                    None,
                ));
            }
            session
                .commit(message)
                .execute()
                .await
                .map(|id| String::from(&id))
                .map_err(|e| {
                    Error::store(
                        &location,
                        format!("cannot commit to {branch}: {}", ic_text(&e)),
                        None,
                    )
                })
        })?
    }
}
