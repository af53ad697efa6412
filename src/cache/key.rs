//! What a cached chunk is filed under: the array ([`ArrayId`]), the chunk's indices and the
//! memory it lives in ([`ChunkKey`]).

use crate::place::Device;
use std::any::Any;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};
use zarrs::array::Array;

/// Where an array lives: a node of a store, whatever its metadata.
#[derive(Clone)]
pub(crate) enum Node {
    /// The canonical location of the node in a store zarrbuf opened at a directory, a zip
    /// file or an object-store URL: the store's location joined with the node path, so that
    /// one place is one node however the user split it (`s.zarr` and `g/a`, or `s.zarr/g`
    /// and `a`; a `file://` URL, trailing slashes, `./`, symlinks).
    Located(String),
    /// A node of any other store (memory, icechunk sessions, a caller's own store object):
    /// the address of the store object and the node path. The key holds a weak reference to
    /// the store, which keeps the allocation from being reused by another store while the
    /// key exists.
    Object {
        address: usize,
        path: String,
        _keep: Arc<dyn Any + Send + Sync>,
    },
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Node::Located(a), Node::Located(b)) => a == b,
            (
                Node::Object {
                    address: a,
                    path: p,
                    ..
                },
                Node::Object {
                    address: b,
                    path: q,
                    ..
                },
            ) => a == b && p == q,
            _ => false,
        }
    }
}

impl Eq for Node {}

impl Hash for Node {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Node::Located(l) => (0u8, l).hash(state),
            Node::Object { address, path, .. } => (1u8, address, path).hash(state),
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Node::Located(l) => write!(f, "{l}"),
            Node::Object { address, path, .. } => write!(f, "store@{address:#x}:{path}"),
        }
    }
}

#[derive(PartialEq, Eq, Hash, Debug)]
struct Ident {
    node: Node,
    fingerprint: u64,
}

/// One array as a cache knows it: its node (the canonical location of the store joined with
/// the node path when zarrbuf opened the store at a directory, zip file or URL, else the
/// store object itself and the node path) and a fingerprint of its metadata (attributes left out), so that the same array opened twice
/// shares cached chunks and an array re-created with other metadata never sees the old
/// one's. Cheap to clone.
///
/// ```
/// use zarrbuf::cache::ArrayId;
/// use zarrs::array::{ArrayBuilder, data_type};
/// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
/// let a = ArrayBuilder::new(vec![8], vec![4], data_type::uint8(), 0u8)
///     .build(store.clone(), "/a").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let b = ArrayBuilder::new(vec![8], vec![4], data_type::uint8(), 0u8)
///     .build(store.clone(), "/b").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let a2 = ArrayBuilder::new(vec![8], vec![4], data_type::uint8(), 0u8)
///     .build(store, "/a").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// assert_ne!(ArrayId::of(&a), ArrayId::of(&b));
/// assert_eq!(ArrayId::of(&a), ArrayId::of(&a2));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ArrayId(Arc<Ident>);

impl std::fmt::Debug for ArrayId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArrayId({:?} #{:016x})", self.0.node, self.0.fingerprint)
    }
}

impl ArrayId {
    /// The identity of `array`.
    pub fn of<S: ?Sized + Send + Sync + 'static>(array: &Array<S>) -> ArrayId {
        let storage = array.storage();
        let path = array.path().as_str();
        let node = match crate::stores::node_identity(storage.as_ref(), path) {
            Some(location) => Node::Located(location),
            None => {
                let weak: Weak<S> = Arc::downgrade(&storage);
                Node::Object {
                    address: Arc::as_ptr(&storage).cast::<()>() as usize,
                    path: path.to_string(),
                    _keep: Arc::new(weak),
                }
            }
        };
        ArrayId(Arc::new(Ident {
            node,
            fingerprint: crate::zarr::metadata_fingerprint(array),
        }))
    }

    /// The node: the store and path, without the metadata.
    pub(crate) fn node(&self) -> &Node {
        &self.0.node
    }

    /// Whether `other` is the same node of the same store, whatever its metadata.
    pub(crate) fn same_node(&self, other: &ArrayId) -> bool {
        self.0.node == other.0.node
    }

    /// Whether `other` has the same metadata fingerprint.
    pub(crate) fn same_metadata(&self, other: &ArrayId) -> bool {
        self.0.fingerprint == other.0.fingerprint
    }
}

/// A cached chunk's name: its array, its indices in the chunk grid (for sharded arrays, the
/// inner chunk's indices in the array-wide grid of inner chunks, the unit zarrbuf decodes)
/// and where its decoded copy lives (`Device::Cpu` for host and pinned memory,
/// `Device::Cuda(n)` for device `n`): host and device copies of one chunk are two entries.
///
/// ```
/// use zarrbuf::cache::{ArrayId, ChunkKey};
/// use zarrbuf::Device;
/// use zarrs::array::{ArrayBuilder, data_type};
/// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
/// let a = ArrayBuilder::new(vec![8], vec![4], data_type::uint8(), 0u8)
///     .build(store, "/a").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// let host = ChunkKey::new(ArrayId::of(&a), vec![1], Device::Cpu);
/// assert_ne!(host, ChunkKey::new(ArrayId::of(&a), vec![1], Device::Cuda(0)));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ChunkKey {
    /// The array.
    pub array: ArrayId,
    /// The chunk's (inner chunk's) grid indices.
    pub chunk: Vec<u64>,
    /// Where the decoded copy lives.
    pub memory: Device,
}

impl ChunkKey {
    /// The key of chunk `chunk` of `array` in `memory`.
    pub fn new(array: ArrayId, chunk: Vec<u64>, memory: Device) -> ChunkKey {
        ChunkKey {
            array,
            chunk,
            memory,
        }
    }
}
