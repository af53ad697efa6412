//! Read streams of variable-length arrays: many subsets of one string or bytes array, read
//! ahead with a bounded number in flight and yielded in order as [`VarLenBuffer`]s.
//!
//! They behave as the fixed-size [`crate::stream::BlockingReadStream`] does (order, at most
//! [`StreamOptions::prefetch`] reads in flight, the subsets' iterator pulled lazily, a
//! failed subset an `Err(`[`crate::Error::StreamItem`]`)` item and the stream going on,
//! dropping it stopping the reads in flight at their next chunk and waiting for them), with
//! two differences: each read runs [`crate::ArrayReadExt::read_as_opt`] on a plain
//! thread of its own (decoding on the process's pool), and reads in flight share no encoded
//! chunks.

use crate::buffer::VarLenBuffer;
use crate::errors::Result;
use crate::pipeline::VarLenStreamReads;

/// A blocking iterator over the [`VarLenBuffer`]s of many subsets of one variable-length
/// array, read ahead and yielded in order. Made by
/// [`crate::ArrayReadVarLenExt::read_varlen_stream`]; dropping it cancels the reads in
/// flight and waits until they have stopped.
///
/// ```
/// use std::sync::Arc;
/// use zarrbuf::{ArrayReadVarLenExt, BufferPrototype};
/// use zarrbuf::options::StreamOptions;
/// use zarrs::array::{ArrayBuilder, data_type};
/// use zarrs::storage::store::MemoryStore;
///
/// let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
/// let array = ArrayBuilder::new(vec![4], vec![2], data_type::string(), "")
///     .build(Arc::new(MemoryStore::new()), "/names").map_err(|e| err(&e))?;
/// array.store_chunk(&[0], vec!["a", "bc"]).map_err(|e| err(&e))?;
/// array.store_chunk(&[1], vec!["def", "g"]).map_err(|e| err(&e))?;
/// let subsets = vec![vec![2..4], vec![0..9], vec![0..2]];
/// let opts = StreamOptions::default().with_prefetch(2);
/// let items: Vec<_> = array.read_varlen_stream(subsets, &BufferPrototype::cpu(), &opts).collect();
/// let strs = |b: &zarrbuf::VarLenBuffer| b.iter_str()?.collect::<zarrbuf::Result<Vec<String>>>();
/// assert_eq!(strs(items[0].as_ref().unwrap())?, ["def", "g"]);
/// let e = items[1].as_ref().unwrap_err(); // out of bounds: named, and the stream goes on
/// assert!(e.to_string().contains("item 1 (subset [0..9])"), "{e}");
/// assert_eq!(strs(items[2].as_ref().unwrap())?, ["a", "bc"]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct VarLenReadStream(VarLenStreamReads);

impl VarLenReadStream {
    pub(crate) fn new(reads: VarLenStreamReads) -> Self {
        VarLenReadStream(reads)
    }

    /// Subsets admitted and not yet yielded: being read, or read and waiting to be taken.
    /// Never more than [`StreamOptions::prefetch`] (at least 1).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadVarLenExt, BufferPrototype, options::StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::string(), "").build(store, "/s").unwrap();
    /// let subsets = (0..4u64).map(|i| vec![i * 2..i * 2 + 2]);
    /// let opts = StreamOptions::default().with_prefetch(2);
    /// let mut batches = array.read_varlen_stream(subsets, &BufferPrototype::cpu(), &opts);
    /// assert_eq!(batches.in_flight(), 0); // nothing is read before the first pull
    /// batches.next().unwrap()?;
    /// assert!(batches.in_flight() <= 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.0.in_flight()
    }
}

impl Iterator for VarLenReadStream {
    type Item = Result<VarLenBuffer>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_blocking()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}
