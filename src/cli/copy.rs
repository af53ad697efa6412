//! `zarrbuf copy`: copy an array (or a subset) into a new layout, a zarr store or a branch of
//! an icechunk repository.

use super::args::{CopyCli, VersionArgs};
use super::names::label;
use super::output::errln;
use super::parse::{parse_bytes, parse_shape, prototype};
use super::progress::{Shown, chunk_progress};
use crate::relabel;
use std::time::Instant;
use zarrbuf::options::{Durability, ReadOptions, WriteOptions};
use zarrbuf::store::{Location, node_path};
use zarrbuf::{BufferPrototype, Error, Result};

/// The destination store of a copy: a local directory (created if missing; a zip file is
/// refused) or an object-store URL.
pub(crate) fn destination_store(
    a: &CopyCli,
) -> Result<std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits>> {
    let dst = Location::parse(&a.dst)?;
    let Some(dir) = dst.local_path() else {
        return zarrbuf::store::open_store(&a.dst);
    };
    refuse_zip_destination(a, dir)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        path: dir.display().to_string(),
        source: e,
    })?;
    zarrbuf::store::open_store(&dir.to_string_lossy())
}

/// Refuses `memory://` on either side of a copy: a store in memory lives only as long as
/// this process, so a copy into it would report success over data that is already gone, and
/// one out of it would find a new, empty store.
pub(crate) fn refuse_memory_store(a: &CopyCli) -> Result<()> {
    for (side, text) in [("destination", &a.dst), ("source", &a.src)] {
        if Location::parse(text)?.is_memory() {
            return Err(Error::Unsupported(format!(
                "copy {side} {text}: a memory:// store lives only inside this zarrbuf process \
                 and is gone when it exits, so the copy would be lost (or, as a source, read \
                 a new, empty store); copy into or out of a directory, a zip file (source \
                 only) or an object-store URL instead"
            )));
        }
    }
    Ok(())
}

/// Refuses a zip file (or a path named `.zip`) as copy's destination: zip stores are read
/// only. Other files are refused as not being directories.
pub(crate) fn refuse_zip_destination(a: &CopyCli, dst: &std::path::Path) -> Result<()> {
    let named_zip = dst
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
    if named_zip || dst.is_file() {
        let zip = named_zip || {
            use std::io::Read;
            let mut head = [0u8; 4];
            std::fs::File::open(dst)
                .and_then(|mut f| f.read_exact(&mut head))
                .is_ok_and(|()| &head == b"PK\x03\x04" || &head == b"PK\x05\x06")
        };
        let why = if zip {
            format!(
                "zip stores are read-only in zarrbuf; copy the array into a directory instead: \
                 zarrbuf copy {} out.zarr",
                a.src
            )
        } else {
            "it is a file, not a directory; give a directory path (created if missing)".into()
        };
        return Err(Error::Unsupported(format!(
            "copy destination {}: {why}",
            a.dst
        )));
    }
    Ok(())
}

/// The destination layout `copy`'s flags ask for (`shape`: the copied shape, `elem_bytes`:
/// the data type's size, for `--layout gpu`).
pub(crate) fn copy_layout(
    a: &CopyCli,
    shape: &[u64],
    elem_bytes: usize,
) -> Result<zarrbuf::ArrayLayout> {
    let base = match a.layout.as_deref() {
        Some(_) => zarrbuf::ArrayLayout::for_gpu(shape, elem_bytes),
        None => zarrbuf::ArrayLayout::default(),
    };
    let parse =
        |what, text: &Option<String>| text.as_deref().map(|c| parse_shape(what, c)).transpose();
    Ok(zarrbuf::ArrayLayout {
        chunks: parse("chunks", &a.chunks)?.or(base.chunks),
        shards: parse("shards", &a.shards)?.or(base.shards),
        codecs: a
            .codec
            .as_deref()
            .map(str::parse)
            .transpose()?
            .or(base.codecs),
        zarr_format: a.zarr_format,
    })
}

/// Refuses, before the destination is created, chunks (shards) that `--chunks`/`--shards`
/// make larger than any block can hold: a block holds at least one whole chunk, beyond
/// `--memory` if need be, but never beyond the memory this process may still take.
fn refuse_huge_chunks(layout: &zarrbuf::ArrayLayout, elem: usize, memory: usize) -> Result<()> {
    let Some(shape) = layout.shards.as_ref().or(layout.chunks.as_ref()) else {
        return Ok(());
    };
    let bytes = shape
        .iter()
        .try_fold(elem as u64, |n, &d| n.checked_mul(d))
        .unwrap_or(u64::MAX);
    let limit = zarrbuf::alloc::available_memory()
        .unwrap_or(u64::MAX)
        .max(memory as u64);
    if bytes <= limit {
        return Ok(());
    }
    Err(Error::TooLarge {
        what: format!("one destination chunk (shard) of shape {shape:?}"),
        bytes,
        limit,
        limit_from: "--memory or the memory this process may still take, whichever is more; \
                     a block holds at least one chunk"
            .into(),
        advice: "choose smaller --chunks (--shards)".into(),
    })
}

/// The branch a copy commits to when its destination is an icechunk repository (named by
/// `--branch`/`--message`, or a directory laid out as one); `None` for a zarr store.
pub(crate) fn icechunk_destination(a: &CopyCli) -> Result<Option<String>> {
    if let Some((flag, name)) = a
        .tag
        .as_ref()
        .map(|t| ("--tag", t))
        .or(a.snapshot.as_ref().map(|s| ("--snapshot", s)))
    {
        return Err(Error::Unsupported(format!(
            "copy writes into a branch of an icechunk repository, and {flag} {name} names a snapshot, which never changes; give --branch NAME instead (the copy is committed there as one snapshot)"
        )));
    }
    let repository = zarrbuf::icechunk::is_icechunk_repository(&a.dst);
    if a.branch.is_none() && a.message.is_none() && !repository {
        return Ok(None);
    }
    if a.resume {
        return Err(Error::InvalidArgument(
            "--resume continues a copy into a zarr store; a failed copy into an icechunk repository committed nothing, so run it again without --resume"
                .into(),
        ));
    }
    Ok(Some(a.branch.clone().unwrap_or_else(|| "main".into())))
}

/// A writable session on a branch of an icechunk repository (feature `icechunk`).
#[cfg(feature = "icechunk")]
pub(crate) type Writer = zarrbuf::icechunk::IcechunkWriter;

#[cfg(feature = "icechunk")]
pub(crate) fn open_writer(dst: &str, branch: &str) -> Result<Writer> {
    zarrbuf::icechunk::IcechunkWriter::open(dst, branch)
}

#[cfg(feature = "icechunk")]
pub(crate) fn writer_store(
    w: &Writer,
) -> std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    w.store()
}

#[cfg(feature = "icechunk")]
pub(crate) fn commit(w: Writer, message: &str) -> Result<String> {
    w.commit(message)
}

/// Without the `icechunk` feature there is no writer: opening one says so.
#[cfg(not(feature = "icechunk"))]
pub(crate) enum Writer {}

#[cfg(not(feature = "icechunk"))]
pub(crate) fn open_writer(dst: &str, _branch: &str) -> Result<Writer> {
    Err(Error::Unsupported(format!(
        "{dst} is an icechunk destination, and this zarrbuf was built without icechunk \
         support; rebuild it with the `icechunk` feature (cargo install --path . --features \
         icechunk; it needs Rust 1.95)"
    )))
}

#[cfg(not(feature = "icechunk"))]
pub(crate) fn writer_store(
    w: &Writer,
) -> std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    match *w {}
}

#[cfg(not(feature = "icechunk"))]
pub(crate) fn commit(w: Writer, _message: &str) -> Result<String> {
    match w {}
}

pub(crate) fn copy(a: &CopyCli) -> Result<()> {
    refuse_memory_store(a)?;
    let proto = prototype(a.device.as_deref())?;
    let memory_bytes = parse_bytes(&a.memory)?;
    let branch = icechunk_destination(a)?;
    if branch.is_none()
        && let Some(dir) = Location::parse(&a.dst)?.local_path()
    {
        refuse_zip_destination(a, dir)?;
    }
    let src_opts = VersionArgs {
        branch: a.src_branch.clone(),
        tag: a.src_tag.clone(),
        snapshot: a.src_snapshot.clone(),
        virtual_access: a.virtual_access.clone(),
    }
    .options()?;
    let src = zarrbuf::open_opt(&a.src, &a.src_path, &src_opts)
        .map_err(|e| relabel(e, &a.src, &a.src_path))?;
    // Into an icechunk branch the source is read from the snapshot it was opened at, which
    // the copy's writes never change.
    if branch.is_none() {
        refuse_overlap(a)?;
    }
    let shape = src.shape().to_vec();
    let ranges = match a.subset.as_deref() {
        Some(s) => zarrbuf::subset::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let new_shape: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
    // Variable-length elements are sized as 64 bytes for --layout gpu and --memory checks.
    let elem = match zarrbuf::describe(&src) {
        Ok(info) => info.data_type.size(),
        Err(_) if zarrbuf::describe_varlen(&src).is_ok() => 64,
        Err(e) => return Err(e),
    };
    let layout = copy_layout(a, &new_shape, elem)?;
    refuse_huge_chunks(&layout, elem, memory_bytes)?;
    let writer = branch
        .as_deref()
        .map(|b| open_writer(&a.dst, b))
        .transpose()?;
    let store = match &writer {
        Some(w) => writer_store(w),
        None => destination_store(a)?,
    };
    let dst = if a.resume {
        zarrbuf::resume_like(&src, &new_shape, store, &a.dst_path, &layout)
    } else {
        zarrbuf::create_like(&src, &new_shape, store, &a.dst_path, &layout, a.overwrite)
    }
    .map_err(|e| relabel(e, &a.dst, &a.dst_path))?;
    let durability = if a.sync {
        Durability::Sync
    } else {
        Durability::Rename
    };
    let mut write = WriteOptions::default()
        .with_compress(a.compress)
        .with_durability(durability);
    let mut read = ReadOptions::default();
    // --io-concurrency drives both sides: the source's reads and the destination's uploads.
    (read.io_concurrency, write.io_concurrency) = (a.io_concurrency, a.io_concurrency);
    let mut opts = zarrbuf::options::CopyOptions::default()
        .with_subset(ranges)
        .with_prototype(proto.clone())
        .with_memory_bytes(memory_bytes)
        .with_resume(a.resume)
        .with_read(read)
        .with_write(write);
    let bar = chunk_progress("copying", Shown::TerminalOrLines);
    if let Some((_, update)) = &bar {
        opts = opts.with_progress(update.clone());
    }
    let bar = bar.map(|(b, _)| b);
    let start = Instant::now();
    let result = zarrbuf::copy_array(&src, &dst, &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result.map_err(|e| name_copy_side(e, a))?;
    if let (Some(w), Some(b)) = (writer, &branch) {
        let message = a.message.clone().unwrap_or_else(|| {
            format!(
                "zarrbuf copy {} to {}",
                label(&a.src, &a.src_path),
                a.dst_path.trim_matches('/')
            )
        });
        let id = commit(w, &message)?;
        errln!("committed snapshot {id} to branch {b} of {}", a.dst);
    }
    copy_summary(a, &dst, &new_shape, &proto, start)
}

/// Refuses a destination that overlaps the source array in either direction (the same
/// array, inside it, or holding it), whatever the store names (`store.zarr/inner` and
/// `store.zarr` with `--dst-path inner`, a symlink, `..`, a `file://` URL): --overwrite
/// would delete the source, and a copy into it would change what it reads.
pub(crate) fn refuse_overlap(a: &CopyCli) -> Result<()> {
    let src = Location::parse(&a.src)?.join(&node_path(&a.src_path)?);
    let dst = Location::parse(&a.dst)?.join(&node_path(&a.dst_path)?);
    if src.overlaps(&dst) {
        return Err(Error::InvalidArgument(format!(
            "the destination {} overlaps the source {} (one is the other or lies inside it, \
             after resolving symlinks and `..`), and writing it would overwrite the source; \
             copy into a store or path outside the source",
            label(&a.dst, &a.dst_path),
            label(&a.src, &a.src_path)
        )));
    }
    Ok(())
}

/// A copy error naming its array as `copy_array` does ("source /p", "destination /p"), with
/// the store the user gave.
pub(crate) fn name_copy_side(e: Error, a: &CopyCli) -> Error {
    match e {
        Error::Zarr {
            array,
            message,
            source,
            ..
        } => {
            let array = if let Some(p) = array.strip_prefix("source ") {
                format!("{} (source)", label(&a.src, p))
            } else if let Some(p) = array.strip_prefix("destination ") {
                format!("{} (destination)", label(&a.dst, p))
            } else {
                array
            };
            Error::Zarr {
                array,
                message,
                source,
            }
        }
        other => other,
    }
}

/// The line a finished copy (started at `start`) prints on stderr: what was copied where, in
/// what layout, and how fast.
pub(crate) fn copy_summary(
    a: &CopyCli,
    dst: &zarrbuf::DynArray,
    new_shape: &[u64],
    proto: &BufferPrototype,
    start: Instant,
) -> Result<()> {
    let seconds = start.elapsed().as_secs_f64();
    if let Ok(v) = zarrbuf::describe_varlen(dst) {
        errln!(
            "copied {} {:?} {} into {} (chunks {:?}{}, codecs {}) in {:.3} s ({:.0} elements/s)",
            label(&a.src, &a.src_path),
            new_shape,
            v.stored_type,
            label(&a.dst, &a.dst_path),
            v.inner_chunks.as_ref().unwrap_or(&v.chunks),
            match &v.inner_chunks {
                Some(_) => format!(" in shards {:?}", v.chunks),
                None => String::new(),
            },
            v.codecs.join(", "),
            seconds,
            new_shape.iter().product::<u64>() as f64 / seconds.max(1e-9)
        );
        return Ok(());
    }
    let info = zarrbuf::describe(dst)?;
    let bytes = new_shape.iter().product::<u64>() * info.data_type.size() as u64;
    errln!(
        "copied {} {:?} {} into {} (chunks {:?}{}, codecs {}) via {} in {:.3} s ({:.3} GB/s)",
        label(&a.src, &a.src_path),
        new_shape,
        info.data_type,
        label(&a.dst, &a.dst_path),
        info.inner_chunks.as_ref().unwrap_or(&info.chunks),
        match &info.inner_chunks {
            Some(_) => format!(" in shards {:?}", info.chunks),
            None => String::new(),
        },
        info.codecs.join(", "),
        proto.memory(),
        seconds,
        bytes as f64 / seconds.max(1e-9) / 1e9
    );
    Ok(())
}
