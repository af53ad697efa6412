//! nvCOMP 6's C ABI as zarrbuf declares it: the by-value options structs, the batched
//! functions' signatures (decompression, compression, status strings) and the library's
//! properties, from the headers of the `nvidia-libnvcomp-cu13` wheel.

use cudarc::driver::sys::CUstream;
use std::ffi::{c_char, c_void};

/// The decompression options of nvCOMP 6's batched API: every format's struct (zstd,
/// DEFLATE, LZ4) is 64 bytes that start with `nvcompDecompressBackend_t backend`; the rest
/// zero is the defaults (no sorting, no bitshuffle).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DecompressOpts {
    pub(super) words: [u32; 16],
}

/// `NVCOMP_DECOMPRESS_BACKEND_CUDA` (nvcomp/shared_types.h).
pub(super) const BACKEND_CUDA: u32 = 2;

/// The options of every decompression: the CUDA implementation, never the default backend.
/// On GPUs with a hardware decompression engine the default may pick that engine, on which
/// corrupt input is undefined behaviour and every chunk's status reads as success (the LZ4
/// and DEFLATE headers say so); zarrbuf decodes stored data it can check only in part on
/// the CPU, and the CUDA implementation reports a chunk it cannot decompress in its status.
pub(super) const DECOMPRESS_OPTS: DecompressOpts = {
    let mut words = [0; 16];
    words[0] = BACKEND_CUDA;
    DecompressOpts { words }
};

pub(super) type GetTempSize = unsafe extern "C" fn(
    num_chunks: usize,
    max_uncompressed_chunk_bytes: usize,
    opts: DecompressOpts,
    temp_bytes: *mut usize,
    max_total_uncompressed_bytes: usize,
    stream: CUstream,
) -> i32;

pub(super) type DecompressAsync = unsafe extern "C" fn(
    device_compressed_chunk_ptrs: *const *const c_void,
    device_compressed_chunk_bytes: *const usize,
    device_uncompressed_buffer_bytes: *const usize,
    device_uncompressed_chunk_bytes: *mut usize,
    num_chunks: usize,
    device_temp_ptr: *mut c_void,
    temp_bytes: usize,
    device_uncompressed_chunk_ptrs: *const *mut c_void,
    opts: DecompressOpts,
    device_statuses: *mut i32,
    stream: CUstream,
) -> i32;

pub(super) type StatusString = unsafe extern "C" fn(status: i32) -> *const c_char;

/// The compression options of nvCOMP 6's batched API: 64 bytes per format, all zero for
/// the defaults of zstd (`char reserved[64]`) and LZ4 (`nvcompType_t data_type` =
/// `NVCOMP_TYPE_CHAR` = 0, `nvcompBitshuffleMode_t` = `NVCOMP_BITSHUFFLE_NONE` = 0, 56
/// reserved bytes); DEFLATE's and gzip's first `int` is their algorithm (0–5), the other 60
/// bytes reserved.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CompressOpts {
    words: [u32; 16],
}

impl CompressOpts {
    /// All defaults (zstd, LZ4).
    pub(crate) const DEFAULT: CompressOpts = CompressOpts { words: [0; 16] };

    /// DEFLATE or gzip with `algorithm` (`nvcompBatched{Deflate,Gzip}CompressOpts_t::algorithm`).
    pub(crate) fn deflate(algorithm: i32) -> Self {
        let mut words = [0u32; 16];
        words[0] = algorithm as u32;
        CompressOpts { words }
    }
}

pub(super) type CompressGetTempSize = unsafe extern "C" fn(
    num_chunks: usize,
    max_uncompressed_chunk_bytes: usize,
    opts: CompressOpts,
    temp_bytes: *mut usize,
    max_total_uncompressed_bytes: usize,
    stream: CUstream,
) -> i32;

pub(super) type CompressGetMaxOutputChunkSize = unsafe extern "C" fn(
    max_uncompressed_chunk_bytes: usize,
    opts: CompressOpts,
    max_compressed_chunk_bytes: *mut usize,
) -> i32;

pub(super) type CompressAsync = unsafe extern "C" fn(
    device_uncompressed_chunk_ptrs: *const *const c_void,
    device_uncompressed_chunk_bytes: *const usize,
    max_uncompressed_chunk_bytes: usize,
    num_chunks: usize,
    device_temp_ptr: *mut c_void,
    temp_bytes: usize,
    device_compressed_chunk_ptrs: *const *mut c_void,
    device_compressed_chunk_bytes: *mut usize,
    opts: CompressOpts,
    device_statuses: *mut i32,
    stream: CUstream,
) -> i32;

/// `nvcompProperties_t` (nvcomp/shared_types.h: `uint32_t version, cudart_version`), with
/// room to spare: the version is asked before zarrbuf knows which nvCOMP it has loaded, and
/// a library whose struct had grown would then write past an exact-size one.
#[repr(C)]
pub(super) struct Properties {
    pub(super) version: u32,
    pub(super) cudart_version: u32,
    pub(super) spare: [u32; 14],
}

pub(super) type GetProperties = unsafe extern "C" fn(properties: *mut Properties) -> i32;
