//! Sharing CUDA device buffers between processes without a copy (CUDA IPC; cuda.core's
//! `Buffer.get_ipc_descriptor` / `Buffer.from_ipc_descriptor`).
//!
//! A data-loader process reads arrays into GPU memory and hands them to a training process:
//! [`Buffer::ipc_descriptor`] turns a device buffer into an [`IpcDescriptor`], plain bytes
//! ([`IpcDescriptor::to_bytes`], [`IpcDescriptor::to_hex`]) to send over any channel — a
//! pipe, a socket, a file, a command line — and [`Buffer::from_ipc_descriptor`] in the other
//! process maps the same device memory as a zarrbuf [`Buffer`]: same bytes, no copy, writes
//! visible to both.
//!
//! [`IpcDescriptor`]'s docs hold the design choice (legacy IPC, and why) and the rules for
//! exporters and importers; `crate::memory::ipc` makes the driver calls.

use super::{Allocator, Buffer, BufferPrototype};
use crate::errors::{Error, Result};
use crate::memory::ipc::{self as mem_ipc, HANDLE_LEN};
use crate::memory::{Init, Region};
use crate::place::Memory;
use std::sync::{Arc, OnceLock};

/// The first bytes of every encoded descriptor.
const MAGIC: [u8; 8] = *b"ZBUF-IPC";
/// The byte-format version this zarrbuf writes and reads.
const VERSION: u16 = 1;

/// A CUDA device buffer exported for another process (CUDA IPC): which GPU, the CUDA IPC
/// handle of the allocation, and which bytes of it.
///
/// A data-loader process reads arrays into GPU memory and hands them to a training process:
/// [`Buffer::ipc_descriptor`] turns a device buffer into a descriptor, plain bytes to send
/// over any channel, and [`Buffer::from_ipc_descriptor`] in the other process maps the same
/// device memory as a zarrbuf [`Buffer`]: same bytes, no copy, writes visible to both.
///
/// # Which memory can be exported: `BufferPrototype::cuda(n).ipc_shareable()`
///
/// zarrbuf allocates device memory from the device's stream-ordered memory pool
/// (`cuMemAllocAsync`), and the legacy CUDA IPC calls (`cuIpcGetMemHandle` /
/// `cuIpcOpenMemHandle`) cannot export pool memory. Memory to be shared is therefore made by
/// a prototype that allocates it with `cuMemAlloc` instead:
/// [`BufferPrototype::ipc_shareable`]. Reads, copies and every other constructor work with
/// such a prototype as with any other; exporting a buffer from the pool, or host or pinned
/// memory, is an `Error::Unsupported` that says to use it.
///
/// Why legacy IPC and not the memory-pool export API (`cuMemPoolExportPointer` with a pool
/// made shareable through a POSIX file descriptor): the pool API hands out a file
/// descriptor, which only a Unix-domain socket (`SCM_RIGHTS`) can carry to another process,
/// and the importer needs both the fd and a pointer export. Legacy IPC's handle is 64 plain
/// bytes, so an [`IpcDescriptor`] is plain bytes too and travels over whatever channel the
/// user already has. The price is one `cuMemAlloc` per shared buffer (slower than a pool
/// allocation; allocate shared buffers once and reuse them) and the same-device-or-peer rule
/// of legacy IPC.
///
/// # Rules for the exporter and the importer
///
/// - **Lifetime.** The exporter must keep its `Buffer` (or a clone or slice of the same
///   allocation) alive until every importer has dropped every buffer it imported: zarrbuf
///   cannot see other processes, and freeing exported memory while another process maps it
///   is an error in that process (at best). An importer's buffer unmaps the memory
///   (`cuIpcCloseMemHandle`) when its last view is dropped; dropping it before the exporter
///   drops its own is the normal order and is fine.
/// - **Synchronisation.** [`Buffer::ipc_descriptor`] waits for zarrbuf's own work in flight
///   on the memory (asynchronous copies, reads into it) before it returns, so the
///   descriptor is handed out only after zarrbuf's writes are complete. Work you enqueued
///   yourself on other streams (your kernels on [`Buffer::device_addr`]) must be finished
///   first: call [`Buffer::sync`]. After that the two processes share plain memory with no
///   ordering between them: agree on who writes when over your channel (for example, the
///   importer syncs its writes — [`Buffer::copy_from`] and [`Buffer::sync`] wait for them
///   — and then tells the exporter).
/// - **Same process.** CUDA maps a handle only in another process than the one that exported
///   it; [`Buffer::from_ipc_descriptor`] in the exporting process is an
///   `Error::InvalidArgument` (use the exported buffer itself).
/// - **Devices.** The descriptor names the GPU by UUID, so the importer finds it whatever
///   its `CUDA_VISIBLE_DEVICES`; an importer that cannot see that GPU gets
///   `Error::DeviceUnavailable`.
/// - **Slices.** A slice of a buffer can be exported: the descriptor holds the handle of the
///   whole allocation plus the view's byte offset and length, and the importer's buffer is
///   that view (its [`Buffer::total_size`] is the whole allocation).
///
/// # The byte format
///
/// It is plain data: [`to_bytes`](Self::to_bytes) / [`from_bytes`](Self::from_bytes) (and
/// the `_hex` twins) carry it over any channel. The encoding is
/// [`ENCODED_LEN`](Self::ENCODED_LEN) bytes, integers little-endian:
///
/// | bytes | field |
/// |---|---|
/// | 0..8 | magic `ZBUF-IPC` |
/// | 8..10 | format version (1) |
/// | 10..12 | reserved, 0 |
/// | 12..16 | the exporter's device ordinal |
/// | 16..32 | the device's UUID |
/// | 32..36 | the exporter's process id |
/// | 36..40 | reserved, 0 |
/// | 40..48 | a per-process token of the exporter (to recognise its own descriptors) |
/// | 48..56 | size of the exported allocation in bytes |
/// | 56..64 | byte offset of the view in the allocation |
/// | 64..72 | length of the view in bytes |
/// | 72..136 | the `cuIpcGetMemHandle` handle of the allocation |
/// | 136..140 | CRC-32 (IEEE) of bytes 0..136 |
///
/// ```
/// use zarrbuf::Error;
/// use zarrbuf::ipc::IpcDescriptor;
/// // Anything that is not a descriptor is a clear error, never a panic.
/// let err = IpcDescriptor::from_bytes(b"hello").unwrap_err();
/// assert!(matches!(err, Error::InvalidArgument(_)));
/// ```
///
/// The whole round trip, across two processes:
///
/// ```no_run
/// use zarrbuf::{Buffer, BufferPrototype};
/// use zarrbuf::ipc::IpcDescriptor;
/// // Exporting process: allocate shareable memory, fill it, export.
/// let mut b = Buffer::zeros(1 << 20, &BufferPrototype::cuda(0).ipc_shareable())?;
/// b.fill_bytes(7)?;
/// let text = b.ipc_descriptor()?.to_hex(); // send it: pipe, socket, file, argv...
/// // Importing process (another one): the same device memory, no copy.
/// let shared = Buffer::from_ipc_descriptor(&IpcDescriptor::from_hex(&text)?)?;
/// assert_eq!(shared.len(), 1 << 20);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IpcDescriptor {
    ordinal: u32,
    uuid: [u8; 16],
    pid: u32,
    token: u64,
    allocation_size: u64,
    offset: u64,
    len: u64,
    handle: [u8; HANDLE_LEN],
}

impl std::fmt::Debug for IpcDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcDescriptor")
            .field("device", &format_args!("cuda:{}", self.ordinal))
            .field("uuid", &format_args!("{}", uuid_string(&self.uuid)))
            .field("exporter_pid", &self.pid)
            .field("allocation_size", &self.allocation_size)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// A per-process random token: tells a process its own descriptors apart from another's
/// even where process ids repeat (containers).
fn process_token() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static TOKEN: OnceLock<u64> = OnceLock::new();
    *TOKEN.get_or_init(|| {
        // RandomState's keys come from the OS's randomness, fresh in every process (no
        // clock: Miri, which runs these tests, has none under isolation).
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish().max(1)
    })
}

fn uuid_string(u: &[u8; 16]) -> String {
    let hex = hex_encode(u);
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "not a valid zarrbuf CUDA IPC descriptor: {what}; pass the bytes of \
         IpcDescriptor::to_bytes (or the text of to_hex) unchanged, from the same zarrbuf version"
    ))
}

impl IpcDescriptor {
    /// Length of [`to_bytes`](Self::to_bytes) (format version 1).
    ///
    /// ```
    /// assert_eq!(zarrbuf::ipc::IpcDescriptor::ENCODED_LEN, 140);
    /// ```
    pub const ENCODED_LEN: usize = 140;

    fn from_export(e: mem_ipc::Exported) -> Self {
        IpcDescriptor {
            ordinal: e.ordinal as u32,
            uuid: e.uuid,
            pid: std::process::id(),
            token: process_token(),
            allocation_size: e.allocation_size as u64,
            offset: e.offset as u64,
            len: e.len as u64,
            handle: e.handle,
        }
    }

    /// The descriptor as [`ENCODED_LEN`](Self::ENCODED_LEN) bytes (the table in the type's
    /// docs), to send to another process.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(4096, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// let bytes = b.ipc_descriptor()?.to_bytes();
    /// assert_eq!(bytes.len(), zarrbuf::ipc::IpcDescriptor::ENCODED_LEN);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::ENCODED_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.ordinal.to_le_bytes());
        out.extend_from_slice(&self.uuid);
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.token.to_le_bytes());
        out.extend_from_slice(&self.allocation_size.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.handle);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), Self::ENCODED_LEN);
        out
    }

    /// Reads a descriptor written by [`to_bytes`](Self::to_bytes).
    ///
    /// # Errors
    /// `InvalidArgument`, saying what is wrong, for anything else: bytes that do not start
    /// with the magic, another format version, a wrong length (truncated or padded), a
    /// checksum mismatch (damaged in transit), reserved fields that are not zero, and a view
    /// (offset, length) that does not fit in the allocation. Never panics.
    ///
    /// ```
    /// use zarrbuf::ipc::IpcDescriptor;
    /// assert!(IpcDescriptor::from_bytes(&[]).is_err());
    /// assert!(IpcDescriptor::from_bytes(&[0xff; 140]).is_err());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            let head = &bytes[..bytes.len().min(MAGIC.len())];
            return Err(bad(format_args!(
                "{} bytes that do not start with the magic \"ZBUF-IPC\" (they start with {})",
                bytes.len(),
                if head.is_empty() {
                    "nothing".to_string()
                } else {
                    format!("0x{}", hex_encode(head))
                }
            )));
        }
        if bytes.len() < 10 {
            return Err(bad(format_args!(
                "{} bytes: truncated after the magic (a descriptor has {})",
                bytes.len(),
                Self::ENCODED_LEN
            )));
        }
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let version = u16_at(8);
        if version != VERSION {
            return Err(bad(format_args!(
                "format version {version}, but this zarrbuf reads version {VERSION} only; \
                 export and import with the same zarrbuf version"
            )));
        }
        if bytes.len() != Self::ENCODED_LEN {
            return Err(bad(format_args!(
                "{} bytes, but a version-{VERSION} descriptor has exactly {} (truncated or padded)",
                bytes.len(),
                Self::ENCODED_LEN
            )));
        }
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let crc = u32_at(136);
        let actual = crc32fast::hash(&bytes[..136]);
        if crc != actual {
            return Err(bad(format_args!(
                "checksum mismatch (stored 0x{crc:08x}, computed 0x{actual:08x}): the bytes were \
                 damaged on the way"
            )));
        }
        if u16_at(10) != 0 || u32_at(36) != 0 {
            return Err(bad("reserved fields are not zero"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&bytes[16..32]);
        let mut handle = [0u8; HANDLE_LEN];
        handle.copy_from_slice(&bytes[72..136]);
        let d = IpcDescriptor {
            ordinal: u32_at(12),
            uuid,
            pid: u32_at(32),
            token: u64_at(40),
            allocation_size: u64_at(48),
            offset: u64_at(56),
            len: u64_at(64),
            handle,
        };
        match d.offset.checked_add(d.len) {
            Some(end) if end <= d.allocation_size => {}
            end => {
                return Err(bad(format_args!(
                    "it names bytes {}..{} of an allocation of {} bytes",
                    d.offset,
                    end.map_or("(overflow)".to_string(), |e| e.to_string()),
                    d.allocation_size
                )));
            }
        }
        if usize::try_from(d.allocation_size).is_err() {
            return Err(bad(format_args!(
                "an allocation of {} bytes does not fit this machine's address space",
                d.allocation_size
            )));
        }
        Ok(d)
    }

    /// [`to_bytes`](Self::to_bytes) as lowercase hexadecimal text (for command lines,
    /// environment variables, JSON).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// use zarrbuf::ipc::IpcDescriptor;
    /// let b = Buffer::zeros(4096, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// let text = b.ipc_descriptor()?.to_hex();
    /// assert_eq!(text.len(), 2 * IpcDescriptor::ENCODED_LEN);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_hex(&self) -> String {
        hex_encode(&self.to_bytes())
    }

    /// Reads the text of [`to_hex`](Self::to_hex) (either case; surrounding whitespace is
    /// ignored).
    ///
    /// # Errors
    /// `InvalidArgument` for text that is not hexadecimal (an odd number of digits, another
    /// character) and for everything [`from_bytes`](Self::from_bytes) refuses.
    ///
    /// ```
    /// use zarrbuf::ipc::IpcDescriptor;
    /// assert!(IpcDescriptor::from_hex("not hex").is_err());
    /// assert!(IpcDescriptor::from_hex("abc").is_err());
    /// ```
    pub fn from_hex(text: &str) -> Result<Self> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) {
            return Err(bad(format_args!(
                "hexadecimal text of {} digits (an odd number)",
                text.len()
            )));
        }
        let digit = |c: u8| -> Result<u8> {
            (c as char)
                .to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| bad(format_args!("{:?} is not a hexadecimal digit", c as char)))
        };
        let bytes = text
            .as_bytes()
            .chunks(2)
            .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
            .collect::<Result<Vec<u8>>>()?;
        Self::from_bytes(&bytes)
    }

    /// The exporting process's ordinal of the device (the importer's may differ; the device
    /// is found by [`device_uuid`](Self::device_uuid)).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let d = Buffer::zeros(16, &BufferPrototype::cuda(0).ipc_shareable())?.ipc_descriptor()?;
    /// assert_eq!(d.device_ordinal(), 0);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn device_ordinal(&self) -> usize {
        self.ordinal as usize
    }

    /// The UUID of the GPU that holds the memory (as `cuDeviceGetUuid` and `nvidia-smi -L`
    /// report it).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let d = Buffer::zeros(16, &BufferPrototype::cuda(0).ipc_shareable())?.ipc_descriptor()?;
    /// println!("{:02x?}", d.device_uuid());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn device_uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// The process id of the exporter (for diagnostics).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let d = Buffer::zeros(16, &BufferPrototype::cuda(0).ipc_shareable())?.ipc_descriptor()?;
    /// assert_eq!(d.exporter_pid(), std::process::id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn exporter_pid(&self) -> u32 {
        self.pid
    }

    /// Size in bytes of the whole exported allocation (≥ [`offset`](Self::offset) +
    /// [`len`](Self::len)).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(100, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// assert!(b.slice(10..20).ipc_descriptor()?.allocation_size() >= 100);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn allocation_size(&self) -> usize {
        // from_bytes and the export checked that it fits.
        self.allocation_size as usize
    }

    /// Byte offset of the exported view in the allocation.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(100, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// assert_eq!(b.slice(10..20).ipc_descriptor()?.offset(), 10);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Length in bytes of the exported view (what the importer's buffer holds).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(100, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// assert_eq!(b.slice(10..20).ipc_descriptor()?.len(), 10);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when the exported view has no bytes.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(100, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// assert!(b.slice(5..5).ipc_descriptor()?.is_empty());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when this process exported the descriptor (it cannot import it: CUDA maps a
    /// handle only in another process).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let d = Buffer::zeros(16, &BufferPrototype::cuda(0).ipc_shareable())?.ipc_descriptor()?;
    /// assert!(d.is_from_this_process());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn is_from_this_process(&self) -> bool {
        self.token == process_token()
    }
}

/// Makes CUDA device memory with `cuMemAlloc` (never from a pool), so CUDA IPC can export it.
struct IpcShareable;

impl Allocator for IpcShareable {
    fn allocate(&self, len: usize, memory: Memory) -> Result<Buffer> {
        match memory {
            Memory::Cuda(n) => {
                Region::alloc_cuda_unpooled(n, len, Init::Zeroed).map(Buffer::from_region)
            }
            other => Err(Error::Unsupported(format!(
                "BufferPrototype::ipc_shareable applies to CUDA device memory, but this prototype \
                 makes {other}; use BufferPrototype::cuda(n).ipc_shareable()"
            ))),
        }
    }
}

/// CUDA IPC: prototypes whose device memory other processes can map.
impl BufferPrototype {
    /// The same prototype, but new device memory comes from `cuMemAlloc` instead of the
    /// device's stream-ordered memory pool, so that [`Buffer::ipc_descriptor`] can export it
    /// to another process (see [`IpcDescriptor`]). Everything else — reads into it, copies,
    /// streams — works as with [`BufferPrototype::cuda`]; each allocation is a little slower
    /// (no pool), so allocate shared buffers once and reuse them.
    ///
    /// It takes the place of an allocator set with
    /// [`with_allocator`](Self::with_allocator) (and a later `with_allocator` takes its
    /// place). Only CUDA memory can be made shareable: new buffers of a host or pinned
    /// prototype with this option fail with `Error::Unsupported`. Promotion
    /// ([`Buffer::from_buffer`]) looks at the kind of memory only, so it hands back device
    /// memory from the pool as it is; use [`Buffer::to_ipc_shareable`] for a buffer that is
    /// certain to be exportable.
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype, Memory};
    /// let proto = BufferPrototype::cuda(0).ipc_shareable();
    /// assert_eq!(proto.memory(), Memory::Cuda(0));
    /// let b = Buffer::zeros(1 << 20, &proto)?;
    /// assert!(b.is_ipc_shareable());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn ipc_shareable(self) -> Self {
        self.with_allocator(Arc::new(IpcShareable))
    }
}

/// CUDA IPC: exporting a device buffer to another process and importing it there.
impl Buffer {
    /// Exports this buffer for another process (cuda.core's `get_ipc_descriptor`): the
    /// returned descriptor is plain data; [`Buffer::from_ipc_descriptor`] in another process
    /// maps the same device memory. A slice exports just its bytes.
    ///
    /// Waits first for zarrbuf's work in flight on the memory (asynchronous copies, reads
    /// into it), so the descriptor is handed out only after those writes are complete; your
    /// own kernels on other streams must be finished before (call [`sync`](Self::sync)). The
    /// buffer must stay alive until every importer has dropped what it imported (see
    /// [`IpcDescriptor`] for the rules). A [lazy](Self::lazy) device buffer
    /// is given its memory (zeroed) by the export, so that the importer can write it.
    ///
    /// # Errors
    /// - `Unsupported` for host and pinned memory, and for device memory from the memory
    ///   pool (every prototype but [`BufferPrototype::ipc_shareable`] ones): the message says
    ///   to allocate with `BufferPrototype::cuda(n).ipc_shareable()` or to copy with
    ///   [`to_ipc_shareable`](Self::to_ipc_shareable); also when the driver refuses to export
    ///   foreign device memory (another library's pool, memory imported from a process);
    /// - `DeviceUnavailable` when CUDA cannot be used; `Cuda` for other driver failures.
    ///
    /// ```
    /// use zarrbuf::{Buffer, Error};
    /// let host = Buffer::from_vec(vec![1u8, 2, 3]);
    /// assert!(matches!(host.ipc_descriptor(), Err(Error::Unsupported(_))));
    /// ```
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(1 << 20, &BufferPrototype::cuda(0).ipc_shareable())?;
    /// let bytes = b.slice(4096..8192).ipc_descriptor()?.to_bytes();
    /// // ... send `bytes` to the other process; keep `b` alive until it is done ...
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn ipc_descriptor(&self) -> Result<IpcDescriptor> {
        // Host and pinned memory are refused before a lazy buffer would be given memory.
        mem_ipc::device_ordinal(self.memory(), self.len())?;
        mem_ipc::export(self.region()?).map(IpcDescriptor::from_export)
    }

    /// Maps device memory another process exported with
    /// [`ipc_descriptor`](Self::ipc_descriptor) (cuda.core's `from_ipc_descriptor`): a
    /// buffer of [`desc.len()`](IpcDescriptor::len) bytes of CUDA memory over the exporter's
    /// memory, no copy. Reading and writing it reads and writes the exporter's buffer.
    ///
    /// The device is found by its UUID, so the importer's `CUDA_VISIBLE_DEVICES` may differ
    /// from the exporter's. The mapping (`cuIpcOpenMemHandle` with lazy peer access) is
    /// closed when the last view of the returned buffer is dropped, after zarrbuf's work in
    /// flight on it; that must happen before the exporter frees its buffer. Importing the
    /// same descriptor twice gives two buffers over the same memory.
    ///
    /// # Errors
    /// - `InvalidArgument` when the descriptor was exported by this very process (CUDA maps
    ///   handles of other processes only: use the exported buffer itself), and when the
    ///   handle does not name live memory (the exporter dropped its buffer or exited);
    /// - `DeviceUnavailable` without CUDA, or when this process cannot see the exporter's GPU;
    /// - `OutOfBounds` when the descriptor's view does not fit in the mapped allocation;
    /// - `Cuda` for other driver failures (for example no peer access between the GPUs).
    ///
    /// ```no_run
    /// use zarrbuf::Buffer;
    /// use zarrbuf::ipc::IpcDescriptor;
    /// // `text` came from the exporting process's `ipc_descriptor()?.to_hex()`.
    /// # let text = String::new();
    /// let shared = Buffer::from_ipc_descriptor(&IpcDescriptor::from_hex(&text)?)?;
    /// let host_copy = shared.to_vec()?;
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_ipc_descriptor(desc: &IpcDescriptor) -> Result<Buffer> {
        if desc.is_from_this_process() {
            return Err(Error::InvalidArgument(format!(
                "this CUDA IPC descriptor was exported by this very process (pid {}); CUDA maps \
                 a handle only in another process: use the exported Buffer (or a clone or slice \
                 of it) directly",
                desc.pid
            )));
        }
        let ordinal = mem_ipc::ordinal_of(&desc.uuid)?.ok_or_else(|| {
            let visible = crate::driver::cuda_device_count().unwrap_or(0);
            Error::DeviceUnavailable(format!(
                "the GPU that exported this buffer ({}, cuda:{} in process {}) is not visible \
                 in this process ({visible} CUDA device(s) visible); make it visible \
                 (CUDA_VISIBLE_DEVICES, the container's GPU list)",
                uuid_string(&desc.uuid),
                desc.ordinal,
                desc.pid
            ))
        })?;
        mem_ipc::import(
            ordinal,
            &desc.handle,
            desc.allocation_size(),
            desc.offset(),
            desc.len(),
        )
        .map(Buffer::from_region)
    }

    /// True when [`ipc_descriptor`](Self::ipc_descriptor) will try to export this buffer:
    /// CUDA device memory that does not come from zarrbuf's memory pool — buffers of a
    /// [`BufferPrototype::ipc_shareable`] prototype, and foreign device memory (which the
    /// driver may still refuse to export).
    ///
    /// ```
    /// use zarrbuf::Buffer;
    /// assert!(!Buffer::from_vec(vec![0u8; 4]).is_ipc_shareable());
    /// ```
    pub fn is_ipc_shareable(&self) -> bool {
        matches!(self.memory(), Memory::Cuda(_))
            && self.is_allocated()
            && self
                .region()
                .is_ok_and(|r| !r.storage().is_pool_allocation())
    }

    /// This buffer when it [is IPC-shareable](Self::is_ipc_shareable) (the same storage, no
    /// copy), else a copy in memory of `BufferPrototype::cuda(n).ipc_shareable()` on the
    /// same device.
    ///
    /// # Errors
    /// `Unsupported` for host and pinned memory (no device to copy to is implied: copy it
    /// with `copy_to_new(&BufferPrototype::cuda(n).ipc_shareable())`); the errors of
    /// [`copy_to_new`](Self::copy_to_new).
    ///
    /// ```no_run
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let pooled = Buffer::zeros(1 << 20, &BufferPrototype::cuda(0))?;
    /// let shareable = pooled.to_ipc_shareable()?; // one device-to-device copy
    /// let desc = shareable.ipc_descriptor()?;
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_ipc_shareable(&self) -> Result<Buffer> {
        match self.memory() {
            Memory::Cuda(_) if self.is_ipc_shareable() => Ok(self.clone()),
            Memory::Cuda(n) => self.copy_to_new(&BufferPrototype::cuda(n).ipc_shareable()),
            other => Err(Error::Unsupported(format!(
                "to_ipc_shareable on {} bytes of {other}: only CUDA device memory can be shared \
                 through CUDA IPC; copy it to a device with \
                 copy_to_new(&BufferPrototype::cuda(n).ipc_shareable())",
                self.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IpcDescriptor {
        IpcDescriptor {
            ordinal: 1,
            uuid: [7; 16],
            pid: 1234,
            token: 42,
            allocation_size: 4096,
            offset: 100,
            len: 200,
            handle: std::array::from_fn(|i| i as u8),
        }
    }

    #[test]
    fn bytes_and_hex_round_trip() {
        let d = sample();
        let bytes = d.to_bytes();
        assert_eq!(bytes.len(), IpcDescriptor::ENCODED_LEN);
        assert_eq!(&bytes[..8], b"ZBUF-IPC");
        assert_eq!(IpcDescriptor::from_bytes(&bytes).unwrap(), d);
        let hex = d.to_hex();
        assert_eq!(IpcDescriptor::from_hex(&hex).unwrap(), d);
        assert_eq!(
            IpcDescriptor::from_hex(&format!("  {}\n", hex.to_uppercase())).unwrap(),
            d
        );
        assert_eq!(
            (d.device_ordinal(), d.offset(), d.len(), d.allocation_size()),
            (1, 100, 200, 4096)
        );
        assert!(!d.is_empty());
        assert!(!d.is_from_this_process());
        let dbg = format!("{d:?}");
        assert!(
            dbg.contains("cuda:1") && dbg.contains("GPU-07070707-0707"),
            "{dbg}"
        );
    }

    #[test]
    fn own_descriptors_are_recognised() {
        let d = IpcDescriptor {
            token: process_token(),
            pid: std::process::id(),
            ..sample()
        };
        assert!(d.is_from_this_process());
        let d = IpcDescriptor::from_bytes(&d.to_bytes()).unwrap();
        match Buffer::from_ipc_descriptor(&d) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("this very process"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_single_bit_flip_is_an_error() {
        let bytes = sample().to_bytes();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(
                    matches!(
                        IpcDescriptor::from_bytes(&b),
                        Err(Error::InvalidArgument(_))
                    ),
                    "byte {i} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn every_prefix_is_an_error() {
        let bytes = sample().to_bytes();
        for n in 0..bytes.len() {
            assert!(matches!(
                IpcDescriptor::from_bytes(&bytes[..n]),
                Err(Error::InvalidArgument(_))
            ));
        }
    }
}
