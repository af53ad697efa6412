//! How a location is opened: [`OpenOptions`] and the version of an icechunk repository
//! ([`IcechunkVersion`]); recognising an icechunk repository by its layout.
//!
//! This part is compiled with or without the `icechunk` feature, so that a build without it
//! still recognises a repository and says how to read it.

use super::location::Location;
use crate::errors::{Error, Result};
use std::path::Path;

/// Which version of an icechunk repository to open: the tip of a branch (the default is
/// branch `main`), a tag, or a snapshot by its id.
///
/// ```
/// use zarrbuf::icechunk::IcechunkVersion;
/// assert_eq!(IcechunkVersion::default(), IcechunkVersion::Branch("main".into()));
/// assert_eq!(IcechunkVersion::Tag("v1".into()).to_string(), "tag v1");
/// let v = IcechunkVersion::from_choice(None, Some("v1"), None)?;
/// assert_eq!(v, Some(IcechunkVersion::Tag("v1".into())));
/// assert!(IcechunkVersion::from_choice(Some("main"), Some("v1"), None).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IcechunkVersion {
    /// The latest snapshot of a branch; the only version that can be written.
    Branch(String),
    /// The snapshot a tag names (read-only).
    Tag(String),
    /// A snapshot by its id, 20 characters such as `1CECHNKREP0F1RSTCMT0` (read-only).
    Snapshot(String),
}

impl Default for IcechunkVersion {
    fn default() -> Self {
        IcechunkVersion::Branch("main".into())
    }
}

impl std::fmt::Display for IcechunkVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IcechunkVersion::Branch(b) => write!(f, "branch {b}"),
            IcechunkVersion::Tag(t) => write!(f, "tag {t}"),
            IcechunkVersion::Snapshot(s) => write!(f, "snapshot {s}"),
        }
    }
}

impl IcechunkVersion {
    /// The version named by at most one of a branch, a tag and a snapshot id (as the CLI's
    /// `--branch`, `--tag`, `--snapshot` and Python's keywords give them); `None` when none
    /// is given.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when more than one is given, or one is empty.
    pub fn from_choice(
        branch: Option<&str>,
        tag: Option<&str>,
        snapshot: Option<&str>,
    ) -> Result<Option<Self>> {
        let given: Vec<IcechunkVersion> = [
            branch.map(|b| IcechunkVersion::Branch(b.into())),
            tag.map(|t| IcechunkVersion::Tag(t.into())),
            snapshot.map(|s| IcechunkVersion::Snapshot(s.into())),
        ]
        .into_iter()
        .flatten()
        .collect();
        match given.as_slice() {
            [] => Ok(None),
            [one] if one.name().trim().is_empty() => Err(Error::InvalidArgument(format!(
                "{}: the name is empty; give a branch, tag or snapshot id",
                one.kind()
            ))),
            [one] => Ok(Some(one.clone())),
            _ => Err(Error::InvalidArgument(
                "give at most one of branch, tag and snapshot: they each name one version of \
                 an icechunk repository"
                    .into(),
            )),
        }
    }

    /// `branch`, `tag` or `snapshot`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            IcechunkVersion::Branch(_) => "branch",
            IcechunkVersion::Tag(_) => "tag",
            IcechunkVersion::Snapshot(_) => "snapshot",
        }
    }

    /// The branch or tag name, or the snapshot id.
    pub(crate) fn name(&self) -> &str {
        match self {
            IcechunkVersion::Branch(n) | IcechunkVersion::Tag(n) | IcechunkVersion::Snapshot(n) => {
                n
            }
        }
    }
}

/// How [`open_opt`](crate::open_opt), [`open_opt_async`](crate::open_opt_async),
/// [`open_store_opt`](crate::store::open_store_opt) and
/// [`list_hierarchy_opt`](crate::list_hierarchy_opt) open a location: object_store's options
/// for object-store URLs, and which version of an icechunk repository to read. The default
/// opens every store as [`open`](crate::open) does (options from the environment; an
/// icechunk repository at the tip of branch `main`).
///
/// ```
/// use zarrbuf::options::OpenOptions;
/// use zarrbuf::icechunk::IcechunkVersion;
/// let o = OpenOptions::default().with_tag("v1").with_virtual_access("file:///data/");
/// assert_eq!(o.version, Some(IcechunkVersion::Tag("v1".into())));
/// assert_eq!(o.virtual_access, ["file:///data/"]);
/// let o = OpenOptions::default().with_store_option("aws_region", "us-east-1");
/// assert_eq!(o.store_options, [("aws_region".to_string(), "us-east-1".to_string())]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    /// object_store configuration for zarr stores at object-store URLs, on top of the
    /// environment (credentials, region, endpoint, timeouts, retries: the keys
    /// [`object_store_for_url`](crate::store::object_store_for_url) takes). Icechunk
    /// repositories take theirs from the environment.
    pub store_options: Vec<(String, String)>,
    /// The version of an icechunk repository to open (default: the tip of branch `main`).
    /// Giving one for a location that holds no icechunk repository is an error.
    pub version: Option<IcechunkVersion>,
    /// URL prefixes of an icechunk repository's virtual chunk containers that reads may
    /// fetch virtual chunks from, with credentials from the environment (icechunk's
    /// `authorize_virtual_chunk_access`). A virtual chunk in a container not listed is an
    /// error naming the chunk and the container.
    pub virtual_access: Vec<String>,
}

impl OpenOptions {
    /// Sets the object_store option `key` (e.g. `aws_endpoint`, `aws_region`, `timeout`,
    /// `max_retries`; see [`OpenOptions::store_options`]).
    pub fn with_store_option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.store_options.push((key.into(), value.into()));
        self
    }

    /// Sets several object_store options (see [`OpenOptions::with_store_option`]).
    ///
    /// ```
    /// let o = zarrbuf::options::OpenOptions::default()
    ///     .with_store_options([("aws_endpoint", "http://127.0.0.1:9000"), ("aws_region", "us-east-1")]);
    /// assert_eq!(o.store_options.len(), 2);
    /// ```
    pub fn with_store_options<K, V>(mut self, options: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.store_options
            .extend(options.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The object_store options as `object_store_for_url` takes them.
    pub(crate) fn store_pairs(&self) -> Vec<(&str, &str)> {
        self.store_options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Opens `version` of an icechunk repository.
    pub fn with_version(mut self, version: IcechunkVersion) -> Self {
        self.version = Some(version);
        self
    }

    /// Opens the tip of branch `name` of an icechunk repository.
    pub fn with_branch(self, name: impl Into<String>) -> Self {
        self.with_version(IcechunkVersion::Branch(name.into()))
    }

    /// Opens the snapshot tag `name` names in an icechunk repository.
    pub fn with_tag(self, name: impl Into<String>) -> Self {
        self.with_version(IcechunkVersion::Tag(name.into()))
    }

    /// Opens the snapshot `id` of an icechunk repository.
    ///
    /// ```
    /// let o = zarrbuf::options::OpenOptions::default().with_snapshot("1CECHNKREP0F1RSTCMT0");
    /// assert_eq!(o.version.unwrap().to_string(), "snapshot 1CECHNKREP0F1RSTCMT0");
    /// ```
    pub fn with_snapshot(self, id: impl Into<String>) -> Self {
        self.with_version(IcechunkVersion::Snapshot(id.into()))
    }

    /// Lets reads fetch virtual chunks from the container with URL prefix `prefix` (see
    /// [`OpenOptions::virtual_access`]).
    pub fn with_virtual_access(mut self, prefix: impl Into<String>) -> Self {
        self.virtual_access.push(prefix.into());
        self
    }

    /// Whether anything here applies to icechunk repositories only.
    pub(crate) fn names_icechunk(&self) -> bool {
        self.version.is_some() || !self.virtual_access.is_empty()
    }
}

/// Whether `dir` holds an icechunk repository: a `snapshots/` folder beside the repository
/// file `repo` (icechunk 2) or a `refs/` folder (icechunk 1), and no zarr metadata at its
/// root.
pub(crate) fn is_repository_dir(dir: &Path) -> bool {
    dir.join("snapshots").is_dir()
        && (dir.join("repo").is_file() || dir.join("refs").is_dir())
        && !["zarr.json", ".zgroup", ".zarray"]
            .iter()
            .any(|m| dir.join(m).exists())
}

/// Whether the object-store URL `location` holds an icechunk repository (its `repo` object,
/// or icechunk 1's `refs/branch.main/ref.json`). `false` when it cannot tell.
pub(crate) async fn url_holds_repository(location: &Location) -> bool {
    if !location.is_url() {
        return false;
    }
    use object_store::ObjectStoreExt as _;
    let Ok(store) = super::remote::object_store_for_url(location.as_str(), &[]) else {
        return false;
    };
    for key in ["repo", "refs/branch.main/ref.json"] {
        if store
            .head(&object_store::path::Path::from(key))
            .await
            .is_ok()
        {
            return true;
        }
    }
    false
}

/// Whether `location` holds an icechunk repository: a local directory (or `file://` URL)
/// laid out as one (a `repo` file or `refs/` folder beside `snapshots/`), or an
/// object-store prefix holding icechunk's `repo` object (one request; `false` when the
/// store cannot be reached). Works without the `icechunk` feature.
///
/// ```
/// assert!(zarrbuf::icechunk::is_icechunk_repository("fixtures/data/icechunk_repo"));
/// assert!(!zarrbuf::icechunk::is_icechunk_repository("fixtures/data/v3_int8.zarr"));
/// ```
pub fn is_icechunk_repository(location: &str) -> bool {
    let Ok(location) = Location::parse(location) else {
        return false;
    };
    match location.local_dir() {
        Some(dir) => is_repository_dir(dir),
        None if location.is_url() => {
            super::store_runtime::wait(url_holds_repository(&location)).unwrap_or(false)
        }
        None => false,
    }
}

/// The error for options that apply to icechunk repositories only, at a location that holds
/// none.
pub(crate) fn not_a_repository(location: &str) -> Error {
    Error::store(
        location,
        "not an icechunk repository (no `repo` file or `refs/` folder beside `snapshots/`): \
         a branch, tag, snapshot or virtual chunk access applies to icechunk repositories \
         only; leave them out to open a zarr store",
        None,
    )
}

/// The error for an icechunk repository in a build without the `icechunk` feature.
#[cfg(not(feature = "icechunk"))]
pub(crate) fn no_icechunk_support(location: &str) -> Error {
    Error::Unsupported(format!(
        "{location} is an icechunk repository, and this build of zarrbuf has no icechunk \
         support; rebuild it with the `icechunk` feature (cargo build --features icechunk; \
         it needs Rust 1.95)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_recognised_by_their_layout() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-ic-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("snapshots")).unwrap();
        assert!(!is_repository_dir(&dir));
        std::fs::write(dir.join("repo"), b"x").unwrap();
        assert!(is_repository_dir(&dir));
        // A zarr group that happens to hold such names is a zarr store.
        std::fs::write(dir.join("zarr.json"), b"{}").unwrap();
        assert!(!is_repository_dir(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
