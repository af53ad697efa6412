//! Read streams: many subsets of one array (a training loop's minibatches), read ahead with
//! a bounded number in flight and yielded in order, as `NDBuffer`s or, for arrays of
//! variable-length strings and bytes, `VarLenBuffer`s (the output kind, [`crate::ReadOutput`],
//! chosen by the caller's type as for `read_as`).
//!
//! - **Order.** Items come out in the order the subsets went in, whatever order the reads
//!   finish in.
//! - **In flight.** At most [`crate::options::StreamOptions::prefetch`] subsets are being read or wait to be
//!   taken. The subsets' iterator is pulled lazily (one subset per read started), so memory
//!   is bounded by the options, not by the iterator's length.
//! - **Sharing.** Each read claims the chunks it will fetch when it starts; a chunk claimed
//!   by several reads in flight is fetched once and its encoded bytes are kept only until
//!   the last of them took it (see `pipeline/fetch/chunk_share.rs`). Each read decodes for itself.
//! - **Cancellation.** Dropping the stream stops every read in flight (a fetch in flight on
//!   an async store is abandoned, the others stop at their next chunk) and returns only once
//!   none of them runs any more.
//! - **Errors.** A failed subset is an `Err(`[`Error::StreamItem`]`)` item naming its
//!   position and ranges, with the reason as its source; the stream goes on with the next
//!   subset (stop by dropping it).
//!
//! Each read runs on a blocking thread of its own (the async runtime's blocking pool for
//! async stores, a plain thread for sync stores): an `NDBuffer` through the same read core
//! as [`crate::ArrayReadAsyncExt::read_into_async`], a `VarLenBuffer` as
//! [`crate::ArrayReadExt::read_as`] makes one. One engine serves both kinds
//! (`pipeline/stream/`).

use crate::buffer::NDBuffer;
use crate::errors::Result;
use crate::pipeline::StreamReads;
use futures::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A stream of the outputs (`T`: [`NDBuffer`], or [`crate::VarLenBuffer`] for variable-length
/// arrays) of many subsets of one array, read ahead and yielded in order (see
/// [`crate::options::StreamOptions`] for the bound on reads in flight, and docs/rust-api.md's "Read
/// streams" for the design). Made by [`crate::ArrayReadAsyncExt::read_stream`] and
/// [`read_stream_as`](crate::ArrayReadAsyncExt::read_stream_as) (async stores) or
/// [`crate::ArrayReadExt::read_stream`] and [`read_stream_as`](crate::ArrayReadExt::read_stream_as)
/// (sync stores, as a [`BlockingReadStream`]).
///
/// The subsets' iterator is pulled while the stream is polled, so it should not block.
/// Dropping the stream cancels the reads in flight and waits until they have stopped.
///
/// ```
/// # fn main() -> zarrbuf::Result<()> {
/// use futures::StreamExt;
/// use zarrbuf::{ArrayReadAsyncExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrbuf::options::StreamOptions;
/// use zarrs::array::{ArrayBuilder, data_type};
/// # let dir = std::env::temp_dir().join(format!("zarrbuf-doc-stream-{}", std::process::id()));
/// # let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
/// // A 16 x 4 array in chunks of 4 rows, written with the sync API.
/// let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).map_err(|e| err(&e))?);
/// let array = ArrayBuilder::new(vec![16, 4], vec![4, 4], data_type::int32(), 0i32)
///     .build(store, "/x").map_err(|e| err(&e))?;
/// array.store_metadata().map_err(|e| err(&e))?;
/// array.write_all(&NDBuffer::from_vec((0..64).collect::<Vec<i32>>(), &[16, 4])?)?;
///
/// let rt = tokio::runtime::Runtime::new().map_err(|e| err(&e))?;
/// rt.block_on(async {
///     let url = format!("file://{}", dir.display());
///     let array = zarrbuf::open_async(&url, "x").await?;
///     // Minibatches of 2 rows, in a shuffled order; 3 reads in flight.
///     let order = [5u64, 0, 7, 2];
///     let subsets = order.map(|b| vec![b * 2..b * 2 + 2, 0..4]);
///     let opts = StreamOptions::default().with_prefetch(3);
///     let mut stream = array.read_stream(subsets, &BufferPrototype::cpu(), &opts)?;
///     let mut firsts = Vec::new();
///     while let Some(batch) = stream.next().await {
///         firsts.push(batch?.to_vec::<i32>()?[0]);
///     }
///     assert_eq!(firsts, vec![40, 0, 56, 16]); // in the order asked
///     Ok::<(), zarrbuf::Error>(())
/// })?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(()) }
/// ```
pub struct ReadStream<T = NDBuffer>(StreamReads<T>);

impl<T: Send + 'static> ReadStream<T> {
    pub(crate) fn new(reads: StreamReads<T>) -> Self {
        ReadStream(reads)
    }

    /// Subsets admitted and not yet yielded: being read, or read and waiting to be taken.
    /// Never more than [`crate::options::StreamOptions::prefetch`] (at least 1).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, options::StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let subsets = (0..4u64).map(|i| vec![i * 2..i * 2 + 2]);
    /// let mut batches = array.read_stream(subsets, &BufferPrototype::cpu(), &StreamOptions::default().with_prefetch(2));
    /// assert_eq!(batches.in_flight(), 0); // nothing is read before the first pull
    /// batches.next().unwrap()?;
    /// assert!(batches.in_flight() <= 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.0.in_flight()
    }

    /// Encoded chunks currently kept for sharing between the reads in flight (a chunk is
    /// kept only while a read in flight still needs it).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, options::StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let mut batches = array.read_stream([vec![0..1], vec![1..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// while let Some(b) = batches.next() { b?; }
    /// assert_eq!(batches.shared_chunks(), 0); // nothing is kept once the reads are done
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn shared_chunks(&self) -> usize {
        self.0.shared_chunks()
    }

    /// Turns this stream into a blocking iterator (for code outside async tasks). The reads
    /// keep running on the runtime the stream was made in.
    ///
    /// ```
    /// # fn main() -> zarrbuf::Result<()> {
    /// use zarrbuf::{ArrayReadAsyncExt, ArrayWriteExt, BufferPrototype, NDBuffer};
    /// use zarrbuf::options::StreamOptions;
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// # let dir = std::env::temp_dir().join(format!("zarrbuf-doc-blocking-{}", std::process::id()));
    /// # let err = |e: &dyn std::fmt::Display| zarrbuf::Error::InvalidArgument(e.to_string());
    /// let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&dir).map_err(|e| err(&e))?);
    /// let array = ArrayBuilder::new(vec![6], vec![2], data_type::uint8(), 0u8).build(store, "/v").map_err(|e| err(&e))?;
    /// array.store_metadata().map_err(|e| err(&e))?;
    /// array.write_all(&NDBuffer::from_vec((0..6u8).collect::<Vec<_>>(), &[6])?)?;
    ///
    /// let rt = tokio::runtime::Runtime::new().map_err(|e| err(&e))?;
    /// let _enter = rt.enter(); // the stream's reads run on `rt`
    /// let array = rt.block_on(zarrbuf::open_async(&format!("file://{}", dir.display()), "v"))?;
    /// let stream = array.read_stream([vec![4..6], vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default())?;
    /// let values: Vec<Vec<u8>> = stream.blocking().map(|b| b?.to_vec::<u8>()).collect::<zarrbuf::Result<_>>()?;
    /// assert_eq!(values, vec![vec![4, 5], vec![0, 1]]);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(()) }
    /// ```
    pub fn blocking(self) -> BlockingReadStream<T> {
        BlockingReadStream(self)
    }
}

impl<T: Send + 'static> Stream for ReadStream<T> {
    type Item = Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// A [`ReadStream`] as a blocking iterator: `next()` waits (on the calling thread) for the
/// next subset in order while the reads ahead of it go on. Made by
/// [`crate::ArrayReadExt::read_stream`] for sync stores, or [`ReadStream::blocking`].
/// Dropping it cancels the reads in flight, as for [`ReadStream`].
///
/// ```
/// use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
/// use zarrbuf::options::StreamOptions;
/// use zarrs::array::{ArrayBuilder, data_type};
/// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
/// let array = ArrayBuilder::new(vec![12], vec![4], data_type::float32(), 0.0f32)
///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
/// array.write_all(&NDBuffer::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[12])?)?;
/// let subsets = vec![vec![8..10], vec![0..3], vec![10..20], vec![3..5]];
/// let items: Vec<_> = array.read_stream(subsets, &BufferPrototype::cpu(), &StreamOptions::default()).collect();
/// assert_eq!(items[0].as_ref().unwrap().to_vec::<f32>()?, vec![8.0, 9.0]);
/// assert_eq!(items[1].as_ref().unwrap().to_vec::<f32>()?, vec![0.0, 1.0, 2.0]);
/// let err = items[2].as_ref().unwrap_err();               // out of bounds: named, and the stream goes on
/// assert!(err.to_string().contains("item 2 (subset [10..20])"), "{err}");
/// assert_eq!(items[3].as_ref().unwrap().to_vec::<f32>()?, vec![3.0, 4.0]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct BlockingReadStream<T = NDBuffer>(ReadStream<T>);

impl<T: Send + 'static> BlockingReadStream<T> {
    /// Subsets admitted and not yet yielded (see [`ReadStream::in_flight`]).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, options::StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let batches = array.read_stream([vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// assert_eq!(batches.in_flight(), 0);
    /// ```
    pub fn in_flight(&self) -> usize {
        self.0.in_flight()
    }

    /// Encoded chunks kept for sharing (see [`ReadStream::shared_chunks`]).
    ///
    /// ```
    /// # use zarrbuf::{ArrayReadExt, BufferPrototype, options::StreamOptions};
    /// # use zarrs::array::{ArrayBuilder, data_type};
    /// # let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// # let array = ArrayBuilder::new(vec![8], vec![2], data_type::uint8(), 0u8).build(store, "/a").unwrap();
    /// let batches = array.read_stream([vec![0..2]], &BufferPrototype::cpu(), &StreamOptions::default());
    /// assert_eq!(batches.shared_chunks(), 0);
    /// ```
    pub fn shared_chunks(&self) -> usize {
        self.0.shared_chunks()
    }
}

impl<T: Send + 'static> Iterator for BlockingReadStream<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Self::Item> {
        futures::executor::block_on(futures::StreamExt::next(&mut self.0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// The blocking stream of a variable-length array's subsets, before the two kinds shared
/// one stream type.
#[deprecated(
    since = "0.2.0",
    note = "use BlockingReadStream<VarLenBuffer>, made by \
            ArrayReadExt::read_stream_as::<VarLenBuffer, _>; removed in 0.3.0"
)]
pub type VarLenReadStream = BlockingReadStream<crate::buffer::VarLenBuffer>;
