//! The command line's commands, one file each (`read` also holds `bench`), and what they
//! share: the arguments (`args`), names of stores and arrays (`names`), the codec limit
//! `bench` prints (`codec_limit`), output that never panics (`output`), flag values
//! (`parse`), the array a command reads (`source`), how a read's result is reported, per
//! output kind (`read_report`), and progress bars (`progress`).

pub(crate) mod allocator;
pub(crate) mod args;
pub(crate) mod bench_write;
pub(crate) mod check;
pub(crate) mod codec_limit;
pub(crate) mod copy;
pub(crate) mod info;
pub(crate) mod names;
pub(crate) mod output;
pub(crate) mod parse;
pub(crate) mod progress;
pub(crate) mod read;
pub(crate) mod read_report;
pub(crate) mod source;
