//! Progress bars on a terminal (indicatif) and the callbacks that move them.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use zarrbuf::options::Progress;
use zarrbuf::options::ReadOptions;

/// Read options whose progress moves a bar of chunks (labelled `total_hint`) on a terminal,
/// and the bar to clear when the read is done; plain options elsewhere.
pub(crate) fn progress_options(total_hint: &str) -> (ReadOptions, Option<ProgressBar>) {
    let opts = ReadOptions::default();
    if !std::io::stderr().is_terminal() {
        return (opts, None);
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} chunks {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(total_hint.to_string());
    let b = bar.clone();
    let opts = opts.with_progress(move |p| {
        b.set_length(p.chunks_total as u64);
        b.set_position(p.chunks_done as u64);
    });
    (opts, Some(bar))
}

/// A progress bar of chunks done ("{verb} [===  ] n/m chunks") on a terminal when `show`,
/// and the callback that moves it.
pub(crate) fn chunk_progress(
    verb: &str,
    show: bool,
) -> Option<(
    ProgressBar,
    impl Fn(Progress) + Clone + Send + Sync + 'static,
)> {
    if !show || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} chunks {{elapsed}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let b = bar.clone();
    let update = move |p: Progress| {
        b.set_length(p.chunks_total as u64);
        b.set_position(p.chunks_done as u64);
    };
    Some((bar, update))
}
