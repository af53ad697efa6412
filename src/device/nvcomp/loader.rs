//! Finding and loading nvCOMP: where to look, the version check, resolving every function
//! zarrbuf declares, and asking the compressors the query that needs no GPU.

use super::bindings::*;
use crate::errors::{Error, Result};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The nvCOMP major version whose headers every declaration here follows.
pub(super) const SUPPORTED_MAJOR: u32 = 6;

/// Accepts `version` (`nvcompProperties_t::version`: major × 1000 + minor × 100 + patch)
/// when it is nvCOMP 6; `Err` says what was found and what to install.
pub(super) fn check_version(version: u32, path: &str) -> std::result::Result<(), String> {
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
    pub(super) temp_size: CompressGetTempSize,
    pub(super) max_output: CompressGetMaxOutputChunkSize,
    pub(super) compress: CompressAsync,
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
    pub(super) temp_size: GetTempSize,
    pub(super) decompress: DecompressAsync,
}

/// The loaded library and the functions zarrbuf calls.
pub(crate) struct Nvcomp {
    /// Keeps the functions below valid.
    _lib: libloading::Library,
    pub(super) path: String,
    pub(crate) zstd: Format,
    pub(crate) deflate: Format,
    pub(crate) lz4: Format,
    /// The compressors, or why they cannot be used (a function missing from the library).
    pub(super) compressors: std::result::Result<Compressors, String>,
    pub(super) status_string: StatusString,
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

pub(super) fn candidates() -> Vec<PathBuf> {
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

pub(super) fn load() -> std::result::Result<Nvcomp, String> {
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

pub(super) fn resolve(
    lib: libloading::Library,
    path: String,
) -> std::result::Result<Nvcomp, String> {
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
pub(super) fn resolve_compressors(
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
            let opts = CompressOpts::deflate(crate::device::compress::deflate_algorithm(level));
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
}
