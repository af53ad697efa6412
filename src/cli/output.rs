//! Writing to standard output and standard error without panicking: `println!` panics when
//! stdout is closed (`zarrbuf info --json | head -1`) or full (`> /dev/full`). [`outln!`]
//! returns the failure as an [`Error::Io`] on [`STDOUT`], which `main` turns into a quiet
//! exit for a closed pipe and one `error:` line otherwise; [`errln!`] drops failures to
//! write to stderr (there is nowhere left to say them).

use std::io::Write;
use zarrbuf::{Error, Result};

/// The name failures to write to standard output carry.
pub(crate) const STDOUT: &str = "standard output";

/// Writes formatted text to standard output (whole, then flushed).
pub(crate) fn write_out(text: std::fmt::Arguments) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(text)
        .and_then(|()| out.flush())
        .map_err(|source| Error::Io {
            path: STDOUT.into(),
            source,
        })
}

/// Whether `e` is standard output closed by its reader (a pipe whose reader has gone).
pub(crate) fn is_closed_stdout(e: &Error) -> bool {
    matches!(e, Error::Io { path, source } if path == STDOUT && source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// `println!` that returns a write failure instead of panicking: `outln!(...)?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that returns a write failure instead of panicking: `out!(...)?`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a failure to write to stderr is dropped.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub(crate) use {errln, out, outln};
