//! `zarrbuf check`: find (and with `--repair`, repair) damaged chunks.

use super::output::{errln, outln};
use super::progress::{Shown, chunk_progress};
use zarrbuf::options::CheckOptions;
use zarrbuf::{Error, Result};

/// `zarrbuf check`: one line per finding (or one JSON document), an error when any is damage.
pub(crate) fn check(store: &str, path: &str, json: bool, opts: &CheckOptions) -> Result<()> {
    let repair = opts.repair;
    // A group is checked array by array.
    let (reports, group) = match check_one(store, path, json, opts) {
        Ok(report) => (vec![report], None),
        Err(Error::IsGroup { group, arrays }) => {
            let reports = arrays
                .iter()
                .map(|a| check_one(store, a, json, opts))
                .collect::<Result<Vec<_>>>()?;
            (reports, Some(group))
        }
        Err(e) => return Err(e),
    };
    if json {
        let all: Vec<serde_json::Value> = reports.iter().map(check_json).collect();
        let doc = match &group {
            Some(g) => serde_json::json!({
                "group": g, "clean": reports.iter().all(|r| r.is_clean()), "arrays": all,
            }),
            None => all.into_iter().next().unwrap_or_default(),
        };
        outln!("{doc}")?;
    }
    // A repair leaves what it may not touch (keys that could not be read): still damage.
    let damaged: usize = reports
        .iter()
        .flat_map(|r| &r.findings)
        .filter(|f| f.problem.is_damage() && !(repair && f.problem.is_repairable()))
        .count();
    if damaged == 0 {
        return Ok(());
    }
    Err(Error::Damaged {
        count: damaged,
        array: group.unwrap_or_else(|| reports.iter().map(|r| r.array.clone()).collect()),
    })
}

pub(crate) fn damage_count(report: &zarrbuf::check::CheckReport) -> usize {
    report
        .findings
        .iter()
        .filter(|f| f.problem.is_damage())
        .count()
}

/// Checks one array with a progress bar; prints its findings unless `json`.
pub(crate) fn check_one(
    store: &str,
    path: &str,
    json: bool,
    opts: &CheckOptions,
) -> Result<zarrbuf::check::CheckReport> {
    let mut opts = opts.clone();
    let bar = chunk_progress(
        "checking",
        if json {
            Shown::Nowhere
        } else {
            Shown::Terminal
        },
    );
    if let Some((_, update)) = &bar {
        opts = opts.with_progress(update.clone());
    }
    let bar = bar.map(|(b, _)| b);
    let report = zarrbuf::check::check_array(store, path, &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let report = report?;
    if !json {
        if !report.keys.sees_every_key() {
            errln!(
                "{}: the store does not list its keys, so every key of the chunk grid was \
                 fetched; keys outside the grid and unknown files cannot be seen this way",
                report.array
            );
        }
        for f in &report.findings {
            outln!("{f}")?;
        }
        for r in &report.repaired {
            outln!("repaired: {r}")?;
        }
        errln!(
            "checked {}: {} chunks ({} inner chunks), {} stored bytes; {} damaged",
            report.array,
            report.chunks_checked,
            report.inner_chunks_checked,
            report.stored_bytes,
            damage_count(&report)
        );
    }
    Ok(report)
}

/// The check report as JSON for scripts.
pub(crate) fn check_json(report: &zarrbuf::check::CheckReport) -> serde_json::Value {
    let findings: Vec<serde_json::Value> = report
        .findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "key": f.key, "inner": f.inner, "problem": f.problem.name(),
                "damage": f.problem.is_damage(), "detail": f.detail,
            })
        })
        .collect();
    serde_json::json!({
        "array": report.array,
        "clean": report.is_clean(),
        "chunks_checked": report.chunks_checked,
        "inner_chunks_checked": report.inner_chunks_checked,
        "stored_bytes": report.stored_bytes,
        "keys": report.keys.name(),
        "findings": findings,
        "repaired": report.repaired,
    })
}
