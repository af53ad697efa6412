//! Opening the array a command reads: synchronously from a directory, or through the async
//! reader (object stores, or `--async`) on a runtime of its own.

use std::ops::Range;
use zarrbuf::{
    ArrayReadExt, BufferPrototype, Error, ReadOutput, Result,
    options::{OpenOptions, ReadOptions},
};

/// Which reader opens an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// The sync reader for a directory, the async one for a URL.
    ByLocation,
    /// The async reader for a directory too (`--async`).
    Async,
}

/// How `read` and `bench` open their array: the reader, and the icechunk version.
pub(crate) struct Opening {
    pub(crate) reader: Reader,
    pub(crate) options: OpenOptions,
}

/// An array opened from a directory (sync) or a URL (async, driven by a tokio runtime).
pub(crate) enum Source {
    Local(Box<zarrbuf::DynArray>),
    Remote(Box<zarrbuf::AsyncArray>, tokio::runtime::Runtime),
}

impl Source {
    pub(crate) fn open(
        store: &str,
        path: &str,
        reader: Reader,
        opts: &OpenOptions,
    ) -> Result<Self> {
        let remote = zarrbuf::store::Location::parse(store)?.is_url();
        if !remote && reader == Reader::ByLocation {
            return Ok(Source::Local(Box::new(zarrbuf::open_opt(
                store, path, opts,
            )?)));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start the async runtime: {e}")))?;
        let array = rt.block_on(zarrbuf::open_opt_async(store, path, opts))?;
        Ok(Source::Remote(Box::new(array), rt))
    }

    pub(crate) fn shape(&self) -> Vec<u64> {
        match self {
            Source::Local(a) => a.shape().to_vec(),
            Source::Remote(a, _) => a.shape().to_vec(),
        }
    }

    pub(crate) fn describe(&self) -> Result<zarrbuf::ArrayInfo> {
        match self {
            Source::Local(a) => zarrbuf::describe(a.as_ref()),
            Source::Remote(a, _) => zarrbuf::describe(a.as_ref()),
        }
    }

    /// What the array's elements are when they are of variable length (strings or byte
    /// strings), `None` for fixed-size elements.
    pub(crate) fn varlen_kind(&self) -> Option<zarrbuf::VarLenKind> {
        match self {
            Source::Local(a) => zarrbuf::varlen_kind(a.as_ref()),
            Source::Remote(a, _) => zarrbuf::varlen_kind(a.as_ref()),
        }
    }

    pub(crate) fn describe_varlen(&self) -> Result<zarrbuf::VarLenInfo> {
        match self {
            Source::Local(a) => zarrbuf::describe_varlen(a.as_ref()),
            Source::Remote(a, _) => zarrbuf::describe_varlen(a.as_ref()),
        }
    }

    /// Reads `subset` into a new output of the caller's kind (`NDBuffer` or
    /// `VarLenBuffer`, see `zarrbuf::ReadOutput`).
    pub(crate) fn read<T: ReadOutput>(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<T> {
        use zarrbuf::ArrayReadAsyncExt;
        match self {
            Source::Local(a) => a.read_as_opt(subset, proto, opts),
            Source::Remote(a, rt) => rt.block_on(a.read_as_opt_async(subset, proto, opts)),
        }
    }
}
