//! Progress bars on a terminal (indicatif) and the callbacks that move them.

use super::output::errln;
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

/// How often a progress line is printed where stderr is not a terminal.
const LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(3);

/// Where [`chunk_progress`] shows the chunks done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Nowhere (`check --json`: stderr stays clean for the JSON's readers).
    Nowhere,
    /// A bar where stderr is a terminal, else nothing.
    Terminal,
    /// A bar where stderr is a terminal, else a line every few seconds (a copy, whose
    /// silence could pass for a hang in a log).
    TerminalOrLines,
}

/// A progress bar of chunks done ("{verb} [===  ] n/m chunks") on a terminal, and the
/// callback that moves it, where `shown` says; where stderr is not a terminal and `shown`
/// is [`Shown::TerminalOrLines`], the bar is hidden and the callback prints
/// "{verb}: n/m chunks" at most every few seconds instead.
pub(crate) fn chunk_progress(
    verb: &str,
    shown: Shown,
) -> Option<(
    ProgressBar,
    impl Fn(Progress) + Clone + Send + Sync + 'static,
)> {
    if shown == Shown::Nowhere {
        return None;
    }
    let terminal = std::io::stderr().is_terminal();
    if !terminal && shown != Shown::TerminalOrLines {
        return None;
    }
    let bar = if terminal {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} chunks {{elapsed}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let b = bar.clone();
    let verb = verb.to_string();
    let last = std::sync::Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
    let update = move |p: Progress| {
        if terminal {
            b.set_length(p.chunks_total as u64);
            b.set_position(p.chunks_done as u64);
            return;
        }
        let mut last = last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.elapsed() >= LINE_EVERY {
            *last = std::time::Instant::now();
            errln!("{verb}: {}/{} chunks", p.chunks_done, p.chunks_total);
        }
    };
    Some((bar, update))
}
