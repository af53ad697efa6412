//! nvCOMP, NVIDIA's GPU (de)compression library, loaded at run time.
//!
//! zarrbuf never bundles nvCOMP and never needs it to build: it opens `libnvcomp.so.6` the
//! first time a read asks for GPU decompression, declares the few batched C functions it
//! calls (from the headers of the `nvidia-libnvcomp-cu13` wheel, nvCOMP 6), and reads on
//! without it — decoding on the CPU — when it is absent. Writes may compress with it too.
//! Before resolving any function it asks the library its version and takes only nvCOMP 6:
//! other major versions export the same names with other parameters, so a call through
//! these declarations would be undefined behaviour. Where it looks, in order:
//! `ZARRBUF_NVCOMP` (a path to the library), the dynamic loader's own search
//! (`LD_LIBRARY_PATH`, the system), then the `nvidia/libnvcomp/lib64` folder of the
//! pip wheel under the active Python environment (`VIRTUAL_ENV`, `CONDA_PREFIX`), the
//! user's site-packages and the system's.

use crate::error::{Error, Result};
use cudarc::driver::sys::CUstream;
use std::ffi::{CStr, c_char, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The decompression options of nvCOMP 6's batched API: every format's struct (zstd,
/// DEFLATE, LZ4) is 64 bytes that start with `nvcompDecompressBackend_t backend`; the rest
/// zero is the defaults (no sorting, no bitshuffle).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DecompressOpts {
    words: [u32; 16],
}

/// `NVCOMP_DECOMPRESS_BACKEND_CUDA` (nvcomp/shared_types.h).
const BACKEND_CUDA: u32 = 2;

/// The options of every decompression: the CUDA implementation, never the default backend.
/// On GPUs with a hardware decompression engine the default may pick that engine, on which
/// corrupt input is undefined behaviour and every chunk's status reads as success (the LZ4
/// and DEFLATE headers say so); zarrbuf decodes stored data it can check only in part on
/// the CPU, and the CUDA implementation reports a chunk it cannot decompress in its status.
const DECOMPRESS_OPTS: DecompressOpts = {
    let mut words = [0; 16];
    words[0] = BACKEND_CUDA;
    DecompressOpts { words }
};

type GetTempSize = unsafe extern "C" fn(
    num_chunks: usize,
    max_uncompressed_chunk_bytes: usize,
    opts: DecompressOpts,
    temp_bytes: *mut usize,
    max_total_uncompressed_bytes: usize,
    stream: CUstream,
) -> i32;

type DecompressAsync = unsafe extern "C" fn(
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

type StatusString = unsafe extern "C" fn(status: i32) -> *const c_char;

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

type CompressGetTempSize = unsafe extern "C" fn(
    num_chunks: usize,
    max_uncompressed_chunk_bytes: usize,
    opts: CompressOpts,
    temp_bytes: *mut usize,
    max_total_uncompressed_bytes: usize,
    stream: CUstream,
) -> i32;

type CompressGetMaxOutputChunkSize = unsafe extern "C" fn(
    max_uncompressed_chunk_bytes: usize,
    opts: CompressOpts,
    max_compressed_chunk_bytes: *mut usize,
) -> i32;

type CompressAsync = unsafe extern "C" fn(
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
struct Properties {
    version: u32,
    cudart_version: u32,
    spare: [u32; 14],
}

type GetProperties = unsafe extern "C" fn(properties: *mut Properties) -> i32;

/// The nvCOMP major version whose headers every declaration here follows.
const SUPPORTED_MAJOR: u32 = 6;

/// Accepts `version` (`nvcompProperties_t::version`: major × 1000 + minor × 100 + patch)
/// when it is nvCOMP 6; `Err` says what was found and what to install.
fn check_version(version: u32, path: &str) -> std::result::Result<(), String> {
    if version / 1000 == SUPPORTED_MAJOR {
        return Ok(());
    }
    Err(format!(
        "{path} is nvCOMP {}.{}.{}; zarrbuf calls nvCOMP {SUPPORTED_MAJOR}'s functions, which \
         other versions declare with other parameters: install nvCOMP {SUPPORTED_MAJOR} \
         (`pip install nvidia-libnvcomp-cu13`, or -cu12) or point ZARRBUF_NVCOMP at its \
         libnvcomp.so.{SUPPORTED_MAJOR}",
        version / 1000,
        (version % 1000) / 100,
        version % 100
    ))
}

/// One compression format's batched compression functions (nvCOMP 6).
#[derive(Clone, Copy)]
pub(crate) struct CompressFormat {
    temp_size: CompressGetTempSize,
    max_output: CompressGetMaxOutputChunkSize,
    compress: CompressAsync,
}

/// The batched compressors of nvCOMP 6.
#[derive(Clone, Copy)]
pub(crate) struct Compressors {
    pub(crate) zstd: CompressFormat,
    pub(crate) deflate: CompressFormat,
    pub(crate) lz4: CompressFormat,
    pub(crate) gzip: CompressFormat,
}

/// One compression format's pair of batched functions.
#[derive(Clone, Copy)]
pub(crate) struct Format {
    temp_size: GetTempSize,
    decompress: DecompressAsync,
}

/// The loaded library and the functions zarrbuf calls.
pub(crate) struct Nvcomp {
    /// Keeps the functions below valid.
    _lib: libloading::Library,
    path: String,
    pub(crate) zstd: Format,
    pub(crate) deflate: Format,
    pub(crate) lz4: Format,
    /// The compressors, or why they cannot be used (a function missing from the library).
    compressors: std::result::Result<Compressors, String>,
    status_string: StatusString,
}

/// Where nvCOMP, the GPU decoder, was loaded from; or why it cannot be (a sentence saying
/// how to install it). Loads it on first use.
///
/// ```
/// match zarrbuf::cuda::nvcomp_library() {
///     Ok(path) => println!("GPU decode with {path}"),
///     Err(e) => println!("GPU decode unavailable: {e}"),
/// }
/// ```
pub fn nvcomp_library() -> Result<String> {
    nvcomp()
        .map(|lib| lib.path().to_string())
        .map_err(|why| Error::DeviceUnavailable(why.to_string()))
}

/// Where nvCOMP's batched compressors, the GPU compressor of writes
/// ([`crate::options::Compress::Gpu`]), were loaded from; or why they cannot be (nvCOMP 6 missing, or
/// its compression functions missing from it). Loads nvCOMP on first use.
///
/// ```
/// match zarrbuf::cuda::nvcomp_compression() {
///     Ok(path) => println!("GPU compression with {path}"),
///     Err(e) => println!("GPU compression unavailable: {e}"),
/// }
/// ```
pub fn nvcomp_compression() -> Result<String> {
    let lib = nvcomp().map_err(|why| Error::DeviceUnavailable(why.to_string()))?;
    lib.compressors()
        .map_err(|why| Error::DeviceUnavailable(why.to_string()))?;
    Ok(lib.path().to_string())
}

/// The library, loaded once per process; `Err` says why it is not there (one sentence).
pub(crate) fn nvcomp() -> std::result::Result<&'static Nvcomp, &'static str> {
    static LIB: OnceLock<std::result::Result<Nvcomp, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|s| s.as_str())
}

fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("ZARRBUF_NVCOMP") {
        out.push(PathBuf::from(p));
        return out;
    }
    for name in ["libnvcomp.so.6", "libnvcomp.so"] {
        out.push(PathBuf::from(name));
    }
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(PathBuf::from(home).join(".local"));
    }
    prefixes.push(PathBuf::from("/usr/local"));
    prefixes.push(PathBuf::from("/usr"));
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("python3") {
                continue;
            }
            for site in ["site-packages", "dist-packages"] {
                let lib = e.path().join(site).join("nvidia/libnvcomp/lib64");
                if lib.join("libnvcomp.so.6").is_file() {
                    out.push(lib.join("libnvcomp.so.6"));
                }
            }
        }
    }
    out
}

fn load() -> std::result::Result<Nvcomp, String> {
    #[cfg(miri)]
    {
        return Err("Miri cannot load native libraries".into());
    }
    #[cfg_attr(miri, allow(unreachable_code))]
    let mut tried = Vec::new();
    // Libraries that loaded but were refused (another nvCOMP version), with why.
    let mut refused = Vec::new();
    for path in candidates() {
        // SAFETY: loading nvCOMP runs its (C++) initialisers, which only set up its own
        // state; it is a shared library NVIDIA ships for exactly this use.
        let lib = match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => lib,
            Err(_) => {
                tried.push(path.display().to_string());
                continue;
            }
        };
        // A refused library (say an older nvCOMP on the loader's path) must not hide an
        // nvCOMP 6 further down the list.
        match resolve(lib, path.display().to_string()) {
            Ok(found) => return Ok(found),
            Err(why) => refused.push(why),
        }
    }
    if !refused.is_empty() {
        return Err(refused.join("; "));
    }
    Err(format!(
        "nvCOMP was not found (tried {}); install it with `pip install nvidia-libnvcomp-cu13` \
         (or -cu12) or point ZARRBUF_NVCOMP at libnvcomp.so.6",
        tried.join(", ")
    ))
}

fn resolve(lib: libloading::Library, path: String) -> std::result::Result<Nvcomp, String> {
    /// Copies a function pointer out of the library (valid while `lib` is loaded, which the
    /// returned `Nvcomp` guarantees by owning it).
    fn sym<T: Copy>(
        lib: &libloading::Library,
        name: &str,
        path: &str,
    ) -> std::result::Result<T, String> {
        // SAFETY: `T` is the exact C signature of `name` in nvCOMP 6's headers
        // (nvcomp/zstd.h, nvcomp/deflate.h, nvcomp/lz4.h, nvcomp.h), and only
        // `nvcompGetProperties` (one pointer to a struct it fills, in every nvCOMP that has
        // it) is called before the library says it is nvCOMP 6; the pointer is used only
        // while the library stays loaded.
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("{path} has no {name} ({e}); zarrbuf needs nvCOMP 6"))
    }
    // The version first: every other declaration holds for nvCOMP 6 only.
    let properties: GetProperties = sym(&lib, "nvcompGetProperties", &path)?;
    let mut p = Properties {
        version: 0,
        cudart_version: 0,
        spare: [0; 14],
    };
    // SAFETY: `nvcompGetProperties(nvcompProperties_t*)` writes the struct nvcomp.h
    // declares (two `uint32_t`), and `p` is a valid, larger out-parameter.
    let st = unsafe { properties(&mut p) };
    if st != 0 {
        return Err(format!(
            "{path}: nvcompGetProperties failed (status {st}); zarrbuf needs nvCOMP 6"
        ));
    }
    check_version(p.version, &path)?;
    let zstd = Format {
        temp_size: sym(&lib, "nvcompBatchedZstdDecompressGetTempSize", &path)?,
        decompress: sym(&lib, "nvcompBatchedZstdDecompressAsync", &path)?,
    };
    let deflate = Format {
        temp_size: sym(&lib, "nvcompBatchedDeflateDecompressGetTempSize", &path)?,
        decompress: sym(&lib, "nvcompBatchedDeflateDecompressAsync", &path)?,
    };
    let lz4 = Format {
        temp_size: sym(&lib, "nvcompBatchedLZ4DecompressGetTempSize", &path)?,
        decompress: sym(&lib, "nvcompBatchedLZ4DecompressAsync", &path)?,
    };
    let status_string = sym(&lib, "nvcompGetStatusString", &path)?;
    let compressors = resolve_compressors(&lib, &path);
    let mut found = Nvcomp {
        _lib: lib,
        path,
        zstd,
        deflate,
        lz4,
        compressors,
        status_string,
    };
    if let Ok(c) = found.compressors
        && let Err(why) = found.check_compressors(&c)
    {
        found.compressors = Err(why);
    }
    Ok(found)
}

/// The compressors of an nvCOMP 6 library (its version checked by [`resolve`]); `Err` (a
/// sentence) when one of their functions is missing.
fn resolve_compressors(
    lib: &libloading::Library,
    path: &str,
) -> std::result::Result<Compressors, String> {
    /// As `sym` in [`resolve`].
    fn sym<T: Copy>(lib: &libloading::Library, name: &str, path: &str) -> Result<T, String> {
        // SAFETY: `T` is the exact C signature of `name` in nvCOMP 6's headers
        // (nvcomp/zstd.h, nvcomp/deflate.h, nvcomp/lz4.h, nvcomp/gzip.h), and `resolve`
        // checked that the library is nvCOMP 6 before calling this; the pointer is used only
        // while the library stays loaded.
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("{path} has no {name} ({e})"))
    }
    let format = |name: &str| -> std::result::Result<CompressFormat, String> {
        Ok(CompressFormat {
            temp_size: sym(
                lib,
                &format!("nvcompBatched{name}CompressGetTempSize"),
                path,
            )?,
            max_output: sym(
                lib,
                &format!("nvcompBatched{name}CompressGetMaxOutputChunkSize"),
                path,
            )?,
            compress: sym(lib, &format!("nvcompBatched{name}CompressAsync"), path)?,
        })
    };
    Ok(Compressors {
        zstd: format("Zstd")?,
        deflate: format("Deflate")?,
        lz4: format("LZ4")?,
        gzip: format("Gzip")?,
    })
}

impl Nvcomp {
    /// Asks each compressor, with every option set zarrbuf passes it, for the largest output
    /// of a 64 KiB chunk: a query that needs no GPU, answered through the same by-value
    /// options as the compression calls. An error, or an answer smaller than the chunk (no
    /// compressor's worst case is), means the library does not take these declarations as
    /// zarrbuf makes them, and GPU compression is left off, saying why.
    fn check_compressors(&self, c: &Compressors) -> std::result::Result<(), String> {
        const PROBE: usize = 64 << 10;
        let mut asks = vec![
            ("zstd", c.zstd, CompressOpts::DEFAULT),
            ("LZ4", c.lz4, CompressOpts::DEFAULT),
        ];
        for level in [1, 5, 9] {
            let opts = CompressOpts::deflate(super::compress::deflate_algorithm(level));
            asks.push(("DEFLATE", c.deflate, opts));
            asks.push(("gzip", c.gzip, opts));
        }
        for (name, format, opts) in asks {
            let answer = match self.max_compressed_bytes(format, PROBE, opts) {
                Ok(n) if n >= PROBE => continue,
                Ok(n) => format!("{n} bytes"),
                Err(e) => e.to_string(),
            };
            return Err(format!(
                "{}: nvCOMP's {name} compressor answered \"{answer}\" for the largest output \
                 of a {PROBE}-byte chunk; GPU compression is off",
                self.path
            ));
        }
        Ok(())
    }

    /// The batched compressors, or why this library has none zarrbuf can call.
    pub(crate) fn compressors(&self) -> std::result::Result<&Compressors, &str> {
        self.compressors.as_ref().map_err(|s| s.as_str())
    }

    /// Where the library was loaded from.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// nvCOMP's own words for a status code.
    pub(crate) fn describe(&self, status: i32) -> String {
        // SAFETY: nvcompGetStatusString returns a static C string (or null) for any value.
        let p = unsafe { (self.status_string)(status) };
        if p.is_null() {
            return format!("nvCOMP status {status}");
        }
        // SAFETY: non-null, NUL-terminated and static, per nvCOMP's documentation.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
        format!("{s} (nvCOMP status {status})")
    }

    /// Bytes of device scratch `format` needs for a batch.
    pub(crate) fn temp_bytes(
        &self,
        format: Format,
        chunks: usize,
        max_chunk: usize,
        total: usize,
        stream: CUstream,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer; the stream is live.
        let st = unsafe {
            (format.temp_size)(
                chunks,
                max_chunk,
                DECOMPRESS_OPTS,
                &mut bytes,
                total,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*DecompressGetTempSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Enqueues one batched decompression on `stream`.
    ///
    /// # Safety
    /// Every pointer is a device address (or a device array of `n` device addresses and
    /// sizes, as nvCOMP documents) that stays valid until the stream has passed this call;
    /// the input chunks are in `format`, their framing validated on the CPU (the CUDA
    /// backend, which [`DECOMPRESS_OPTS`] selects, reports a chunk it cannot decompress in
    /// its status; nvCOMP's documentation gives no such promise for malformed framing); each
    /// output buffer holds the size given for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn decompress(
        &self,
        format: Format,
        in_ptrs: u64,
        in_bytes: u64,
        out_capacity: u64,
        out_actual: u64,
        n: usize,
        temp: u64,
        temp_bytes: usize,
        out_ptrs: u64,
        statuses: u64,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let st = unsafe {
            (format.decompress)(
                in_ptrs as *const *const c_void,
                in_bytes as *const usize,
                out_capacity as *const usize,
                out_actual as *mut usize,
                n,
                temp as *mut c_void,
                temp_bytes,
                out_ptrs as *const *mut c_void,
                DECOMPRESS_OPTS,
                statuses as *mut i32,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*DecompressAsync",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(())
    }
}

impl Nvcomp {
    /// The size of the output buffer each chunk of up to `max_chunk` bytes needs.
    pub(crate) fn max_compressed_bytes(
        &self,
        format: CompressFormat,
        max_chunk: usize,
        opts: CompressOpts,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer.
        let st = unsafe { (format.max_output)(max_chunk, opts, &mut bytes) };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressGetMaxOutputChunkSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Bytes of device scratch a compression batch needs.
    pub(crate) fn compress_temp_bytes(
        &self,
        format: CompressFormat,
        chunks: usize,
        max_chunk: usize,
        total: usize,
        opts: CompressOpts,
        stream: CUstream,
    ) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: plain values and a valid out-pointer; the stream is live.
        let st = unsafe { (format.temp_size)(chunks, max_chunk, opts, &mut bytes, total, stream) };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressGetTempSize",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(bytes)
    }

    /// Enqueues one batched compression on `stream`.
    ///
    /// # Safety
    /// `in_ptrs`, `in_bytes`, `out_ptrs`, `out_bytes` and `statuses` are device arrays of
    /// `n` entries (device addresses of the chunks, their sizes, device addresses of the
    /// output buffers, room for the compressed sizes and statuses); every chunk is at most
    /// `max_chunk` bytes and aligned as nvCOMP requires (allocations' starts are); every
    /// output buffer holds [`Self::max_compressed_bytes`] for `max_chunk`; `temp` holds
    /// `temp_bytes` ([`Self::compress_temp_bytes`]); all stay valid until the stream has
    /// passed this call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn compress(
        &self,
        format: CompressFormat,
        in_ptrs: u64,
        in_bytes: u64,
        max_chunk: usize,
        n: usize,
        temp: u64,
        temp_bytes: usize,
        out_ptrs: u64,
        out_bytes: u64,
        opts: CompressOpts,
        statuses: u64,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let st = unsafe {
            (format.compress)(
                in_ptrs as *const *const c_void,
                in_bytes as *const usize,
                max_chunk,
                n,
                temp as *mut c_void,
                temp_bytes,
                out_ptrs as *const *mut c_void,
                out_bytes as *mut usize,
                opts,
                statuses as *mut i32,
                stream,
            )
        };
        if st != 0 {
            return Err(Error::Cuda {
                call: "nvcompBatched*CompressAsync",
                message: self.describe(st),
                source: None,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrbuf_test_support::{Need, skip};

    /// The library `ZARRBUF_NVCOMP` names (CI sets it: `scripts/fetch-nvcomp.sh`); `None`
    /// after a visible `SKIPPED:` line when it is not set, a failure when
    /// `ZARRBUF_REQUIRE_NVCOMP=1` (the integration tests' skip helper).
    fn real_library(what: &str) -> Option<&'static Nvcomp> {
        if std::env::var_os("ZARRBUF_NVCOMP").is_some() {
            return Some(nvcomp().unwrap_or_else(|e| panic!("{what}: {e}")));
        }
        skip(Need::Nvcomp, what, "ZARRBUF_NVCOMP is not set");
        None
    }

    /// The real library takes the options every decompression passes (the CUDA backend in
    /// their first word) in its temp-size query, which needs no GPU (null stream), and
    /// refuses a backend that does not exist: the word is read as the backend.
    #[test]
    fn the_real_library_takes_the_cuda_backend() {
        let Some(lib) = real_library("nvCOMP's decompression options") else {
            return;
        };
        let stream = std::ptr::null_mut();
        for (name, format) in [
            ("zstd", lib.zstd),
            ("DEFLATE", lib.deflate),
            ("LZ4", lib.lz4),
        ] {
            lib.temp_bytes(format, 64, 1 << 20, 64 << 20, stream)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut no_such_backend = DECOMPRESS_OPTS;
            no_such_backend.words[0] = 7;
            let mut bytes = 0usize;
            // SAFETY: the query's exact signature (nvCOMP 6, checked at load), plain values
            // and a valid out-pointer; the null stream is CUDA's default one.
            let st = unsafe {
                (format.temp_size)(64, 1 << 20, no_such_backend, &mut bytes, 64 << 20, stream)
            };
            assert_ne!(st, 0, "{name} took backend 7");
        }
    }

    #[test]
    fn only_nvcomp_6_is_taken() {
        for version in [6000, 6012, 6999] {
            assert!(check_version(version, "lib").is_ok(), "{version}");
        }
        for (version, shown) in [
            (5001, "5.0.1"),
            (4200, "4.2.0"),
            (2603, "2.6.3"),
            (7000, "7.0.0"),
            (0, "0.0.0"),
        ] {
            let why = check_version(version, "/x/libnvcomp.so").unwrap_err();
            assert!(
                why.contains(&format!("/x/libnvcomp.so is nvCOMP {shown}")),
                "{why}"
            );
            assert!(why.contains("pip install nvidia-libnvcomp-cu13"), "{why}");
        }
    }
}
