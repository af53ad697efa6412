//! The deprecated `read_varlen*` wrappers of `read_as` and `read_stream_as` for
//! variable-length arrays (strings, byte strings), and `varlen_kind` (now a function).
#![allow(deprecated)] // (VarLenReadStream, the deprecated stream type, is named here)

use super::read::ArrayReadExt;
use super::read_stream::VarLenReadStream;
use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::data_types::VarLenKind;
use crate::errors::Result;
use crate::options::{ReadOptions, StreamOptions};
use crate::zarr::vlen_kind;
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::ReadableStorageTraits;

/// Reading variable-length arrays into [`VarLenBuffer`]s (Arrow's large string/binary
/// layout): an extension trait on `zarrs::array::Array`, beside [`crate::ArrayReadExt`],
/// whose `read_as::<VarLenBuffer>` reads one subset and `read_stream_as::<VarLenBuffer, _>`
/// many (see [`crate::ReadOutput`]); [`crate::varlen_kind`] tells which kind reads an
/// array. Every method here is deprecated (docs/api-changes.md), the trait removed in 0.3.0.
///
/// It reads zarr v3 `string` and `variable_length_bytes` arrays (codecs `vlen-utf8`,
/// `vlen-bytes`) and v2 object arrays (`|O`) with the `VLenUTF8` or `VLenBytes` filter,
/// sharded or not, with any bytes-to-bytes codecs (compressors, checksums). Chunks are
/// decoded in parallel straight into the result (see docs/strings.md); a chunk that is not
/// stored reads as the array's fill value (`""` unless the metadata says otherwise; a v2
/// object array's `null` or `0` fill value reads as `""`). A damaged chunk is an error
/// naming it. Into CUDA memory the result is built in pinned host memory and crosses in two
/// copies (offsets, values).
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadExt, BufferPrototype, VarLenBuffer};
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let store = Arc::new(MemoryStore::new());
/// let array = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "")
///     .build(store, "/names").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.store_chunk(&[0], vec!["ab", "αβ"])
///     .map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// // Chunk 1 is not stored: it reads as the fill value "".
/// assert!(zarrbuf::varlen_kind(&array).is_some());
/// let names: VarLenBuffer = array.read_as(&[1..4], &BufferPrototype::cpu())?;
/// assert_eq!(names.shape(), &[3]);
/// let all: Vec<String> = names.iter_str()?.collect::<zarrbuf::Result<_>>()?;
/// assert_eq!(all, ["αβ", "", ""]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub trait ArrayReadVarLenExt {
    /// Reads `subset` into a new [`VarLenBuffer`] made by `proto` (elements in C order of
    /// the subset).
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadExt::read_as::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen(&self, subset: &[Range<u64>], proto: &BufferPrototype) -> Result<VarLenBuffer> {
        #[allow(deprecated)]
        self.read_varlen_opt(subset, proto, &ReadOptions::default())
    }

    /// [`read_varlen`](Self::read_varlen) with options (as
    /// [`crate::ArrayReadExt::read_as_opt`]).
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadExt::read_as_opt::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<VarLenBuffer>;

    /// Reads the whole array into a new [`VarLenBuffer`] made by `proto`.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadExt::read_all_as::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_all(&self, proto: &BufferPrototype) -> Result<VarLenBuffer> {
        #[allow(deprecated)]
        self.read_varlen_all_opt(proto, &ReadOptions::default())
    }

    /// [`read_varlen_all`](Self::read_varlen_all) with options.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadExt::read_all_as_opt::<VarLenBuffer>; removed in 0.3.0"
    )]
    fn read_varlen_all_opt(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<VarLenBuffer>;

    /// Reads many subsets ahead of the consumer as a blocking iterator of
    /// [`VarLenBuffer`]s: [`crate::ArrayReadExt::read_stream_as`]`::<VarLenBuffer, _>`.
    #[deprecated(
        since = "0.2.0",
        note = "use ArrayReadExt::read_stream_as::<VarLenBuffer, _>; removed in 0.3.0"
    )]
    fn read_varlen_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> VarLenReadStream
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static;

    /// What the array's elements are when they are of variable length (strings or byte
    /// strings), `None` for arrays of fixed-size elements: [`crate::varlen_kind`].
    #[deprecated(
        since = "0.2.0",
        note = "use zarrbuf::varlen_kind(&array), which takes async arrays too; removed in 0.3.0"
    )]
    fn varlen_kind(&self) -> Option<VarLenKind>;
}

impl<S: ?Sized + ReadableStorageTraits + 'static> ArrayReadVarLenExt for Array<S> {
    fn read_varlen_opt(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<VarLenBuffer> {
        self.read_as_opt(subset, proto, opts)
    }

    fn read_varlen_all_opt(
        &self,
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<VarLenBuffer> {
        self.read_all_as_opt(proto, opts)
    }

    fn read_varlen_stream<I>(
        &self,
        subsets: I,
        proto: &BufferPrototype,
        opts: &StreamOptions,
    ) -> VarLenReadStream
    where
        I: IntoIterator<Item = Vec<Range<u64>>>,
        I::IntoIter: Send + 'static,
    {
        self.read_stream_as::<VarLenBuffer, I>(subsets, proto, opts)
    }

    fn varlen_kind(&self) -> Option<VarLenKind> {
        vlen_kind(self)
    }
}
