//! Where each store zarrbuf opened lives, so that operations given only arrays
//! (`create_like`, `resume_like`, `copy_array`) can tell whether a destination overlaps its
//! source: two arrays overlap when they are in one store (the same store object) and one
//! node path holds the other, or when their stores' locations joined with their node paths
//! overlap (see [`Location::overlaps`]).
//!
//! zarrs' store traits say nothing of where a store lives, and a caller's own stores (a
//! `MemoryStore` it built) are compared by identity only.

use super::location::Location;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// How many node identities each store keeps (a store's arrays; past it they are made again).
const MAX_NODE_IDENTITIES: usize = 4096;

/// A store zarrbuf opened: its address, whether it is still alive, and its location.
struct Entry {
    address: usize,
    alive: Box<dyn Fn() -> bool + Send + Sync>,
    location: Location,
    /// `location` made canonical when the store was opened (a relative path taken from the
    /// current directory then).
    canonical: Location,
    /// The canonical location of each node asked for so far, by node path (see
    /// [`node_identity`]): made once, since it asks the file system.
    nodes: Mutex<HashMap<String, Option<String>>>,
}

static OPENED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The address of a store object (the data, without a trait object's vtable).
fn address<T: ?Sized>(store: &T) -> usize {
    std::ptr::from_ref(store).cast::<()>() as usize
}

/// Records that `store` was opened at `location` (dropping the records of stores gone since).
pub(crate) fn remember<T: ?Sized + Send + Sync + 'static>(store: &Arc<T>, location: &Location) {
    let weak: Weak<T> = Arc::downgrade(store);
    let entry = Entry {
        address: address(store.as_ref()),
        alive: Box::new(move || weak.strong_count() > 0),
        location: location.clone(),
        canonical: location.canonical(),
        nodes: Mutex::new(HashMap::new()),
    };
    let mut opened = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    opened.retain(|e| (e.alive)());
    opened.push(entry);
}

/// The location `store` was opened at, if zarrbuf opened it and it is still alive.
pub(crate) fn location_of<T: ?Sized>(store: &T) -> Option<Location> {
    with_opened(store, |e| Some(e.location.clone()))
}

/// `f` of the newest live record of `store` (the same address may have been reused by a
/// store opened later; dead records are skipped).
fn with_opened<T: ?Sized, R>(store: &T, f: impl FnOnce(&Entry) -> Option<R>) -> Option<R> {
    let at = address(store);
    let opened = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    opened
        .iter()
        .rev()
        .find(|e| e.address == at && (e.alive)())
        .and_then(f)
}

/// The canonical location of the node at `path` in `store`, as text (see
/// [`Location::identity`]): the store's canonical location joined with the node path, then
/// resolved again (a group may be a symlink).
/// Every way of splitting one place into a store location and a node path — `s.zarr` with
/// `g/a`, `s.zarr/g` with `a`, a `file://` URL, trailing slashes, `./`, a symlink — gives the
/// same text. `None` when zarrbuf did not open `store` at a directory, a zip file or an
/// object-store URL, or the store is gone.
pub(crate) fn node_identity<T: ?Sized>(store: &T, path: &str) -> Option<String> {
    let known = |e: &Entry| {
        let nodes = e.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        Some(nodes.get(path).cloned().ok_or_else(|| e.canonical.clone()))
    };
    // Resolved outside the registry's lock: it asks the file system.
    let identity = match with_opened(store, known)? {
        Ok(identity) => return identity,
        Err(location) => location.join(path).identity(),
    };
    with_opened(store, |e| {
        let mut nodes = e.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if nodes.len() >= MAX_NODE_IDENTITIES {
            nodes.clear();
        }
        nodes.insert(path.to_string(), identity.clone());
        Some(())
    });
    identity
}

/// Whether `store` tells a key's size cheaply: zarrbuf opened it on a local path (a
/// directory, a zip file or a `file://` URL: a file's metadata, or the zip's central
/// directory). An object store would need one request per key; a store zarrbuf did not
/// open is not asked either.
pub(crate) fn sizes_are_cheap<T: ?Sized>(store: &T) -> bool {
    location_of(store).is_some_and(|l| l.is_local())
}

/// Whether reads of `store` wait a network round trip per request: zarrbuf opened it at an
/// object-store URL (`s3://`, `gs://`, `az://`, `http(s)://`, an icechunk repository there).
/// Such reads fetch ahead of their decoders and merge the byte ranges of inner chunks; local
/// stores, memory and stores zarrbuf did not open answer as fast as a worker asks.
pub(crate) fn fetches_are_remote<T: ?Sized>(store: &T) -> bool {
    location_of(store).is_some_and(|l| l.is_url())
}

/// The origin whose answers time the object store zarrbuf opened as `store` (see
/// `store_latency`); `None` for other stores.
pub(crate) fn latency_origin<T: ?Sized>(store: &T) -> Option<std::sync::Arc<str>> {
    location_of(store)
        .filter(Location::is_url)
        .and_then(|l| super::store_latency::origin_of(l.as_str()))
        .map(std::sync::Arc::from)
}

/// Whether node path `a` holds node path `b` or the reverse (`/`, `/x`, `/x/y`; by
/// components).
fn nodes_overlap(a: &str, b: &str) -> bool {
    let parts = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (parts(a), parts(b));
    a.starts_with(&b) || b.starts_with(&a)
}

/// Whether the node `a_path` of store `a` and the node `b_path` of store `b` overlap: the
/// same store object and nested node paths, or locations (of stores zarrbuf opened) that
/// overlap once joined with the node paths.
pub(crate) fn nodes_in_stores_overlap<A: ?Sized, B: ?Sized>(
    a: &A,
    a_path: &str,
    b: &B,
    b_path: &str,
) -> bool {
    if address(a) == address(b) {
        return nodes_overlap(a_path, b_path);
    }
    match (location_of(a), location_of(b)) {
        (Some(la), Some(lb)) => la.join(a_path).overlaps(&lb.join(b_path)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_paths_overlap_by_components() {
        assert!(nodes_overlap("/", "/a"));
        assert!(nodes_overlap("/a/b", "/a"));
        assert!(nodes_overlap("/a", "/a/"));
        assert!(!nodes_overlap("/a", "/ab"));
        assert!(!nodes_overlap("/a/b", "/a/c"));
    }

    #[test]
    fn stores_are_compared_by_identity_then_by_location() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-located-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("store.zarr/inner")).unwrap();
        let outer: Arc<Vec<u8>> = Arc::new(Vec::new());
        let inner: Arc<Vec<u8>> = Arc::new(Vec::new());
        let unknown: Arc<Vec<u8>> = Arc::new(Vec::new());
        let at = |p: &str| Location::parse(dir.join(p).to_str().unwrap()).unwrap();
        remember(&outer, &at("store.zarr"));
        remember(&inner, &at("store.zarr/../store.zarr/inner"));
        assert!(nodes_in_stores_overlap(&*outer, "/", &*inner, "/"));
        assert!(nodes_in_stores_overlap(&*outer, "/inner/x", &*inner, "/"));
        assert!(!nodes_in_stores_overlap(&*outer, "/other", &*inner, "/"));
        // One store object: by node paths.
        assert!(nodes_in_stores_overlap(&*unknown, "/a", &*unknown, "/a/b"));
        assert!(!nodes_in_stores_overlap(&*unknown, "/a", &*unknown, "/b"));
        // A store zarrbuf did not open is compared by identity only.
        assert!(!nodes_in_stores_overlap(&*outer, "/", &*unknown, "/"));
        // A dropped store is forgotten.
        let address_of_inner = address(inner.as_ref());
        drop(inner);
        assert!(location_of_address(address_of_inner).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_node_has_one_identity_however_it_is_split() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-node-id-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("s.zarr/g/a")).unwrap();
        let at = |p: &str| Location::parse(&format!("{}/{p}", dir.display())).unwrap();
        let root: Arc<Vec<u8>> = Arc::new(Vec::new());
        let group: Arc<Vec<u8>> = Arc::new(Vec::new());
        let other: Arc<Vec<u8>> = Arc::new(Vec::new());
        remember(&root, &at("s.zarr/"));
        remember(&group, &at("./s.zarr/g/../g"));
        remember(&other, &at("s.zarr/g/a"));
        let id = node_identity(&*root, "/g/a").unwrap();
        assert_eq!(node_identity(&*root, "/g/a"), Some(id.clone())); // remembered
        assert_eq!(node_identity(&*group, "/a"), Some(id.clone()));
        assert_eq!(node_identity(&*other, "/"), Some(id.clone()));
        assert_ne!(node_identity(&*group, "/b"), Some(id));
        let memory: Arc<Vec<u8>> = Arc::new(Vec::new());
        remember(&memory, &Location::parse("memory://").unwrap());
        assert_eq!(node_identity(&*memory, "/a"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn location_of_address(at: usize) -> Option<Location> {
        let opened = OPENED.lock().unwrap();
        opened
            .iter()
            .find(|e| e.address == at && (e.alive)())
            .map(|e| e.location.clone())
    }
}
