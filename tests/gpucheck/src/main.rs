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
//!
//! The command line is in `args`; the CUDA IPC, fixture, GPU compression and benchmark checks
//! in `ipc`, `fixtures`, `compress` and `bench`; the kernel, conformance and soundness checks
//! (the cases come from `zarrbuf-test-cases`) and the table of checks here. The parser's
//! and the IPC check's unit tests run with `cargo test -p zarrbuf-gpucheck`; so does
//! `tests/cli.rs`, which runs the binary with mistyped arguments.

mod args;
mod bench;
mod compress;
mod fixtures;
mod ipc;

use args::{What, parse_args};
use std::path::PathBuf;
use std::time::Instant;
use zarrbuf::BufferPrototype;
use zarrbuf_test_cases::conformance as cases;
use zarrbuf_test_cases::soundness;

/// What a check returns: `Err` says what failed.
type Check = Result<(), String>;

fn main() {
    let args = parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if let Some(hex) = &args.ipc_child {
        match ipc::ipc_child(hex, args.ipc_child_mode) {
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
    ipc::ipc(&mut run.table)
}

/// Every fixture read into pinned and CUDA memory and written back from the device.
fn check_fixtures(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = fixtures::fixtures(&run.root)?;
    run.table.push((
        "fixtures read+write on pinned/cuda".into(),
        format!("ok: {n} fixtures ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Multi-device reads of every fixture.
fn check_multi_device(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = fixtures::multi_device(&run.root)?;
    run.table.push((
        "multi-device reads (split + replicate) on cuda:0 twice and pinned:0+cuda:0".into(),
        format!("ok: {n} reads ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Chains zarrs decodes whole, read into device memory.
fn check_zarrs_decoded_chains(run: &mut Run) -> Check {
    fixtures::zarrs_decoded_chains()?;
    run.table.push((
        "non-exclusively sharded array (zarrs-decoded chunks) on pinned/cuda".into(),
        "ok".into(),
    ));
    Ok(())
}

/// Writes compressed on the GPU, read back exactly.
fn check_gpu_compress(run: &mut Run) -> Check {
    compress::gpu_compress(&mut run.table)
}

/// The read benchmark and the pinned bandwidth.
fn check_bench(run: &mut Run) -> Check {
    bench::bench(run.bench_bytes, run.reps, &mut run.table)
}

/// zarrbuf-codecs' CUDA self-test on device 0; returns its report.
fn kernels() -> Result<String, String> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("{e:?}"))?;
    zarrbuf_codecs::cuda::self_test(&ctx).map_err(|e| e.to_string())
}
