//! The command line: what to run, where the repository is, the benchmark's size and
//! repetitions, and the hidden flags of the CUDA IPC check's child process.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// Verifies zarrbuf on a real GPU (kernels, conformance cases, fixtures, writes from the
/// device) and measures it.
#[derive(Parser, Debug, PartialEq, Eq)]
#[command(name = "zarrbuf-gpucheck")]
pub(crate) struct Args {
    /// What to run.
    #[arg(value_enum, default_value_t = What::All)]
    pub(crate) what: What,
    /// The repository root (fixtures/ is read from there).
    #[arg(long, default_value = ".")]
    pub(crate) root: PathBuf,
    /// Decoded size of the benchmark array in bytes.
    #[arg(long, default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) bench_bytes: u64,
    /// Timed repetitions per benchmark figure (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) reps: u64,
    /// The benchmark's quick pass: zstd 1 at 64³ chunks and the GPU layout only.
    #[arg(long)]
    pub(crate) quick: bool,
    /// The benchmark measures the layout sweep instead of its summary lines: zstd 1 arrays
    /// whose inner chunks compress to about 32, 64, 128, 256 and 512 KiB, each's
    /// device-resident decompression rate and end-to-end read rate (`gpu-sweep:` lines).
    #[arg(long)]
    pub(crate) sweep_layout: bool,
    /// Where the "device" reads go: cuda (a GPU, the real run) or host (a dry run of the
    /// same sequence on the device trait's host twin, no GPU; refused under
    /// ZARRBUF_REQUIRE_GPU=1).
    #[arg(long, value_enum, default_value_t = Target::Cuda)]
    pub(crate) device: Target,
    /// Internal: run as the importing child of the CUDA IPC check, with this descriptor (hex).
    #[arg(long, hide = true, value_name = "HEX")]
    pub(crate) ipc_child: Option<String>,
    /// Internal: what the IPC child checks and does.
    #[arg(long, hide = true, value_enum, default_value_t = IpcMode::Write, requires = "ipc_child")]
    pub(crate) ipc_child_mode: IpcMode,
}

/// Where a run's device reads and writes go.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// CUDA device 0 (and pinned memory): the run on a GPU machine.
    Cuda,
    /// The host twin of the device (host memory, the staged pipeline, the CPU codecs behind
    /// the batch decoder and compressor): a dry run without a GPU.
    Host,
}

/// What the importing child of the CUDA IPC check does.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpcMode {
    /// Checks the exporter's pattern in the view and writes `child_byte` into part of it.
    Write,
    /// Imports twice, drops one import early, checks the exporter's fill, imports again
    /// after both are closed, and checks that its CUDA context still works.
    Reopen,
}

/// The parts of a run, each a subcommand.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// Everything below, in order.
    All,
    /// CUDA kernels against their host twins.
    Kernels,
    /// The conformance and soundness cases on cpu, pinned:0 and cuda:0.
    Conformance,
    /// CUDA IPC: a second process imports an exported buffer, reads and writes it.
    Ipc,
    /// Every fixture through pinned and CUDA memory, and written back from the device.
    Fixtures,
    /// Writes compressed on the GPU (nvCOMP), read back exactly on the CPU.
    Compress,
    /// The read benchmark and the pinned H2D/D2H bandwidth.
    Bench,
}

impl What {
    /// Whether running `self` runs `part`.
    pub(crate) fn includes(self, part: What) -> bool {
        self == What::All || self == part
    }
}

/// Parses the command line (`args` includes the program name); unknown subcommands and
/// flags and bad values are errors.
pub(crate) fn parse_args<I, T>(args: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Args::try_parse_from(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    #[test]
    fn scripts_gpu_test_command_line_parses() {
        let a = parse_args([
            "zarrbuf-gpucheck",
            "all",
            "--root",
            ".",
            "--bench-bytes",
            "1073741824",
            "--reps",
            "5",
        ])
        .unwrap();
        assert_eq!(
            a,
            Args {
                what: What::All,
                root: ".".into(),
                bench_bytes: 1 << 30,
                reps: 5,
                quick: false,
                sweep_layout: false,
                device: Target::Cuda,
                ipc_child: None,
                ipc_child_mode: IpcMode::Write,
            }
        );
    }

    #[test]
    fn defaults_and_every_subcommand() {
        let a = parse_args(["zarrbuf-gpucheck"]).unwrap();
        assert_eq!((a.what, a.bench_bytes, a.reps), (What::All, 1 << 30, 5));
        assert_eq!(a.root, PathBuf::from("."));
        for (word, what) in [
            ("all", What::All),
            ("kernels", What::Kernels),
            ("conformance", What::Conformance),
            ("ipc", What::Ipc),
            ("fixtures", What::Fixtures),
            ("compress", What::Compress),
            ("bench", What::Bench),
        ] {
            let a = parse_args(["zarrbuf-gpucheck", word, "--reps", "2"]).unwrap();
            assert_eq!((a.what, a.reps), (what, 2));
        }
        let a = parse_args(["zarrbuf-gpucheck", "bench", "--quick", "--device", "host"]).unwrap();
        assert_eq!(
            (a.what, a.quick, a.device),
            (What::Bench, true, Target::Host)
        );
        assert_eq!(
            parse_args(["zarrbuf-gpucheck", "--device", "tpu"])
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidValue
        );
        let a = parse_args(["zarrbuf-gpucheck", "bench", "--sweep-layout"]).unwrap();
        assert_eq!(
            (a.what, a.sweep_layout, a.quick),
            (What::Bench, true, false)
        );
        assert!(
            !parse_args(["zarrbuf-gpucheck", "bench"])
                .unwrap()
                .sweep_layout
        );
        // Flags before the subcommand, as well.
        let a = parse_args(["zarrbuf-gpucheck", "--root", "/r", "bench"]).unwrap();
        assert_eq!((a.what, a.root), (What::Bench, PathBuf::from("/r")));
    }

    #[test]
    fn mistyped_subcommands_flags_and_values_are_rejected() {
        let kind = |args: &[&str]| {
            let mut all = vec!["zarrbuf-gpucheck"];
            all.extend_from_slice(args);
            parse_args(all)
                .expect_err(&format!("{args:?} must be rejected"))
                .kind()
        };
        assert_eq!(kind(&["bogus"]), ErrorKind::InvalidValue);
        assert_eq!(kind(&["al"]), ErrorKind::InvalidValue);
        assert_eq!(kind(&["all", "extra"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["all", "--bogus"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["all", "--rep", "5"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["all", "--reps", "x"]), ErrorKind::ValueValidation);
        assert_eq!(kind(&["all", "--reps", "0"]), ErrorKind::ValueValidation);
        assert_eq!(
            kind(&["all", "--bench-bytes", "-1"]),
            ErrorKind::UnknownArgument
        );
        assert_eq!(kind(&["all", "--root"]), ErrorKind::InvalidValue);
        // clap exits with status 2 for all of these.
        assert_eq!(
            parse_args(["zarrbuf-gpucheck", "bogus"])
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn the_hidden_ipc_child_flags_parse_and_stay_hidden() {
        let a = parse_args(["zarrbuf-gpucheck", "--ipc-child", "abcd"]).unwrap();
        assert_eq!(
            (a.ipc_child.as_deref(), a.ipc_child_mode),
            (Some("abcd"), IpcMode::Write)
        );
        let a = parse_args([
            "zarrbuf-gpucheck",
            "--ipc-child",
            "abcd",
            "--ipc-child-mode",
            "reopen",
        ])
        .unwrap();
        assert_eq!(a.ipc_child_mode, IpcMode::Reopen);
        // The mode needs the descriptor; bad modes are rejected.
        assert_eq!(
            parse_args(["zarrbuf-gpucheck", "--ipc-child-mode", "write"])
                .unwrap_err()
                .kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            parse_args([
                "zarrbuf-gpucheck",
                "--ipc-child",
                "ab",
                "--ipc-child-mode",
                "x"
            ])
            .unwrap_err()
            .kind(),
            ErrorKind::InvalidValue
        );
        let help = parse_args(["zarrbuf-gpucheck", "--help"])
            .unwrap_err()
            .to_string();
        assert!(
            help.contains("--reps") && !help.contains("ipc-child"),
            "{help}"
        );
    }
}
