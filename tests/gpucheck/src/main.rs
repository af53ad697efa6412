//! zarrbuf-gpucheck: verifies zarrbuf on a real GPU in one run, and measures it.
//!
//! `zarrbuf-gpucheck [all|kernels|conformance|ipc|fixtures|compress|bench] [--root DIR] [--bench-bytes N]
//! [--reps N]` runs (`all`, the default, in this order): the CUDA kernels against their host
//! twins; the conformance cases on cpu, pinned and CUDA memory; CUDA IPC across two
//! processes (the binary runs itself as the importing child, with the hidden
//! `--ipc-child HEX --ipc-child-mode MODE` flags); every fixture read into
//! pinned and CUDA memory (whole, subsets, staged) and written back from CUDA memory; writes
//! from CUDA memory compressed on the GPU with nvCOMP (zstd, lz4, gzip, zlib, each alone and
//! with crc32c) read back exactly through the CPU decoders and the GPU decoder; the
//! read benchmark (zarrs vs zarrbuf on the CPU vs zarrbuf into the GPU) and the pinned
//! H2D/D2H bandwidth. It exits non-zero on the first failure, on an unknown subcommand or
//! flag, or on a bad value, and prints a table at the end. Built and run by `scripts/gpu-test`.
//! The argument parser's unit tests run with `cargo test -p zarrbuf-gpucheck`; so does
//! `tests/cli.rs`, which runs the binary with mistyped arguments.

use clap::{Parser, ValueEnum};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zarrbuf::ipc::IpcDescriptor;
use zarrbuf::multi::{MultiPrototype, Placement};
use zarrbuf::options::{Compress, Decode};
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, Buffer, BufferPrototype, Device, Error, NDBuffer, PipelineMode,
    ReadOptions, WriteOptions,
};
use zarrbuf_test_cases::conformance as cases;
use zarrbuf_test_cases::{soundness, variants};

type Check = Result<(), String>;

/// Verifies zarrbuf on a real GPU (kernels, conformance cases, fixtures, writes from the
/// device) and measures it.
#[derive(Parser, Debug, PartialEq, Eq)]
#[command(name = "zarrbuf-gpucheck")]
struct Args {
    /// What to run.
    #[arg(value_enum, default_value_t = What::All)]
    what: What,
    /// The repository root (fixtures/ is read from there).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Decoded size of the benchmark array in bytes.
    #[arg(long, default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(1..))]
    bench_bytes: u64,
    /// Timed repetitions per benchmark figure (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    reps: u64,
    /// Internal: run as the importing child of the CUDA IPC check, with this descriptor (hex).
    #[arg(long, hide = true, value_name = "HEX")]
    ipc_child: Option<String>,
    /// Internal: what the IPC child checks and does.
    #[arg(long, hide = true, value_enum, default_value_t = IpcMode::Write, requires = "ipc_child")]
    ipc_child_mode: IpcMode,
}

/// What the importing child of the CUDA IPC check does.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum IpcMode {
    /// Checks the exporter's pattern in the view and writes `child_byte` into part of it.
    Write,
    /// Imports twice, drops one import early, checks the exporter's fill, imports again
    /// after both are closed, and checks that its CUDA context still works.
    Reopen,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum What {
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
    fn includes(self, part: What) -> bool {
        self == What::All || self == part
    }
}

/// Parses the command line (`args` includes the program name); unknown subcommands and
/// flags and bad values are errors.
fn parse_args<I, T>(args: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Args::try_parse_from(args)
}

fn main() {
    let args = parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if let Some(hex) = &args.ipc_child {
        match ipc_child(hex, args.ipc_child_mode) {
            Ok(()) => {
                println!("ipc child: ok");
                std::process::exit(0)
            }
            Err(e) => {
                println!("ipc child: FAILED: {e}");
                std::process::exit(1)
            }
        }
    }
    let mut run = Run {
        root: args.root,
        bench_bytes: args.bench_bytes,
        reps: args.reps as usize,
        table: Vec::new(),
    };
    let result = run_checks(args.what, &mut run);
    println!("\n| check | result |\n|---|---|");
    for (k, v) in &run.table {
        println!("| {k} | {v} |");
    }
    if let Err(e) = result {
        println!("| FAILED | {e} |");
        std::process::exit(1);
    }
}

/// What the checks share: their settings, and the result table each adds its rows to.
struct Run {
    /// The repository root (fixtures/ is read from there).
    root: PathBuf,
    bench_bytes: u64,
    reps: usize,
    /// (check, result) rows, printed at the end.
    table: Vec<(String, String)>,
}

/// One check of the table: the part of the run it belongs to, and what it does.
struct NamedCheck {
    part: What,
    run: fn(&mut Run) -> Check,
}

/// Every check, in the order `all` runs them; a subcommand runs those of its part.
const CHECKS: &[NamedCheck] = &[
    NamedCheck {
        part: What::Kernels,
        run: check_kernels,
    },
    NamedCheck {
        part: What::Conformance,
        run: check_conformance,
    },
    NamedCheck {
        part: What::Conformance,
        run: check_soundness,
    },
    NamedCheck {
        part: What::Ipc,
        run: check_ipc,
    },
    NamedCheck {
        part: What::Fixtures,
        run: check_fixtures,
    },
    NamedCheck {
        part: What::Fixtures,
        run: check_multi_device,
    },
    NamedCheck {
        part: What::Fixtures,
        run: check_zarrs_decoded_chains,
    },
    NamedCheck {
        part: What::Compress,
        run: check_gpu_compress,
    },
    NamedCheck {
        part: What::Bench,
        run: check_bench,
    },
];

/// The devices and nvCOMP's library (always), then the checks of `what`, in table order;
/// stops at the first failure.
fn run_checks(what: What, run: &mut Run) -> Check {
    let count = zarrbuf::cuda::cuda_device_count().map_err(|e| e.to_string())?;
    run.table.push(("CUDA devices".into(), count.to_string()));
    run.table.push((
        "nvCOMP (GPU decode)".into(),
        zarrbuf::cuda::nvcomp_library().map_err(|e| e.to_string())?,
    ));
    for check in CHECKS {
        if what.includes(check.part) {
            (check.run)(run)?;
        }
    }
    Ok(())
}

/// The CUDA kernels against their host twins.
fn check_kernels(run: &mut Run) -> Check {
    let t = Instant::now();
    let report = kernels()?;
    run.table.push((
        "kernels vs host".into(),
        format!("ok ({:.1} s): {report}", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// The prototypes the conformance and soundness cases run on.
fn case_prototypes() -> [(&'static str, BufferPrototype); 3] {
    [
        ("cpu", BufferPrototype::cpu()),
        ("pinned:0", BufferPrototype::pinned(0)),
        ("cuda:0", BufferPrototype::cuda(0)),
    ]
}

/// Every conformance case on every prototype.
fn check_conformance(run: &mut Run) -> Check {
    let t = Instant::now();
    let protos = case_prototypes();
    let mut passed = 0;
    for (name, case) in cases::all() {
        for (pname, proto) in &protos {
            case(proto).map_err(|m| format!("conformance {name} on {pname}: {m}"))?;
            passed += 1;
        }
    }
    run.table.push((
        "conformance cases (cpu, pinned:0, cuda:0)".into(),
        format!(
            "ok: {passed} case runs, {} cases x 3 prototypes ({:.1} s)",
            cases::all().len(),
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// The soundness regressions (completion fences, stream order, cleared `empty`) on every
/// prototype.
fn check_soundness(run: &mut Run) -> Check {
    let t = Instant::now();
    let protos = case_prototypes();
    for (name, case) in soundness::all() {
        for (pname, proto) in &protos {
            case(proto).map_err(|m| format!("soundness {name} on {pname}: {m}"))?;
        }
    }
    run.table.push((
        "soundness cases (cpu, pinned:0, cuda:0)".into(),
        format!(
            "ok: {} cases x 3 prototypes ({:.1} s)",
            soundness::all().len(),
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// CUDA IPC across two processes.
fn check_ipc(run: &mut Run) -> Check {
    ipc(&mut run.table)
}

/// Every fixture read into pinned and CUDA memory and written back from the device.
fn check_fixtures(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = fixtures(&run.root)?;
    run.table.push((
        "fixtures read+write on pinned/cuda".into(),
        format!("ok: {n} fixtures ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Multi-device reads of every fixture.
fn check_multi_device(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = multi_device(&run.root)?;
    run.table.push((
        "multi-device reads (split + replicate) on cuda:0 twice and pinned:0+cuda:0".into(),
        format!("ok: {n} reads ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Chains zarrs decodes whole, read into device memory.
fn check_zarrs_decoded_chains(run: &mut Run) -> Check {
    zarrs_decoded_chains()?;
    run.table.push((
        "non-exclusively sharded array (zarrs-decoded chunks) on pinned/cuda".into(),
        "ok".into(),
    ));
    Ok(())
}

/// Writes compressed on the GPU, read back exactly.
fn check_gpu_compress(run: &mut Run) -> Check {
    gpu_compress(&mut run.table)
}

/// The read benchmark and the pinned bandwidth.
fn check_bench(run: &mut Run) -> Check {
    bench(run.bench_bytes, run.reps, &mut run.table)
}

/// The exporter's pattern: byte `i` of the allocation.
fn ipc_pattern(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

/// What the `write` child writes: byte `i` of the bytes it writes.
fn ipc_child_byte(i: usize) -> u8 {
    0xa5 ^ (i % 256) as u8
}

/// Where, in the exported view, the `write` child writes.
const IPC_CHILD_WRITE: Range<usize> = 4096..4096 + 65536;
/// The exporter's fill before the `reopen` child runs.
const IPC_FILL: u8 = 0x3c;

/// CUDA IPC across two processes (this binary runs itself as the importing child): export a
/// slice of a `cuMemAlloc` buffer, the child checks it and writes part of it, the exporter
/// sees the write; then a child that drops its imports early (and reopens) while the
/// exporter keeps using the memory. Also the refusals in one process: pool and pinned
/// memory, and importing one's own descriptor.
fn ipc(table: &mut Vec<(String, String)>) -> Check {
    const NAME: &str = "CUDA IPC across processes";
    if !Device::Cuda(0).is_available() {
        let why = match zarrbuf::cuda::cuda_device_count() {
            Err(e) => e.to_string(),
            Ok(n) => format!("no cuda:0 ({n} devices)"),
        };
        if std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
            return Err(format!(
                "{NAME}: {why}, but ZARRBUF_REQUIRE_GPU=1 requires it"
            ));
        }
        table.push((NAME.into(), format!("skipped: {why}")));
        return Ok(());
    }
    let t = Instant::now();
    let e = |x: Error| format!("{NAME}: {x}");
    // Refusals, in this process.
    let pooled = Buffer::zeros(4096, &BufferPrototype::cuda(0)).map_err(e)?;
    match pooled.ipc_descriptor() {
        Err(Error::Unsupported(m)) if m.contains("ipc_shareable") => {}
        other => return Err(format!("{NAME}: pool memory exported: {other:?}")),
    }
    let pinned = Buffer::zeros(4096, &BufferPrototype::pinned(0)).map_err(e)?;
    match pinned.ipc_descriptor() {
        Err(Error::Unsupported(_)) => {}
        other => return Err(format!("{NAME}: pinned memory exported: {other:?}")),
    }

    let n = 16 << 20;
    let mut b = Buffer::zeros(n, &BufferPrototype::cuda(0).ipc_shareable()).map_err(e)?;
    if !b.is_ipc_shareable() {
        return Err(format!("{NAME}: an ipc_shareable buffer is not shareable"));
    }
    let pattern: Vec<u8> = (0..n).map(ipc_pattern).collect();
    b.copy_from(&Buffer::from_vec(pattern.clone())).map_err(e)?;
    let view = (1 << 20)..(5 << 20);
    let desc = b.slice(view.clone()).ipc_descriptor().map_err(e)?;
    if (desc.offset(), desc.len()) != (view.start, view.len()) || desc.allocation_size() < n {
        return Err(format!(
            "{NAME}: the descriptor says {desc:?} for bytes {view:?} of {n}"
        ));
    }
    match Buffer::from_ipc_descriptor(&desc) {
        Err(Error::InvalidArgument(m)) if m.contains("this very process") => {}
        other => return Err(format!("{NAME}: imported its own descriptor: {other:?}")),
    }
    // The descriptor travels as text on the child's command line.
    let child = run_ipc_child(&desc, IpcMode::Write)?;
    let got = b.to_vec().map_err(e)?;
    let mut want = pattern;
    let at = view.start + IPC_CHILD_WRITE.start;
    for (i, w) in want[at..at + IPC_CHILD_WRITE.len()].iter_mut().enumerate() {
        *w = ipc_child_byte(i);
    }
    if got != want {
        let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
        return Err(format!(
            "{NAME}: after the child's write the exporter's byte {first} is {} (expected {})",
            got[first], want[first]
        ));
    }
    table.push((
        NAME.into(),
        format!(
            "ok: a {} MiB view at +{} MiB of a {} MiB cuMemAlloc buffer imported by pid {child}, \
             checked and written there, the write seen by the exporter; pool, pinned and \
             same-process imports refused ({:.1} s)",
            view.len() >> 20,
            view.start >> 20,
            n >> 20,
            t.elapsed().as_secs_f64()
        ),
    ));

    // Imports dropped before the exporter: the exporter fills, a child imports twice, drops
    // one early, imports again after closing both; the exporter keeps using the memory.
    let t = Instant::now();
    b.fill_bytes(IPC_FILL).map_err(e)?;
    let child = run_ipc_child(&desc, IpcMode::Reopen)?;
    b.fill_bytes(0x11).map_err(e)?;
    if b.to_vec().map_err(e)?.iter().any(|&x| x != 0x11) {
        return Err(format!(
            "{NAME}: the exporter's buffer is damaged after the import closed"
        ));
    }
    drop(b);
    table.push((
        "CUDA IPC imports dropped before the exporter".into(),
        format!(
            "ok: pid {child} imported twice, dropped one early, reopened after closing both; \
             the exporter kept writing and reading, then freed ({:.1} s)",
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// Runs this binary as the importing child; returns its pid, or its output when it failed.
fn run_ipc_child(desc: &IpcDescriptor, mode: IpcMode) -> Result<u32, String> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().map_err(|x| format!("current_exe: {x}"))?;
    let mode_arg = match mode {
        IpcMode::Write => "write",
        IpcMode::Reopen => "reopen",
    };
    let mut child = Command::new(exe)
        .args(["--ipc-child", &desc.to_hex(), "--ipc-child-mode", mode_arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|x| format!("CUDA IPC: starting the child: {x}"))?;
    let pid = child.id();
    let deadline = Instant::now() + std::time::Duration::from_secs(180);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "CUDA IPC: the {mode_arg} child (pid {pid}) hung; killed"
                ));
            }
            Err(x) => return Err(format!("CUDA IPC: waiting for the child: {x}")),
        }
    };
    let out = child
        .wait_with_output()
        .map_err(|x| format!("CUDA IPC: the child's output: {x}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !status.success() || !text.contains("ipc child: ok") {
        return Err(format!(
            "CUDA IPC: the {mode_arg} child (pid {pid}) failed ({status}): {}",
            text.trim().replace('\n', " / ")
        ));
    }
    Ok(pid)
}

/// The importing child (`--ipc-child HEX`).
fn ipc_child(hex: &str, mode: IpcMode) -> Check {
    let e = |x: Error| x.to_string();
    let desc = IpcDescriptor::from_hex(hex).map_err(e)?;
    if desc.is_from_this_process() {
        return Err("the descriptor claims to come from this process".into());
    }
    let expect = |b: &Buffer, what: &str, want: &dyn Fn(usize) -> u8| -> Check {
        let got = b.to_vec().map_err(e)?;
        match (0..got.len()).find(|&i| got[i] != want(i)) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{what}: byte {i} of the imported view is {} (expected {})",
                got[i],
                want(i)
            )),
        }
    };
    let base = desc.offset();
    match mode {
        IpcMode::Write => {
            let shared = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            if shared.len() != desc.len() || shared.memory() != zarrbuf::Memory::Cuda(0) {
                return Err(format!("imported {shared:?} for {desc:?}"));
            }
            expect(&shared, "the exporter's pattern", &|i| {
                ipc_pattern(base + i)
            })?;
            let bytes: Vec<u8> = (0..IPC_CHILD_WRITE.len()).map(ipc_child_byte).collect();
            let mut part = shared.try_slice(IPC_CHILD_WRITE).map_err(e)?;
            part.copy_from(&Buffer::from_vec(bytes)).map_err(e)?;
            shared.sync().map_err(e)?;
        }
        IpcMode::Reopen => {
            let first = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            let second = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            drop(first);
            expect(&second, "after dropping the first import", &|_| IPC_FILL)?;
            drop(second);
            let again = Buffer::from_ipc_descriptor(&desc).map_err(e)?;
            expect(&again, "imported again after closing", &|_| IPC_FILL)?;
            drop(again);
            // The context still works once every mapping is closed.
            let b = Buffer::from_slice(&[1, 2, 3], &BufferPrototype::cuda(0)).map_err(e)?;
            if b.to_vec().map_err(e)? != [1, 2, 3] {
                return Err("a device round trip after closing the imports failed".into());
            }
        }
    }
    Ok(())
}

fn kernels() -> Result<String, String> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("{e:?}"))?;
    zarrbuf_codecs::cuda::self_test(&ctx).map_err(|e| e.to_string())
}

/// (name, store, array path, npy) from fixtures/manifest.json.
fn manifest(root: &Path) -> Result<Vec<(String, String, String, PathBuf)>, String> {
    let dir = root.join("fixtures");
    let text =
        std::fs::read_to_string(dir.join("manifest.json")).map_err(|e| format!("manifest: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let list = v.as_array().ok_or("manifest is not a list")?;
    Ok(list
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (
                s("name"),
                dir.join(s("store")).to_string_lossy().into_owned(),
                s("path"),
                dir.join(s("npy")),
            )
        })
        .collect())
}

fn same(what: &str, got: &NDBuffer, want: &NDBuffer) -> Check {
    if got.shape() != want.shape() {
        return Err(format!(
            "{what}: shape {:?} != {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (
        got.to_native_bytes().map_err(|e| e.to_string())?,
        want.to_native_bytes().map_err(|e| e.to_string())?,
    );
    if g != w {
        return Err(format!("{what}: contents differ"));
    }
    Ok(())
}

fn fixtures(root: &Path) -> Result<usize, String> {
    let protos = [
        ("pinned", BufferPrototype::pinned(0)),
        ("cuda", BufferPrototype::cuda(0)),
    ];
    let list = manifest(root)?;
    let scratch = std::env::temp_dir().join("zarrbuf-gpucheck");
    for (name, store, path, npy) in &list {
        let e = |x: zarrbuf::Error| format!("{name}: {x}");
        let array = zarrbuf::open(store, path).map_err(e)?;
        let want = zarrbuf::npy::read(npy).map_err(e)?;
        let shape = array.shape().to_vec();
        let mid: Vec<Range<u64>> = shape.iter().map(|&n| n / 4..n - n / 4).collect();
        let corner: Vec<Range<u64>> = shape.iter().map(|&n| n.saturating_sub(3)..n).collect();
        // Decompression on the GPU (nvCOMP), alone and together with the CPU decoders.
        for decode in [Decode::Gpu, Decode::Both, Decode::Cpu] {
            let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
            for (staging, subset) in [(256usize << 20, &all), (1, &mid), (256 << 20, &corner)] {
                let o = ReadOptions::default()
                    .with_decode(decode)
                    .with_staging_bytes(staging);
                let got = array
                    .read_opt(subset, &BufferPrototype::cuda(0), &o)
                    .map_err(e)?;
                let r: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                same(
                    &format!("{name} {subset:?} on cuda, decode {decode:?}"),
                    &got,
                    &want.get(&r).map_err(e)?,
                )?;
            }
        }
        for (pname, proto) in &protos {
            let got = array.read_all(proto).map_err(e)?;
            if got.memory() != proto.memory() {
                return Err(format!(
                    "{name}: read into {pname} landed in {}",
                    got.memory()
                ));
            }
            same(&format!("{name} whole on {pname}"), &got, &want)?;
            for subset in [&mid, &corner] {
                let r: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                let part = want.get(&r).map_err(e)?;
                let got = array.read(subset, proto).map_err(e)?;
                same(&format!("{name} {subset:?} on {pname}"), &got, &part)?;
                let staged = ReadOptions::default()
                    .with_mode(PipelineMode::Staged)
                    .with_staging_bytes(1);
                let got = array.read_opt(subset, proto, &staged).map_err(e)?;
                same(&format!("{name} {subset:?} staged on {pname}"), &got, &part)?;
            }
            // Strided destination: read into a view of a larger device array.
            let big_shape: Vec<usize> = shape.iter().map(|&n| n as usize + 2).collect();
            let big =
                NDBuffer::zeros(&big_shape, want.dtype(), zarrbuf::Order::C, proto).map_err(e)?;
            let window: Vec<Range<usize>> = shape.iter().map(|&n| 1..n as usize + 1).collect();
            let mut view = big.get(&window).map_err(e)?;
            let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
            array.read_into(&all, &mut view).map_err(e)?;
            same(&format!("{name} into a strided {pname} view"), &view, &want)?;
        }
        // Write back from device memory, staged, into a fresh copy of the store.
        let dest = scratch.join(format!("{name}.zarr"));
        let _ = std::fs::remove_dir_all(&dest);
        copy_metadata(Path::new(store), &dest).map_err(|x| format!("{name}: {x}"))?;
        let out = zarrbuf::open(dest.to_str().unwrap_or_default(), path).map_err(e)?;
        let on_device = want.to_prototype(&BufferPrototype::cuda(0)).map_err(e)?;
        out.write_opt(
            &out.shape().iter().map(|&n| 0..n).collect::<Vec<_>>(),
            &on_device,
            &WriteOptions::default(),
        )
        .map_err(e)?;
        let back = out.read_all(&BufferPrototype::cpu()).map_err(e)?;
        same(&format!("{name} written from cuda"), &back, &want)?;
    }
    Ok(list.len())
}

/// `read_multi` on every fixture onto two parts on one GPU (the same ordinal twice, and
/// pinned + device memory): split along the first and last axis, and replicated, each part
/// in its own memory and the whole equal to the .npy written by zarr-python/tensorstore.
fn multi_device(root: &Path) -> Result<usize, String> {
    let multis = [
        (
            "cuda:0 x 2",
            BufferPrototype::cuda_devices(&[0, 0]).map_err(|e| e.to_string())?,
        ),
        (
            "pinned:0 + cuda:0",
            MultiPrototype::new(vec![BufferPrototype::pinned(0), BufferPrototype::cuda(0)])
                .map_err(|e| e.to_string())?,
        ),
    ];
    let mut reads = 0;
    for (name, store, path, npy) in &manifest(root)? {
        let e = |x: zarrbuf::Error| format!("{name}: {x}");
        let array = zarrbuf::open(store, path).map_err(e)?;
        let want = zarrbuf::npy::read(npy).map_err(e)?;
        let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let last = all.len().saturating_sub(1);
        for (mname, multi) in &multis {
            // A 0-dimensional array has no axis to split: it is only replicated.
            let placements = if all.is_empty() {
                vec![Placement::Replicate]
            } else {
                vec![
                    Placement::Split { axis: 0 },
                    Placement::Split { axis: last },
                    Placement::Replicate,
                ]
            };
            for placement in placements {
                let got = zarrbuf::multi::read(&array, &all, multi, placement).map_err(e)?;
                for (i, part) in got.parts().iter().enumerate() {
                    if part.memory() != multi.parts()[i].memory() {
                        return Err(format!(
                            "{name} {mname} {placement:?}: part {i} landed in {}",
                            part.memory()
                        ));
                    }
                }
                let whole = got.gather(&BufferPrototype::cpu()).map_err(e)?;
                same(&format!("{name} {mname} {placement:?}"), &whole, &want)?;
                if placement == Placement::Replicate {
                    for (i, part) in got.parts().iter().enumerate() {
                        same(&format!("{name} {mname} replica {i}"), part, &want)?;
                    }
                }
                reads += 1;
            }
        }
    }
    Ok(reads)
}

/// A transpose outside the sharding codec: chunks are decoded whole by zarrs, scattered on the device.
fn zarrs_decoded_chains() -> Check {
    use std::sync::Arc;
    use zarrs::array::codec::{ShardingCodecBuilder, TransposeCodec, TransposeOrder, ZstdCodec};
    use zarrs::array::{ArrayBuilder, data_type};
    let e = |x: zarrbuf::Error| format!("zarrs-decoded chain: {x}");
    let n = 13 * 10 * 6;
    let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1000.0).collect();
    let data = NDBuffer::from_vec(values, &[13, 10, 6]).map_err(e)?;
    for proto in [BufferPrototype::pinned(0), BufferPrototype::cuda(0)] {
        let nz = |v: u64| std::num::NonZeroU64::new(v).expect("non-zero");
        let mut sharding =
            ShardingCodecBuilder::new(vec![nz(3), nz(2), nz(4)], &data_type::float32());
        sharding.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
        let order = TransposeOrder::new(&[2, 0, 1]).map_err(|x| x.to_string())?;
        let array = ArrayBuilder::new(
            vec![13u64, 10, 6],
            vec![4u64, 8, 6],
            data_type::float32(),
            f32::NAN,
        )
        .array_to_array_codecs(vec![Arc::new(TransposeCodec::new(order))])
        .array_to_bytes_codec(sharding.build_arc())
        .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/x")
        .map_err(|x| x.to_string())?;
        let all = [0..13u64, 0..10, 0..6];
        array
            .write(&all, &data.to_prototype(&proto).map_err(e)?)
            .map_err(e)?;
        let back = array.read(&all, &proto).map_err(e)?;
        same("zarrs-decoded chain read back", &back, &data)?;
        let part = array.read(&[3..11, 2..9, 1..5], &proto).map_err(e)?;
        same(
            "zarrs-decoded chain subset",
            &part,
            &data.get(&[3..11, 2..9, 1..5]).map_err(e)?,
        )?;
    }
    Ok(())
}

/// The chains the GPU compresses: zarr v3 codecs after `bytes`, and the chunk shape (zlib
/// goes through nvCOMP's DEFLATE compressor, which takes chunks of at most 64 KiB).
const COMPRESS_CHAINS: &[(&str, &str, [u64; 3])] = &[
    (
        "zstd",
        r#"{"name":"zstd","configuration":{"level":1,"checksum":false}}"#,
        [16, 64, 64],
    ),
    (
        "zstd+crc32c",
        r#"{"name":"zstd","configuration":{"level":1,"checksum":false}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "lz4",
        r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}}"#,
        [16, 64, 64],
    ),
    (
        "lz4+crc32c",
        r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "gzip",
        r#"{"name":"gzip","configuration":{"level":5}}"#,
        [16, 64, 64],
    ),
    (
        "gzip+crc32c",
        r#"{"name":"gzip","configuration":{"level":5}},{"name":"crc32c"}"#,
        [16, 64, 64],
    ),
    (
        "zlib",
        r#"{"name":"numcodecs.zlib","configuration":{"level":5}}"#,
        [4, 64, 64],
    ),
    (
        "zlib+crc32c",
        r#"{"name":"numcodecs.zlib","configuration":{"level":5}},{"name":"crc32c"}"#,
        [4, 64, 64],
    ),
];

/// Writes from CUDA memory with GPU compression (nvCOMP) into temporary arrays of every
/// chain in [`COMPRESS_CHAINS`] — smooth data, an incompressible stretch, a chunk of fill
/// values, partial edge chunks — and reads them back through the CPU decoders and the GPU
/// decoder, comparing exactly. Also writes each with CPU compression and reports how many
/// chunks differ from it (they should: evidence nvCOMP, not the CPU, compressed them) and
/// both write rates.
fn gpu_compress(table: &mut Vec<(String, String)>) -> Check {
    let lib = zarrbuf::cuda::nvcomp_compression().map_err(|e| format!("GPU compression: {e}"))?;
    table.push(("nvCOMP (GPU compression)".into(), lib));
    let (nz, ny, nx) = (64usize, 250usize, 256usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..nz * ny * nx)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if z < 16 && y < 64 && x < 64 {
                0.0 // chunk [0, 0, 0]: the fill value, erased
            } else if z >= 48 {
                f32::from_bits((state >> 32) as u32 & 0x7f7f_ffff) // noise
            } else {
                ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos()) * 100.0 + x as f32 * 1e-3
            }
        })
        .collect();
    let host = NDBuffer::from_vec(values, &[nz, ny, nx]).map_err(|e| e.to_string())?;
    let device = host
        .to_prototype(&BufferPrototype::cuda(0))
        .map_err(|e| e.to_string())?;
    let bytes = host.nbytes() as f64;
    let base =
        std::env::temp_dir().join(format!("zarrbuf-gpucheck-compress-{}", std::process::id()));
    let shape = [nz as u64, ny as u64, nx as u64];
    let all: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    let mut report = Vec::new();
    for (name, codecs, chunks) in COMPRESS_CHAINS {
        let e = |x: zarrbuf::Error| format!("GPU compression {name}: {x}");
        let io = |x: std::io::Error| format!("GPU compression {name}: {x}");
        let mut rates = Vec::new();
        let mut stored = Vec::new();
        for compress in [Compress::Gpu, Compress::Cpu] {
            let dir = base.join(format!("{}-{compress:?}.zarr", name.replace('+', "-")));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(io)?;
            let meta = format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[{},{},{}],"data_type":"float32",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{},{},{}]}}}},
                "chunk_key_encoding":{{"name":"default"}},"fill_value":0.0,
                "codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}},{codecs}]}}"#,
                shape[0], shape[1], shape[2], chunks[0], chunks[1], chunks[2]
            );
            std::fs::write(dir.join("zarr.json"), meta).map_err(io)?;
            let array = zarrbuf::open(&dir.to_string_lossy(), "").map_err(e)?;
            let t = Instant::now();
            array
                .write_opt(
                    &all,
                    &device,
                    &WriteOptions::default().with_compress(compress),
                )
                .map_err(e)?;
            rates.push(bytes / t.elapsed().as_secs_f64().max(1e-9) / 1e9);
            for decode in [Decode::Cpu, Decode::Gpu] {
                let opts = ReadOptions::default().with_decode(decode);
                let back = array
                    .read_opt(&all, &BufferPrototype::cpu(), &opts)
                    .map_err(e)?;
                same(
                    &format!("{name} written with {compress:?}, read with {decode:?}"),
                    &back,
                    &host,
                )?;
            }
            if dir.join("c/0/0/0").exists() {
                return Err(format!(
                    "{name} {compress:?}: the chunk of fill values was stored"
                ));
            }
            stored.push(dir);
        }
        // How many stored chunks differ between the GPU- and the CPU-compressed arrays.
        let (mut differ, mut total) = (0usize, 0usize);
        let grid: Vec<u64> = shape
            .iter()
            .zip(chunks)
            .map(|(n, c)| n.div_ceil(*c))
            .collect();
        for z in 0..grid[0] {
            for y in 0..grid[1] {
                for x in 0..grid[2] {
                    let key = format!("c/{z}/{y}/{x}");
                    let (Ok(g), Ok(c)) = (
                        std::fs::read(stored[0].join(&key)),
                        std::fs::read(stored[1].join(&key)),
                    ) else {
                        continue;
                    };
                    total += 1;
                    differ += usize::from(g != c);
                }
            }
        }
        report.push(format!(
            "{name}: GPU {:.2} GB/s, CPU {:.2} GB/s, {differ}/{total} chunks differ from the CPU's",
            rates[0], rates[1]
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    table.push((
        "writes compressed on the GPU read back exactly (CPU and GPU decode)".into(),
        format!("ok: {}", report.join("; ")),
    ));
    Ok(())
}

fn copy_metadata(src: &Path, dst: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(src)? {
        let p = entry?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            copy_metadata(&p, &dst.join(&name))?;
        } else if matches!(
            name.as_str(),
            "zarr.json" | ".zarray" | ".zattrs" | ".zgroup"
        ) {
            std::fs::create_dir_all(dst)?;
            std::fs::copy(&p, dst.join(&name))?;
        }
    }
    Ok(())
}

/// Median GB/s of whole-array reads of `array` into cuda:0 with each (decode, staging
/// bytes) choice, each result checked against `data` first.
fn cuda_reads(
    array: &zarrs::array::Array<zarrs::filesystem::FilesystemStore>,
    name: &str,
    data: &NDBuffer,
    total: usize,
    reps: usize,
    choices: &[(Decode, usize)],
) -> std::result::Result<Vec<f64>, String> {
    let all = variants::full(array.shape());
    let mut rates = Vec::with_capacity(choices.len());
    for &(decode, staging) in choices {
        let o = ReadOptions::default()
            .with_decode(decode)
            .with_staging_bytes(staging);
        let check = array
            .read_opt(&all, &BufferPrototype::cuda(0), &o)
            .map_err(|e| e.to_string())?;
        same(
            &format!("bench {name} on cuda, decode {decode:?}"),
            &check,
            data,
        )?;
        drop(check);
        rates.push(variants::median_gbps(total, reps, || {
            drop(
                array
                    .read_opt(&all, &BufferPrototype::cuda(0), &o)
                    .expect("cuda read"),
            )
        }));
    }
    Ok(rates)
}

fn bench(bytes: u64, reps: usize, table: &mut Vec<(String, String)>) -> Check {
    let e = |x: zarrbuf::Error| x.to_string();
    // Pinned <-> device bandwidth, 256 MiB.
    let n = 256 << 20;
    let pinned = Buffer::empty(n, &BufferPrototype::pinned(0)).map_err(e)?;
    let mut device = Buffer::empty(n, &BufferPrototype::cuda(0)).map_err(e)?;
    let h2d = variants::median_gbps(n, reps, || device.copy_from(&pinned).expect("h2d"));
    let mut back = pinned.clone();
    let d2h = variants::median_gbps(n, reps, || back.copy_from(&device).expect("d2h"));
    table.push((
        "pinned H2D / D2H (256 MiB)".into(),
        format!("{h2d:.1} / {d2h:.1} GB/s"),
    ));

    let shape = variants::shape_for(bytes);
    let total = shape.iter().product::<u64>() as usize * 4;
    let dir = std::env::temp_dir().join("zarrbuf-bench");
    let t = Instant::now();
    let data = variants::data(&shape);
    table.push((
        "bench array".into(),
        format!(
            "float32 {shape:?} = {total} bytes, 64³ chunks (generated in {:.1} s)",
            t.elapsed().as_secs_f64()
        ),
    ));
    let mut reused = vec![0u8; total];
    let all = variants::full(&shape);
    for v in variants::Variant::GPU {
        let array = variants::create(&dir, v, &shape, &data);
        let zi = variants::median_gbps(total, reps, || variants::zarrs_into(&array, &mut reused));
        let za = variants::median_gbps(total, reps, || {
            variants::zarrs_alloc(&array);
        });
        let cpu = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::cpu()))
        });
        let staged = ReadOptions::default().with_mode(PipelineMode::Staged);
        let cpu_staged = variants::median_gbps(total, reps, || {
            drop(
                array
                    .read_opt(&all, &BufferPrototype::cpu(), &staged)
                    .expect("staged read"),
            )
        });
        let pin = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::pinned(0)))
        });
        let cuda = cuda_reads(
            &array,
            v.name(),
            &data,
            total,
            reps,
            &[
                (Decode::Cpu, 256usize << 20),
                (Decode::Gpu, 256 << 20),
                (Decode::Both, 256 << 20),
                (Decode::Gpu, 1 << 30),
                (Decode::Both, 1 << 30),
            ],
        )?;
        let best = cuda.iter().copied().fold(0.0, f64::max);
        table.push((
            format!("read {} (GB/s, median of {reps})", v.name()),
            format!(
                "zarrs into reused {zi:.2} | zarrs alloc {za:.2} | zarrbuf cpu {cpu:.2} ({:.2}x) | zarrbuf cpu staged {cpu_staged:.2} | zarrbuf pinned {pin:.2} | zarrbuf cuda decode cpu {:.2} / gpu {:.2} / both {:.2}; 1 GiB staging: gpu {:.2} / both {:.2} (best {:.2}x cpu)",
                cpu / zi,
                cuda[0],
                cuda[1],
                cuda[2],
                cuda[3],
                cuda[4],
                best / cpu
            ),
        ));
    }
    // 128³ chunks: 8x fewer, 8 MiB each (the fewer, larger chunks GPU decoders prefer).
    for v in variants::Variant::GPU {
        let array = variants::create_chunked(&dir, v, &shape, &data, 128);
        let zi = variants::median_gbps(total, reps, || variants::zarrs_into(&array, &mut reused));
        let cpu = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::cpu()))
        });
        let name = format!("{} 128³", v.name());
        let cuda = cuda_reads(
            &array,
            &name,
            &data,
            total,
            reps,
            &[
                (Decode::Cpu, 1usize << 30),
                (Decode::Gpu, 1 << 30),
                (Decode::Both, 1 << 30),
            ],
        )?;
        table.push((
            format!("read {name} (GB/s, median of {reps})"),
            format!(
                "zarrs into reused {zi:.2} | zarrbuf cpu {cpu:.2} ({:.2}x) | zarrbuf cuda, 1 GiB staging, decode cpu {:.2} / gpu {:.2} / both {:.2}",
                cpu / zi,
                cuda[0],
                cuda[1],
                cuda[2],
            ),
        ));
    }
    Ok(())
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

    #[test]
    fn the_ipc_child_refuses_bad_descriptors() {
        for hex in ["", "zz", "00"] {
            let err = ipc_child(hex, IpcMode::Write).unwrap_err();
            assert!(err.contains("IPC descriptor"), "{err}");
        }
    }

    #[test]
    fn the_ipc_check_skips_without_a_gpu() {
        if Device::Cuda(0).is_available() {
            return;
        }
        let mut table = Vec::new();
        let r = ipc(&mut table);
        if std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
            assert!(r.unwrap_err().contains("ZARRBUF_REQUIRE_GPU=1"));
        } else {
            r.unwrap();
            assert_eq!(table.len(), 1);
            assert!(table[0].1.starts_with("skipped: "), "{table:?}");
        }
    }
}
