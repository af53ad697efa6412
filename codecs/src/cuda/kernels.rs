//! Run-time compilation of the CUDA kernels and the per-context cache.

use super::available::{driver_present, nvrtc_present};
use crate::error::{CodecError, Result};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The CUDA C++ program: shared definitions first, then one file per operation.
const SOURCE_FILES: [&str; 7] = [
    include_str!("../../kernels/common.cuh"),
    include_str!("../../kernels/copy.cu"),
    include_str!("../../kernels/copy_batch.cu"),
    include_str!("../../kernels/fill.cu"),
    include_str!("../../kernels/cast.cu"),
    include_str!("../../kernels/unshuffle.cu"),
    include_str!("../../kernels/adler32.cu"),
];

/// Word sizes of the typed copy and fill kernels, in the order of their function arrays.
pub(crate) const WORDS: [usize; 5] = [1, 2, 4, 8, 16];

/// Threads per block of every launch (the transpose kernels use 32 x 8).
pub(crate) const BLOCK: u32 = 256;

/// Side of the transpose kernels' shared-memory tile (`ZB_TILE` in copy.cu).
pub(crate) const TILE: usize = 32;

/// The kernels of this crate, compiled (NVRTC) and loaded for one CUDA context.
///
/// Get one with [`CudaKernels::for_context`]; it is cached per context for the life of the
/// process (the cache keeps the context alive), so calling `for_context` per operation is
/// cheap. The operations ([`strided_copy`](Self::strided_copy),
/// [`strided_copy_batch`](Self::strided_copy_batch), [`fill`](Self::fill),
/// [`cast`](Self::cast), [`byte_swap`](Self::byte_swap), [`permute`](Self::permute),
/// [`blosc_unshuffle`](Self::blosc_unshuffle)) take
/// device pointers and enqueue work on a stream of the same context.
///
/// ```no_run
/// use cudarc::driver::CudaContext;
/// use zarrbuf_codecs::cuda::CudaKernels;
/// let ctx = CudaContext::new(0)?;
/// let kernels = CudaKernels::for_context(&ctx)?;
/// println!("{}", kernels.arch());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CudaKernels {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) copy: [CudaFunction; 5],
    pub(crate) copy_bytes: CudaFunction,
    pub(crate) copy_batch: CudaFunction,
    pub(crate) transpose: [CudaFunction; 5],
    pub(crate) fill: [CudaFunction; 5],
    pub(crate) fill_bytes: CudaFunction,
    pub(crate) cast: CudaFunction,
    pub(crate) blosc_unshuffle: CudaFunction,
    pub(crate) adler32_pieces: CudaFunction,
    pub(crate) max_blocks: u32,
    arch: String,
}

type Cache = Mutex<HashMap<usize, Arc<CudaKernels>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn driver_err(call: &str) -> impl FnOnce(cudarc::driver::DriverError) -> CodecError + '_ {
    move |e| CodecError::Cuda(format!("{call} failed: {e}"))
}

impl CudaKernels {
    /// Returns the kernels for `ctx`, compiling them with NVRTC and loading the module the
    /// first time this context is seen (tens to hundreds of milliseconds), from the cache
    /// afterwards.
    ///
    /// Errors with [`CodecError::Cuda`] when the CUDA driver or NVRTC library cannot be
    /// loaded, compilation fails (the message carries NVRTC's log), or the driver rejects the
    /// module. PTX is generated for the device's own architecture (`compute_XY`); should this
    /// NVRTC not know that architecture, NVRTC's default is used instead.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0)?;
    /// let a = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// let b = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// assert!(std::sync::Arc::ptr_eq(&a, &b));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_context(ctx: &Arc<CudaContext>) -> Result<Arc<CudaKernels>> {
        if !driver_present() {
            return Err(CodecError::Cuda(
                "CUDA driver library (libcuda.so) not found: install the NVIDIA driver or put \
                 libcuda on the library path"
                    .into(),
            ));
        }
        if !nvrtc_present() {
            return Err(CodecError::Cuda(
                "NVRTC library (libnvrtc.so) not found: install CUDA's NVRTC runtime (e.g. the \
                 cuda-nvrtc package, or pip nvidia-cuda-nvrtc) and put it on LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let key = ctx.cu_ctx() as usize;
        let mut map = cache()
            .lock()
            .map_err(|_| CodecError::Cuda("kernel cache lock poisoned".into()))?;
        if let Some(k) = map.get(&key) {
            return Ok(k.clone());
        }
        let k = Arc::new(Self::build(ctx)?);
        map.insert(key, k.clone());
        Ok(k)
    }

    /// The architecture the PTX was generated for (`compute_XY`), or `default` when NVRTC's
    /// default was used.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0)?;
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// assert!(k.arch().starts_with("compute_") || k.arch() == "default");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The context these kernels belong to.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0)?;
    /// let k = zarrbuf_codecs::cuda::CudaKernels::for_context(&ctx)?;
    /// assert_eq!(k.context().ordinal(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    fn build(ctx: &Arc<CudaContext>) -> Result<CudaKernels> {
        let source = SOURCE_FILES.join("\n");
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_err("cuDeviceGetAttribute(compute capability)"))?;
        let arch = format!("compute_{major}{minor}");
        let (ptx, arch) = match compile(&source, Some(&arch)) {
            Ok(ptx) => (ptx, arch),
            Err(first) => match compile(&source, None) {
                Ok(ptx) => (ptx, "default".to_string()),
                Err(_) => return Err(first),
            },
        };
        let module = ctx.load_module(ptx).map_err(|e| {
            CodecError::Cuda(format!(
                "cuModuleLoadData failed: {e} (is NVRTC newer than the driver? PTX for {arch})"
            ))
        })?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| CodecError::Cuda(format!("cuModuleGetFunction({name}) failed: {e}")))
        };
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(driver_err("cuDeviceGetAttribute(multiprocessor count)"))?;
        Ok(CudaKernels {
            ctx: ctx.clone(),
            copy: [
                f("zb_copy_w1")?,
                f("zb_copy_w2")?,
                f("zb_copy_w4")?,
                f("zb_copy_w8")?,
                f("zb_copy_w16")?,
            ],
            copy_bytes: f("zb_copy_bytes")?,
            copy_batch: f("zb_copy_batch")?,
            transpose: [
                f("zb_transpose_w1")?,
                f("zb_transpose_w2")?,
                f("zb_transpose_w4")?,
                f("zb_transpose_w8")?,
                f("zb_transpose_w16")?,
            ],
            fill: [
                f("zb_fill_w1")?,
                f("zb_fill_w2")?,
                f("zb_fill_w4")?,
                f("zb_fill_w8")?,
                f("zb_fill_w16")?,
            ],
            fill_bytes: f("zb_fill_bytes")?,
            cast: f("zb_cast")?,
            blosc_unshuffle: f("zb_blosc_unshuffle")?,
            adler32_pieces: f("zb_adler32_pieces")?,
            max_blocks: (sms.max(1) as u32).saturating_mul(32),
            arch,
        })
    }

    /// Checks that `stream` belongs to this context.
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.ctx.cu_ctx() {
            return Err(CodecError::Cuda(format!(
                "the stream belongs to CUDA context of device {}, these kernels to device {}",
                stream.context().ordinal(),
                self.ctx.ordinal()
            )));
        }
        Ok(())
    }
}

/// Compiles every kernel with NVRTC for `arch` (for example `compute_90`) without a GPU or
/// a CUDA context, and returns the PTX: the check that the kernel sources build,
/// for machines that have NVRTC but no GPU (CI installs NVRTC from its pip wheel for this).
///
/// Errors with [`CodecError::Cuda`] when NVRTC cannot be loaded or compilation fails (the
/// message carries NVRTC's log).
///
/// ```no_run
/// let ptx = zarrbuf_codecs::cuda::compile_kernels("compute_90")?;
/// assert!(ptx.contains(".entry zb_blosc_unshuffle"));
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn compile_kernels(arch: &str) -> Result<String> {
    if !nvrtc_present() {
        return Err(CodecError::Cuda(
            "NVRTC library (libnvrtc.so) not found: install CUDA's NVRTC runtime (e.g. pip \
             nvidia-cuda-nvrtc) and put it on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let ptx = compile(&SOURCE_FILES.join("\n"), Some(arch))?;
    Ok(ptx.to_src())
}

/// Compiles the program for `arch` (or NVRTC's default).
fn compile(source: &str, arch: Option<&str>) -> Result<cudarc::nvrtc::Ptx> {
    let opts = CompileOptions {
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        fmad: Some(false),
        options: arch
            .map(|a| vec![format!("--gpu-architecture={a}")])
            .unwrap_or_default(),
        name: Some("zarrbuf_codecs.cu".into()),
        ..Default::default()
    };
    compile_ptx_with_opts(source, opts).map_err(|e| {
        let what = match &e {
            CompileError::CompileError { log, options, .. } => {
                format!("options {options:?}:\n{}", log.to_string_lossy())
            }
            other => format!("{other:?}"),
        };
        CodecError::Cuda(format!(
            "NVRTC compilation of the codec kernels failed, {what}"
        ))
    })
}
