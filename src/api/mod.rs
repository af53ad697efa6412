//! The public operations: the extension traits on zarrs' `Array` (`ArrayReadExt`,
//! `ArrayReadAsyncExt`, `ArrayWriteExt`, `ArrayWriteAsyncExt`, one method set per mode),
//! multi-device reads, read streams, `copy_array` and `create_like` (zarr's, which also
//! drops a replaced array from the chunk caches). Each checks its arguments, picks a
//! route and calls `pipeline` or zarrs.
//!
//! Within the folder: `target` is the one check of a read's output or a write's data, used
//! by the four traits; `read_stream` is the public face of `pipeline::StreamReads` (one
//! stream for both output kinds); `read` and `read_async` make streams through
//! `read_output`; `multi` reads through `read`; `write` and `write_async`
//! stand alone; `copy` uses `read` and `write`, with its options (`copy_options`) composed
//! of theirs; `read_output` is `ReadOutput`, the output kind a read returns (`NDBuffer`
//! through the read core, `VarLenBuffer` through `pipeline::read_varlen`), which the
//! `read_as` and `read_stream_as` methods of `read` and `read_async` dispatch to;
//! `read_varlen` and `read_varlen_async` hold the deprecated `read_varlen*` wrappers of
//! `read_as` and `read_stream_as` and `varlen_kind`, now a function of `zarr/`.

mod copy;
mod copy_options;
mod copy_read_ahead;
mod copy_skip;
mod create;
pub(crate) mod multi;
mod read;
mod read_async;
mod read_output;
mod read_stream;
mod read_varlen;
mod read_varlen_async;
mod target;
mod write;
mod write_async;
mod write_varlen;

pub use copy::copy_array;
pub use copy_options::CopyOptions;
pub use create::create_like;
pub use read::ArrayReadExt;
pub use read_async::ArrayReadAsyncExt;
pub use read_output::ReadOutput;
#[allow(deprecated)]
pub use read_stream::VarLenReadStream;
pub use read_stream::{BlockingReadStream, ReadStream};
pub use read_varlen::ArrayReadVarLenExt;
pub use read_varlen_async::ArrayReadVarLenAsyncExt;
pub use write::ArrayWriteExt;
pub use write_async::ArrayWriteAsyncExt;
pub use write_varlen::ArrayWriteVarLenExt;
