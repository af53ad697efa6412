//! Listing a zarr hierarchy — the groups and arrays under a node, with each array's layout
//! and stored size — for `zarrbuf info` on a group and for users; and the error that says a
//! group was opened as an array.
//!
//! The nodes come from consolidated metadata when the group has it (v3 `consolidated_metadata`
//! in its `zarr.json`, v2 `.zmetadata`), as zarr-python reads them, and from listing the store
//! otherwise. zarrs' own `Node`/`Hierarchy` are not used: they read v3 consolidated metadata
//! only, and one node whose metadata zarrs cannot parse fails the whole listing, where here
//! it is listed with the reason zarrbuf cannot read it.
//!
//! The listing's types and their printed form are in `nodes.rs`, the store operations it
//! needs over sync and async stores in `source.rs`, the walk over metadata and keys in
//! `walk.rs`, and what it says of each array in `summary.rs`.

mod nodes;
mod source;
mod summary;
mod walk;

pub use nodes::{ArraySummary, Hierarchy, NodeInfo, NodeKind};

use crate::errors::{Error, Result};
use crate::stores::{Location, OpenOptions, RemoteStore, label, node_path};
use serde_json::Value as Json;
use source::{AsyncSource, Source, SyncSource};
use walk::{Sizes, meta_key, walk};
use zarrs::storage::{ListableStorageTraits, ReadableStorageTraits};

/// Lists the groups and arrays at and under `path` in the store at `location` (a directory,
/// zip file, `file://` or object-store URL): a group's whole hierarchy, or the one array
/// found at `path`.
///
/// Nodes come from consolidated metadata where the group has it, else from listing the
/// store; the stored chunk counts and sizes always come from one listing of the keys under
/// `path` (plus one size query per array). Object-store URLs are read with credentials from
/// the environment, as in [`open_async`](crate::open_async).
///
/// # Errors
///
/// When the store does not open or cannot be listed, when a metadata document is not JSON,
/// and when nothing at or under `path` holds zarr metadata.
///
/// ```
/// let h = zarrbuf::list_hierarchy("fixtures/data/v3_nested_group.zarr", "")?;
/// let paths: Vec<&str> = h.nodes.iter().map(|n| n.path.as_str()).collect();
/// assert_eq!(paths, ["", "a", "a/b", "a/b/c"]);
/// assert_eq!(h.nodes[3].array().unwrap().shape.len(), 2);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn list_hierarchy(location: &str, path: &str) -> Result<Hierarchy> {
    list_hierarchy_opt(location, path, &OpenOptions::default())
}

/// [`list_hierarchy`] with [`OpenOptions`]: object_store's options for an object-store URL,
/// the version of an icechunk repository to list (see [`open_opt`](crate::open_opt);
/// default the tip of branch `main`).
///
/// ```
/// let Err(err) = zarrbuf::list_hierarchy_opt("fixtures/data/v3_int8.zarr", "",
///     &zarrbuf::options::OpenOptions::default().with_branch("main")) else { panic!() };
/// assert!(err.to_string().contains("not an icechunk repository"));
/// ```
pub fn list_hierarchy_opt(location: &str, path: &str, opts: &OpenOptions) -> Result<Hierarchy> {
    let base = node_path(path)?.trim_start_matches('/').to_string();
    let parsed = Location::parse(location)?;
    // The store of an icechunk repository waits on the store runtime itself, from any thread.
    let icechunk_walk = || -> Result<(bool, Vec<NodeInfo>)> {
        let store = crate::stores::icechunk_sync_store(&parsed, opts)?;
        futures::executor::block_on(walk(
            &SyncSource(store.as_ref()),
            location,
            &base,
            Sizes::Measure,
        ))
    };
    let (consolidated, nodes) = if crate::stores::icechunk_route(&parsed, opts)? {
        icechunk_walk()?
    } else if parsed.is_url() {
        let store = RemoteStore::new(crate::stores::object_store_for_url(
            location,
            &opts.store_pairs(),
        )?);
        // A runtime of its own on a thread of its own: callable from async code too.
        let listed = std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        Error::InvalidArgument(format!("cannot start the async runtime: {e}"))
                    })?;
                rt.block_on(walk(&AsyncSource(&store), location, &base, Sizes::Measure))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(Error::store(
                    location,
                    "internal error while listing (please report)",
                    None,
                ))
            })
        });
        match listed {
            // Nothing zarr there: an icechunk repository keeps its nodes in snapshots.
            Err(_) if crate::stores::url_is_repository(&parsed) => icechunk_walk()?,
            other => other?,
        }
    } else {
        crate::stores::check_local_location(&parsed)?;
        let store = crate::zarr::open::store_for(&parsed, opts)?;
        futures::executor::block_on(walk(
            &SyncSource(store.as_ref()),
            location,
            &base,
            Sizes::Measure,
        ))?
    };
    Ok(Hierarchy {
        location: location.to_string(),
        path: base,
        consolidated,
        nodes,
    })
}

/// When the node at `path` is a group: the error [`open`](crate::open) returns for it,
/// naming the arrays under it, or the error listing them met. `None` when it is not a
/// group.
pub(crate) fn group_error_sync<S>(store: &S, location: &str, path: &str) -> Option<Error>
where
    S: ?Sized + ReadableStorageTraits + ListableStorageTraits,
{
    futures::executor::block_on(group_error(&SyncSource(store), location, path))
}

/// [`group_error_sync`] for an object store.
pub(crate) async fn group_error_async(
    store: &RemoteStore,
    location: &str,
    path: &str,
) -> Option<Error> {
    group_error(&AsyncSource(store), location, path).await
}

async fn group_error(source: &dyn Source, location: &str, path: &str) -> Option<Error> {
    let base = node_path(path).ok()?.trim_start_matches('/').to_string();
    let is_group = match source.get(&meta_key(&base, "zarr.json")).await.ok()? {
        Some(doc) => serde_json::from_slice::<Json>(&doc)
            .ok()
            .is_some_and(|v| v["node_type"] == "group"),
        None => {
            source
                .get(&meta_key(&base, ".zarray"))
                .await
                .ok()?
                .is_none()
                && source
                    .get(&meta_key(&base, ".zgroup"))
                    .await
                    .ok()?
                    .is_some()
        }
    };
    if !is_group {
        return None;
    }
    // A group whose listing fails (consolidated metadata naming a key outside the store)
    // is that error, not a group of no arrays: `check` would pass it clean.
    let arrays = match walk(source, location, &base, Sizes::Skip).await {
        Ok((_, nodes)) => nodes
            .into_iter()
            .filter(|n| n.array().is_some())
            .map(|n| n.path)
            .collect(),
        Err(e) => return Some(e),
    };
    Some(Error::IsGroup {
        group: label(location, path),
        arrays,
    })
}
