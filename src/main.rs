//! The `zarrbuf` command line: inspect, read, copy, check and benchmark zarr arrays on the
//! CPU or a GPU. The commands live in `cli/`, one file each; this file parses the command
//! line and dispatches.

mod cli;

use clap::Parser;
use cli::args::{Cli, Command};
use cli::bench_write::bench_write;
use cli::check::check;
use cli::copy::copy;
use cli::info::info;
use cli::names::label;
use cli::output::{errln, is_closed_stdout};
use cli::parse::parse_bytes;
use cli::read::{ReadChoices, bench, read};
use cli::source::{Opening, Reader};
use zarrbuf::{
    Error, Result,
    options::{PipelineMode, ReadOptions},
};

fn main() {
    cli::allocator::keep_freed_memory();
    if let Err(e) = zarrbuf::alloc::huge_pages_setting() {
        errln!("error: {e}");
        std::process::exit(2);
    }
    cli::allocator::follow_huge_page_choice();
    // A bug must still end as one `error:` line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        errln!("error: internal error (please report): {msg}");
    }));
    let cli = Cli::parse();
    let result = std::panic::catch_unwind(|| run(cli));
    match result {
        Ok(Ok(())) => {}
        // Its reader has what it wanted (`| head`): nothing to report.
        Ok(Err(e)) if is_closed_stdout(&e) => {}
        Ok(Err(e)) => {
            errln!("error: {}", one_line(&e.to_string()));
            std::process::exit(1);
        }
        Err(_) => std::process::exit(101),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// zarrs knows an array only by its node path; name the store in messages too.
fn relabel(e: Error, store: &str, path: &str) -> Error {
    match e {
        Error::Zarr {
            array,
            message,
            source,
            ..
        } if !array.contains(store) => Error::Zarr {
            array: label(store, path),
            message,
            source,
        },
        other => other,
    }
}

fn run(cli: Cli) -> Result<()> {
    let (store, path) = match &cli.command {
        Command::Info { store, path, .. }
        | Command::Check { store, path, .. }
        | Command::Read { store, path, .. }
        | Command::Bench { store, path, .. } => (store.clone(), path.clone()),
        // Copy errors name their array (source or destination) themselves.
        Command::Copy(_) | Command::BenchWrite(_) => return dispatch(cli),
    };
    dispatch(cli).map_err(|e| relabel(e, &store, &path))
}

/// The reader `--async` (`force_async`) asks for.
fn reader(force_async: bool) -> Reader {
    if force_async {
        Reader::Async
    } else {
        Reader::ByLocation
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info {
            store,
            path,
            json,
            version,
        } => info(&store, &path, json, &version.options()?),
        Command::Read {
            store,
            path,
            subset,
            device,
            out,
            decode,
            force_async,
            memory,
            io_concurrency,
            version,
        } => read(
            &store,
            &path,
            subset.as_deref(),
            device.as_deref(),
            out,
            ReadChoices {
                decode,
                max_bytes: memory
                    .as_deref()
                    .map(parse_bytes)
                    .transpose()?
                    .map(|n| n as u64),
                io_concurrency,
            },
            &Opening {
                reader: reader(force_async),
                options: version.options()?,
            },
        ),
        Command::Copy(args) => copy(&args),
        Command::Check {
            store,
            path,
            json,
            repair,
            io_concurrency,
            version,
        } => {
            let mut opts = zarrbuf::options::CheckOptions::default()
                .with_repair(repair)
                .with_open(version.options()?);
            opts.io_concurrency = io_concurrency;
            check(&store, &path, json, &opts)
        }
        Command::BenchWrite(args) => bench_write(&args),
        Command::Bench {
            store,
            path,
            subset,
            subsets,
            device,
            reps,
            decode,
            force_async,
            staged,
            direct,
            no_prefix_decode,
            prefix_decode: _,
            io_concurrency,
            codec_limit,
            version,
        } => {
            let mode = match (staged, direct) {
                (true, _) => PipelineMode::Staged,
                (_, true) => PipelineMode::Direct,
                _ => PipelineMode::Auto,
            };
            let mut opts = ReadOptions::default()
                .with_decode(decode)
                .with_mode(mode)
                .with_decode_needed_prefix(!no_prefix_decode);
            opts.io_concurrency = io_concurrency;
            bench(
                &store,
                &path,
                subset.as_deref(),
                subsets.as_deref(),
                device.as_deref(),
                reps,
                &Opening {
                    reader: reader(force_async),
                    options: version.options()?,
                },
                &opts,
                codec_limit,
            )
        }
    }
}
