//! The public operations: the extension traits on zarrs' `Array` (`ArrayReadExt`,
//! `ArrayReadAsyncExt`, `ArrayWriteExt`, `ArrayWriteAsyncExt`), read streams and
//! `copy_array`. Each checks its arguments, picks a route and calls `pipeline` or zarrs.
//!
//! Within the folder: `read_stream` is the public face of `pipeline::StreamReads`; `read`
//! (with the multi-device reads) and `read_async` make streams; `write` and `write_async`
//! stand alone; `copy` uses `read` and `write`.

mod copy;
mod read;
mod read_async;
mod read_stream;
mod write;
mod write_async;

pub use copy::{CopyOptions, copy_array};
pub use read::ArrayReadExt;
pub use read_async::ArrayReadAsyncExt;
pub use read_stream::{BlockingReadStream, ReadStream};
pub use write::ArrayWriteExt;
pub use write_async::ArrayWriteAsyncExt;
