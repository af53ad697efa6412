//! zarrbuf-gpucheck: verifies zarrbuf on a real GPU in one run, and measures it.
//!
//! `zarrbuf-gpucheck [all|kernels|conformance|ipc|fixtures|compress|bench] [--root DIR]
//! [--bench-bytes N] [--reps N] [--quick] [--sweep-layout] [--device cuda|host]` runs (`all`, the default, in
//! this order): the CUDA kernels against their host twins; the conformance cases on cpu,
//! pinned and CUDA memory; CUDA IPC across two processes (the binary runs itself as the
//! importing child, with the hidden `--ipc-child HEX --ipc-child-mode MODE` flags); every
//! fixture read into pinned and CUDA memory (whole, subsets, staged, each decode choice) and
//! written back from CUDA memory, multi-device reads, damaged chunks refused; writes from
//! CUDA memory compressed on the GPU with nvCOMP (zstd, lz4, gzip, zlib, each alone and with
//! crc32c) read back exactly through the CPU decoders and the GPU decoder; the read
//! benchmark, one `gpu-decode:` line per (variant, layout), each followed by its stage
//! timings (`gpu-stages:`) and its chunks' decode limits (`gpu-limits:`), and (full runs) one
//! `gpu-cache:` line for reads through a decoded-chunk cache in device memory; with
//! `--sweep-layout` the benchmark measures the layout sweep instead (`gpu-sweep:` lines). Its first line is the knobs in
//! effect (`gpu-knobs:`, `knobs`). It exits non-zero on the first failure, on an unknown
//! subcommand or flag, or on a bad value, and prints a table at the end. `--device host` is
//! the dry run of the same sequence on the device trait's host twin (`target`). Built and
//! run by `scripts/gpu-test`.
//!
//! The command line is in `args`; the CUDA IPC, fixture, damaged-chunk, GPU compression and
//! benchmark checks in `ipc`, `fixtures`, `damaged`, `compress`, `bench` (its arrays in
//! `arrays`, its cached line in `cache_bench`, its stage and limit lines in `stage_lines`,
//! the layout sweep in `sweep`); the kernel, conformance and soundness checks
//! (the cases come from `zarrbuf-test-cases`) and the table of checks here. The unit tests run with
//! `cargo test -p zarrbuf-gpucheck`; so does `tests/cli.rs`, which runs the binary with
//! mistyped arguments. `scripts/gpu-test dry-run` (in CI) runs the whole sequence on the
//! host twin and fails when a line is missing.

mod args;
mod arrays;
mod bench;
mod cache_bench;
mod compress;
mod damaged;
mod fixtures;
mod ipc;
mod knobs;
mod stage_lines;
mod sweep;
mod target;

use args::{Target, What, parse_args};
use std::io::Write;
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
    if args.device == Target::Host && std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
        eprintln!(
            "error: --device host is a dry run without a GPU, and ZARRBUF_REQUIRE_GPU=1 requires \
             every GPU part to run; unset ZARRBUF_REQUIRE_GPU for a dry run"
        );
        std::process::exit(2);
    }
    let knobs = knobs::Knobs::from_env().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    println!("{}", knobs.header());
    println!(
        "gpu-run: part={:?} device={} bench-bytes={} reps={} quick={}",
        args.what,
        args.device.device_name(),
        args.bench_bytes,
        args.reps,
        args.quick
    );
    let _ = std::io::stdout().flush();
    let mut run = Run {
        root: args.root,
        bench: bench::Bench {
            bytes: args.bench_bytes,
            reps: args.reps as usize,
            quick: args.quick,
            target: args.device,
            staging_bytes: knobs.staging_bytes,
            sweep: args.sweep_layout,
        },
        target: args.device,
        // The knobs again at the end, for logs of which only the tail comes back.
        table: vec![("knobs".into(), knobs.header())],
    };
    // A check that panics fails the run like one that returns an error: the table of what
    // passed before it is printed all the same.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_checks(args.what, &mut run)
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        Err(format!("a check panicked: {what}"))
    });
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
    /// The benchmark's settings.
    bench: bench::Bench,
    /// Where device reads go (a GPU, or the host twin in a dry run).
    target: Target,
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
        part: What::Fixtures,
        run: check_damaged,
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
    let (count, nvcomp) = match run.target {
        Target::Cuda => (
            zarrbuf::cuda::cuda_device_count()
                .map_err(|e| e.to_string())?
                .to_string(),
            zarrbuf::cuda::nvcomp_library().map_err(|e| e.to_string())?,
        ),
        Target::Host => (
            "none used (--device host: a dry run on the host twin)".into(),
            "the host twin (dry run)".into(),
        ),
    };
    run.table.push(("CUDA devices".into(), count));
    run.table.push(("nvCOMP (GPU decode)".into(), nvcomp));
    for check in CHECKS {
        if what.includes(check.part) {
            (check.run)(run)?;
        }
    }
    Ok(())
}

/// The row of a part only a GPU can run, in a dry run.
fn dry_run_row(run: &mut Run, check: &str, needs: &str) {
    run.table.push((
        check.into(),
        format!("not run: --device host is a dry run, and {needs} needs a GPU"),
    ));
}

/// The CUDA kernels against their host twins.
fn check_kernels(run: &mut Run) -> Check {
    if run.target.is_host() {
        dry_run_row(run, "kernels vs host", "running the CUDA kernels");
        return Ok(());
    }
    let t = Instant::now();
    let report = kernels()?;
    run.table.push((
        "kernels vs host".into(),
        format!("ok ({:.1} s): {report}", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// The prototypes the conformance and soundness cases run on: cpu, pinned:0 and cuda:0, or
/// cpu alone in a dry run.
fn case_prototypes(target: Target) -> Vec<(&'static str, BufferPrototype)> {
    match target {
        Target::Cuda => vec![
            ("cpu", BufferPrototype::cpu()),
            ("pinned:0", BufferPrototype::pinned(0)),
            ("cuda:0", BufferPrototype::cuda(0)),
        ],
        Target::Host => vec![("cpu", BufferPrototype::cpu())],
    }
}

/// `cpu, pinned:0, cuda:0`: the names of `protos`.
fn names(protos: &[(&str, BufferPrototype)]) -> String {
    protos.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
}

/// Every conformance case on every prototype.
fn check_conformance(run: &mut Run) -> Check {
    let t = Instant::now();
    let protos = case_prototypes(run.target);
    let mut passed = 0;
    for (name, case) in cases::all() {
        for (pname, proto) in &protos {
            case(proto).map_err(|m| format!("conformance {name} on {pname}: {m}"))?;
            passed += 1;
        }
    }
    run.table.push((
        format!("conformance cases ({})", names(&protos)),
        format!(
            "ok: {passed} case runs, {} cases x {} prototypes ({:.1} s)",
            cases::all().len(),
            protos.len(),
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// The soundness regressions (completion fences, stream order, cleared `empty`) on every
/// prototype.
fn check_soundness(run: &mut Run) -> Check {
    let t = Instant::now();
    let protos = case_prototypes(run.target);
    for (name, case) in soundness::all() {
        for (pname, proto) in &protos {
            case(proto).map_err(|m| format!("soundness {name} on {pname}: {m}"))?;
        }
    }
    run.table.push((
        format!("soundness cases ({})", names(&protos)),
        format!(
            "ok: {} cases x {} prototypes ({:.1} s)",
            soundness::all().len(),
            protos.len(),
            t.elapsed().as_secs_f64()
        ),
    ));
    Ok(())
}

/// CUDA IPC across two processes.
fn check_ipc(run: &mut Run) -> Check {
    if run.target.is_host() {
        dry_run_row(run, "CUDA IPC across processes", "CUDA IPC");
        return Ok(());
    }
    ipc::ipc(&mut run.table)
}

/// Every fixture read into pinned and CUDA memory and written back from the device.
fn check_fixtures(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = fixtures::fixtures(&run.root, run.target)?;
    run.table.push((
        format!("fixtures read+write on pinned/{}", run.target.device_name()),
        format!("ok: {n} fixtures ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Multi-device reads of every fixture.
fn check_multi_device(run: &mut Run) -> Check {
    let t = Instant::now();
    let n = fixtures::multi_device(&run.root, run.target)?;
    let multis = run.target.multis()?.map(|m| m.0).join(" and ");
    run.table.push((
        format!("multi-device reads (split + replicate) on {multis}"),
        format!("ok: {n} reads ({:.1} s)", t.elapsed().as_secs_f64()),
    ));
    Ok(())
}

/// Chains zarrs decodes whole, read into device memory.
fn check_zarrs_decoded_chains(run: &mut Run) -> Check {
    fixtures::zarrs_decoded_chains(run.target)?;
    run.table.push((
        format!(
            "non-exclusively sharded array (zarrs-decoded chunks) on pinned/{}",
            run.target.device_name()
        ),
        "ok".into(),
    ));
    Ok(())
}

/// Chunks cut short, refused by every decode choice.
fn check_damaged(run: &mut Run) -> Check {
    let row = damaged::damaged_chunks(run.target)?;
    run.table.push(("damaged chunks refused".into(), row));
    Ok(())
}

/// Writes compressed on the GPU, read back exactly.
fn check_gpu_compress(run: &mut Run) -> Check {
    compress::gpu_compress(&mut run.table, run.target)
}

/// The read benchmark and the pinned bandwidth.
fn check_bench(run: &mut Run) -> Check {
    run.bench.run(&mut run.table)
}

/// zarrbuf-codecs' CUDA self-test on device 0; returns its report.
fn kernels() -> Result<String, String> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("{e:?}"))?;
    zarrbuf_codecs::cuda::self_test(&ctx).map_err(|e| e.to_string())
}
