//! Where a run's device reads and writes go: CUDA device 0 and pinned memory on a GPU
//! machine, or the device trait's host twin for a dry run (`--device host`), which runs the
//! same sequence of checks and prints the same lines without a GPU: host memory for both,
//! the staged pipeline forced so that reads and writes pass through the batch decoder and
//! compressor (the CPU codecs behind nvCOMP's request arrays) and the device's scatter
//! steps. Parts only a GPU can run (its kernels, CUDA IPC) say so in their row instead.

use crate::args::Target;
use zarrbuf::multi::MultiPrototype;
use zarrbuf::{
    BufferPrototype,
    options::{PipelineMode, ReadOptions, WriteOptions},
};

impl Target {
    /// Whether this is the dry run on the host twin.
    pub(crate) fn is_host(self) -> bool {
        self == Target::Host
    }

    /// Where "device" outputs go: `cuda:0`, or host memory.
    pub(crate) fn device(self) -> BufferPrototype {
        match self {
            Target::Cuda => BufferPrototype::cuda(0),
            Target::Host => BufferPrototype::cpu(),
        }
    }

    /// Where "pinned" outputs go: `pinned:0`, or host memory.
    pub(crate) fn pinned(self) -> BufferPrototype {
        match self {
            Target::Cuda => BufferPrototype::pinned(0),
            Target::Host => BufferPrototype::cpu(),
        }
    }

    /// The name of [`Self::device`] in messages and tables.
    pub(crate) fn device_name(self) -> &'static str {
        match self {
            Target::Cuda => "cuda",
            Target::Host => "host twin",
        }
    }

    /// Read options that take the device's route: the defaults on CUDA; on the host, the
    /// staged pipeline (host outputs would otherwise be decoded by zarrs).
    pub(crate) fn read_options(self) -> ReadOptions {
        match self {
            Target::Cuda => ReadOptions::default(),
            Target::Host => ReadOptions::default().with_mode(PipelineMode::Staged),
        }
    }

    /// Write options that take the device's route (as [`Self::read_options`]).
    pub(crate) fn write_options(self) -> WriteOptions {
        match self {
            Target::Cuda => WriteOptions::default(),
            Target::Host => WriteOptions::default().with_mode(PipelineMode::Staged),
        }
    }

    /// The multi-device prototypes of the multi-device check: one GPU twice and pinned +
    /// GPU, or two and three host parts.
    pub(crate) fn multis(self) -> Result<[(&'static str, MultiPrototype); 2], String> {
        let e = |x: zarrbuf::Error| x.to_string();
        Ok(match self {
            Target::Cuda => [
                (
                    "cuda:0 x 2",
                    BufferPrototype::cuda_devices(&[0, 0]).map_err(e)?,
                ),
                (
                    "pinned:0 + cuda:0",
                    MultiPrototype::new(vec![BufferPrototype::pinned(0), BufferPrototype::cuda(0)])
                        .map_err(e)?,
                ),
            ],
            Target::Host => [
                ("host x 2", MultiPrototype::host(2).map_err(e)?),
                ("host x 3", MultiPrototype::host(3).map_err(e)?),
            ],
        })
    }
}
