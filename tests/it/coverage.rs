//! The coverage table in docs/coverage.md, generated from the fixtures: every codec
//! and data type that zarr-python 3.4 and numcodecs (and tensorstore, where it writes them)
//! put into the stores under `fixtures/data`, with what zarrbuf does with them.
//!
//! - Every fixture of `fixtures/manifest.json` is read by zarrbuf on every available
//!   prototype and through the staged pipeline, and must equal its `.npy` exactly (read ✔);
//!   then zarrbuf writes that array into a copy of the fixture's metadata, which must read
//!   back exactly (write ✔). The written stores stay under `target/tmp/written/coverage-*`
//!   with their `.npy`, so CI reads every one back with zarr-python.
//! - Every store of `fixtures/refused.json` must fail to open or read with an `Error` whose
//!   message contains the phrase the entry names (clear error); the table lists the message.
//! - A row's features come from the stores' own metadata (`.zarray` / `zarr.json`): the v2
//!   compressor and filters, the v3 codec chain (inside shards too), the data type.
//!
//! The test renders the table and compares it with docs/coverage.md's section between
//! `<!-- coverage-table:start -->` and `<!-- coverage-table:end -->`; it fails when they
//! differ (the rendered table is left in `target/tmp/coverage.md`).
//! `ZARRBUF_UPDATE_COVERAGE=1 cargo test --test it coverage::` rewrites the section instead.

use crate::common::{prototypes, walk};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer,
    options::{PipelineMode, ReadOptions, WriteOptions},
};

const START: &str = "<!-- coverage-table:start -->";
const END: &str = "<!-- coverage-table:end -->";

/// What a table row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Codec,
    DataType,
    /// v2 metadata that is neither (`"fill_value": null`, `"order": "F"`).
    Metadata,
}

#[derive(Default)]
struct Row {
    v2: BTreeSet<String>,
    v3: BTreeSet<String>,
    variants: BTreeSet<String>,
    writers: BTreeSet<String>,
    fixtures: BTreeSet<String>,
    /// Errors of the refused stores standing for this row.
    refused: BTreeMap<String, String>,
    /// Cargo features this row's refused stores read with (`zfp`).
    gated: BTreeSet<String>,
}

/// Whether zarrbuf was built with cargo feature `name` (the ones `refused.json` names).
fn feature_enabled(name: &str) -> bool {
    match name {
        "zfp" => cfg!(feature = "zfp"),
        other => panic!("refused.json names an unknown cargo feature {other:?}"),
    }
}

/// What one store contributes: `(kind, row name, v2 spelling, v3 spelling, variant)`.
type Feature = (Kind, String, Option<String>, Option<String>, Option<String>);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The row name of a codec: numcodecs' id (the v3 `numcodecs.` prefix dropped).
fn codec_row(name: &str) -> String {
    name.strip_prefix("numcodecs.").unwrap_or(name).to_string()
}

/// Codec features of a v3 chain, inner and index chains of shards included.
fn v3_codecs(codecs: &Value, out: &mut Vec<Feature>) {
    for c in codecs.as_array().into_iter().flatten() {
        let name = c["name"].as_str().expect("codec name");
        out.push((
            Kind::Codec,
            codec_row(name),
            None,
            Some(name.to_string()),
            None,
        ));
        if name == "sharding_indexed" {
            v3_codecs(&c["configuration"]["codecs"], out);
            v3_codecs(&c["configuration"]["index_codecs"], out);
        }
    }
}

/// The zarr v3 name of a v2 type string, and the spelling shown (units generalised).
fn v2_type(dtype: &Value, object_codec: Option<&str>) -> (String, String, Option<String>) {
    let Some(t) = dtype.as_str() else {
        return ("struct".into(), "[[name, type], ...]".into(), None);
    };
    let order = &t[..1];
    let code = &t[1..];
    let big = (order == ">").then(|| "big-endian".to_string());
    let simple = |n: &str| (n.to_string(), t.to_string(), big.clone());
    match code.chars().next() {
        Some('M') | Some('m') => {
            let name = if code.starts_with('M') {
                "numpy.datetime64"
            } else {
                "numpy.timedelta64"
            };
            let unit = code
                .split_once('[')
                .map_or("generic", |(_, u)| u.trim_end_matches(']'));
            let spelling = format!("{order}{}8[unit]", &code[..1]);
            (name.into(), spelling, Some(format!("unit {unit}")))
        }
        Some('S') => ("null_terminated_bytes".into(), "|S<n>".into(), None),
        Some('U') => ("fixed_length_utf32".into(), format!("{order}U<n>"), big),
        Some('V') => ("raw_bytes".into(), "|V<n>".into(), None),
        Some('O') => match object_codec {
            Some("vlen-utf8") => simple("string"),
            Some("vlen-bytes") => simple("variable_length_bytes"),
            _ => simple("object"),
        },
        _ => {
            let name = zarrbuf::DataType::from_numpy_code(code)
                .map(|d| d.to_string())
                .unwrap_or_else(|| panic!("unknown v2 dtype {t}"));
            (name, t.to_string(), big)
        }
    }
}

/// Every feature of the array at `store`/`path`, from its metadata.
fn features(store: &Path, path: &str) -> Vec<Feature> {
    let dir = if path.is_empty() {
        store.to_path_buf()
    } else {
        store.join(path)
    };
    let mut out = Vec::new();
    if dir.join("zarr.json").is_file() {
        let meta = read_json(&dir.join("zarr.json"));
        v3_codecs(&meta["codecs"], &mut out);
        let dt = &meta["data_type"];
        let (name, variant) = match dt {
            Value::String(s) => (s.clone(), None),
            _ => {
                let name = dt["name"].as_str().expect("data type name").to_string();
                let cfg = &dt["configuration"];
                let variant = cfg["unit"].as_str().map(|u| format!("unit {u}"));
                (name, variant)
            }
        };
        let big = serde_json::to_string(&meta["codecs"])
            .unwrap()
            .contains(r#""endian":"big""#);
        out.push((
            Kind::DataType,
            name.clone(),
            None,
            Some(name.clone()),
            variant,
        ));
        if big {
            out.push((Kind::DataType, name, None, None, Some("big-endian".into())));
        }
    } else {
        let meta = read_json(&dir.join(".zarray"));
        let filters: Vec<String> = meta["filters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| f["id"].as_str().expect("filter id").to_string())
            .collect();
        for id in filters
            .iter()
            .chain(meta["compressor"]["id"].as_str().map(String::from).iter())
        {
            out.push((Kind::Codec, codec_row(id), Some(id.clone()), None, None));
        }
        let object_codec = filters
            .iter()
            .find(|f| f.starts_with("vlen-"))
            .map(String::as_str);
        let (name, spelling, variant) = v2_type(&meta["dtype"], object_codec);
        out.push((Kind::DataType, name, Some(spelling), None, variant));
        if meta["fill_value"].is_null() {
            let spelling = Some("\"fill_value\": null".to_string());
            out.push((
                Kind::Metadata,
                "fill_value null".into(),
                spelling,
                None,
                None,
            ));
        }
        if meta["order"] == "F" {
            let spelling = Some("\"order\": \"F\"".to_string());
            out.push((Kind::Metadata, "order F".into(), spelling, None, None));
        }
    }
    out
}

/// Metadata-only copy of a fixture store.
fn empty_copy(src: &Path, dest: &Path) {
    if dest.exists() {
        std::fs::remove_dir_all(dest).unwrap();
    }
    for entry in walk(src) {
        let rel = entry.strip_prefix(src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if matches!(
            name.as_ref(),
            "zarr.json" | ".zarray" | ".zattrs" | ".zgroup"
        ) {
            let to = dest.join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&entry, &to).unwrap();
        }
    }
}

fn same(got: &NDBuffer, want: &NDBuffer) -> bool {
    got.shape() == want.shape() && got.to_native_bytes().unwrap() == want.to_native_bytes().unwrap()
}

/// Reads `store` on every prototype and staged; panics unless each equals `want`.
fn check_reads(name: &str, store: &str, path: &str, want: &NDBuffer) {
    let array = zarrbuf::open(store, path).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (pname, proto) in prototypes() {
        let got = array
            .read_all(&proto)
            .unwrap_or_else(|e| panic!("{name} on {pname}: {e}"));
        assert!(
            same(&got, want),
            "{name}: read on {pname} differs from the .npy"
        );
    }
    let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
    let staged = ReadOptions::default().with_mode(PipelineMode::Staged);
    let got = array
        .read_opt(&all, &BufferPrototype::cpu(), &staged)
        .unwrap_or_else(|e| panic!("{name} staged: {e}"));
    assert!(
        same(&got, want),
        "{name}: staged read differs from the .npy"
    );
}

/// Writes `want` into a metadata copy of the fixture and reads it back; the store stays
/// under target/tmp/written for CI's zarr-python read-back. The work happens in a directory
/// of this process, moved into place at the end, so test runs side by side do not clobber
/// each other's stores.
fn check_write(name: &str, store: &Path, path: &str, want: &NDBuffer) {
    let written = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("written");
    std::fs::create_dir_all(&written).unwrap();
    let work = written.join(format!(".work-{}-{name}.zarr", std::process::id()));
    empty_copy(store, &work);
    let array =
        zarrbuf::open(work.to_str().unwrap(), path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
    array
        .write_opt(&all, want, &WriteOptions::default())
        .unwrap_or_else(|e| panic!("{name}: zarrbuf cannot write it: {e}"));
    let back = array.read_all(&BufferPrototype::cpu()).unwrap();
    assert!(
        same(&back, want),
        "{name}: what zarrbuf wrote reads back differently"
    );
    let dest = written.join(format!("coverage-{name}.zarr"));
    zarrbuf::npy::write(&work.with_extension("npy"), want).unwrap();
    std::fs::write(work.with_extension("path"), path).unwrap();
    for attempt in 0.. {
        let _ = std::fs::remove_dir_all(&dest);
        match std::fs::rename(&work, &dest) {
            Ok(()) => break,
            Err(e) if attempt < 10 => eprintln!("{name}: retrying the move into place ({e})"),
            Err(e) => panic!("{name}: cannot move {} into place: {e}", work.display()),
        }
    }
    for ext in ["npy", "path"] {
        std::fs::rename(work.with_extension(ext), dest.with_extension(ext)).unwrap();
    }
}

fn relative(p: &str) -> String {
    // Stores are opened by their path relative to the package root, so error messages (which
    // name the store) are the same on every machine.
    format!("fixtures/{p}")
}

/// One line of an error message, without the store's location prefix.
fn message(e: &zarrbuf::Error) -> String {
    e.to_string().replace('\n', " ")
}

fn build_rows() -> BTreeMap<(Kind, String), Row> {
    let mut rows: BTreeMap<(Kind, String), Row> = BTreeMap::new();
    let manifest = read_json(&root().join("fixtures/manifest.json"));
    for f in manifest.as_array().expect("manifest is a list") {
        let name = f["name"].as_str().unwrap();
        let store = relative(f["store"].as_str().unwrap());
        let path = f["path"].as_str().unwrap_or("");
        let want = zarrbuf::npy::read(&root().join(relative(f["npy"].as_str().unwrap())))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        check_reads(name, &store, path, &want);
        check_write(name, Path::new(&store), path, &want);
        for (kind, row, v2, v3, variant) in features(Path::new(&store), path) {
            let r = rows.entry((kind, row)).or_default();
            r.v2.extend(v2);
            r.v3.extend(v3);
            r.variants.extend(variant);
            r.writers.insert(f["writer"].as_str().unwrap().to_string());
            r.fixtures.insert(name.to_string());
        }
    }
    let refused = read_json(&root().join("fixtures/refused.json"));
    for f in refused.as_array().expect("refused.json is a list") {
        let name = f["name"].as_str().unwrap();
        let store = relative(f["store"].as_str().unwrap());
        let path = f["path"].as_str().unwrap_or("");
        let feature = f["feature"].as_str();
        let reads_with_feature = feature.is_some_and(feature_enabled);
        if reads_with_feature {
            let want =
                zarrbuf::npy::read(&root().join(relative(f["npy"].as_str().unwrap()))).unwrap();
            check_reads(name, &store, path, &want);
            check_write(name, Path::new(&store), path, &want);
        } else {
            let outcome =
                zarrbuf::open(&store, path).and_then(|a| a.read_all(&BufferPrototype::cpu()));
            let e = match outcome {
                Ok(_) => panic!("{name}: zarrbuf read a store it is expected to refuse"),
                Err(e) => e,
            };
            let phrase = f["error"].as_str().unwrap();
            let text = message(&e);
            assert!(
                text.contains(phrase),
                "{name}: the error does not say {phrase:?}: {text}"
            );
        }
        // Feature-gated stores render the same whichever way zarrbuf was built.
        let error = match feature {
            Some(_) => None,
            None => Some(
                zarrbuf::open(&store, path)
                    .and_then(|a| a.read_all(&BufferPrototype::cpu()))
                    .err()
                    .map(|e| message(&e))
                    .expect("checked above"),
            ),
        };
        let feats = features(Path::new(&store), path);
        for label in f["rows"].as_array().unwrap() {
            let label = label.as_str().unwrap();
            let (kind, row) = match label.split_once(':') {
                Some(("codec", r)) => (Kind::Codec, r.to_string()),
                Some(("dtype", r)) => (Kind::DataType, r.to_string()),
                _ => panic!("{name}: bad row label {label}"),
            };
            let r = rows.entry((kind, row.clone())).or_default();
            // Spellings from the metadata of the features this row names.
            for (k, frow, v2, v3, variant) in &feats {
                if *k == kind && (*frow == row || row.starts_with(&format!("{frow} "))) {
                    r.v2.extend(v2.clone());
                    r.v3.extend(v3.clone());
                    r.variants.extend(variant.clone());
                }
            }
            r.writers.insert(f["writer"].as_str().unwrap().to_string());
            r.fixtures.insert(name.to_string());
            if let Some(e) = &error {
                r.refused.insert(name.to_string(), e.clone());
            }
            r.gated.extend(feature.map(String::from));
        }
    }
    rows
}

fn cell(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "—".into()
    } else {
        set.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Variants in a stable, readable order (numpy's unit order for time units).
fn variants(set: &BTreeSet<String>) -> String {
    const UNITS: [&str; 14] = [
        "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as", "generic",
    ];
    let units: Vec<&str> = UNITS
        .iter()
        .copied()
        .filter(|u| set.contains(&format!("unit {u}")))
        .collect();
    let mut parts = Vec::new();
    if !units.is_empty() {
        parts.push(format!("units {}", units.join(" ")));
    }
    parts.extend(set.iter().filter(|v| !v.starts_with("unit ")).cloned());
    parts.join("; ")
}

fn render(rows: &BTreeMap<(Kind, String), Row>) -> String {
    let mut out = String::new();
    let (mut reads, mut writes, mut errors, mut gated) = (0, 0, 0, 0);
    let mut notes = Vec::new();
    let mut gated_fixtures = BTreeSet::new();
    out.push_str(
        "| kind | name | zarr v2 | zarr v3 | variants | read | write | written by | fixtures |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for ((kind, name), r) in rows {
        let kind = match kind {
            Kind::Codec => "codec",
            Kind::DataType => "data type",
            Kind::Metadata => "v2 metadata",
        };
        let with_feature = r
            .gated
            .iter()
            .map(|f| format!("✔ with feature `{f}` ²"))
            .collect::<Vec<_>>()
            .join(", ");
        let (read, write) = if !r.refused.is_empty() {
            errors += 1;
            notes.push((name.clone(), r.refused.clone()));
            ("clear error ¹".to_string(), "—".to_string())
        } else if !r.gated.is_empty() {
            gated += 1;
            gated_fixtures.extend(r.fixtures.iter().cloned());
            (with_feature.clone(), with_feature)
        } else {
            reads += 1;
            writes += 1;
            ("✔".to_string(), "✔".to_string())
        };
        out.push_str(&format!(
            "| {kind} | {name} | {} | {} | {} | {read} | {write} | {} | {} |\n",
            cell(&r.v2),
            cell(&r.v3),
            variants(&r.variants),
            r.writers.iter().cloned().collect::<Vec<_>>().join(", "),
            r.fixtures.len(),
        ));
    }
    out.push_str(&format!(
        "\n{} rows: {reads} read ✔, {writes} write ✔, {gated} read and write with a cargo \
         feature, {errors} clear error.\n",
        rows.len()
    ));
    let fx: Vec<String> = gated_fixtures.iter().map(|f| format!("`{f}`")).collect();
    out.push_str(&format!(
        "\n² Built with that feature, zarrbuf reads and writes these exactly ({}; \
         `cargo test --test it coverage:: --features zfp` checks it); built without it (the default), \
         they fail with an error that names the feature.\n",
        fx.join(", ")
    ));
    out.push_str(
        "\n¹ The error zarrbuf gives for each store it refuses (`fixtures/refused.json`):\n\n",
    );
    let mut by_fixture: BTreeMap<&String, (Vec<&String>, &String)> = BTreeMap::new();
    for (row, errs) in &notes {
        for (fixture, e) in errs {
            by_fixture
                .entry(fixture)
                .or_insert((Vec::new(), e))
                .0
                .push(row);
        }
    }
    for (fixture, (rows_of, e)) in by_fixture {
        let names: Vec<&str> = rows_of.iter().map(|r| r.as_str()).collect();
        out.push_str(&format!("- `{fixture}` ({}): {e}\n", names.join(", ")));
    }
    out
}

#[test]
fn coverage_table_is_what_the_fixtures_show() {
    let table = render(&build_rows());
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("coverage.md");
    std::fs::write(&target, &table).unwrap();
    println!("{table}");
    let doc_path = root().join("docs").join("coverage.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let (Some(a), Some(b)) = (doc.find(START), doc.find(END)) else {
        panic!("docs/coverage.md has no {START} ... {END} section");
    };
    let current = doc[a + START.len()..b].trim();
    if current == table.trim() {
        return;
    }
    if std::env::var("ZARRBUF_UPDATE_COVERAGE").is_ok_and(|v| v == "1") {
        let updated = format!("{}{START}\n{}\n{}", &doc[..a], table.trim(), &doc[b..]);
        std::fs::write(&doc_path, updated).unwrap();
        return;
    }
    panic!(
        "docs/coverage.md's coverage table differs from what the fixtures show (rendered into {}); \
         run `ZARRBUF_UPDATE_COVERAGE=1 cargo test --test it coverage::` to rewrite it",
        target.display()
    );
}
