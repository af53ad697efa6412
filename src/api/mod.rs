//! The public operations.

pub(crate) mod copy;
pub(crate) mod read;
pub(crate) mod read_async;
pub(crate) mod read_multi;
pub(crate) mod read_stream;
pub(crate) mod write;
pub(crate) mod write_async;
