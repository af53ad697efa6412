//! No import cycles between the files of `src/`, and no import running up the layers
//! (ARCHITECTURE.md: each layer imports only from the layers below it, [`LAYERS`] lists them,
//! and no two files import each other, directly or round a loop).
//!
//! How it reads the code (with `syn`, so comments, strings and doc tests are never mistaken
//! for code):
//!
//! - The module tree is followed from `src/lib.rs` through its `mod` declarations (files and
//!   inline modules). `src/main.rs` is another crate that sees only the public API, so it
//!   is not part of the graph.
//! - File A *imports* file B when A names an item defined in B: in a private `use` (through
//!   `crate::`, `super::`, `self::` or a child module), or in a path in its code or in a
//!   macro's arguments (`crate::zarr::label(..)`, `super::field(..)`).
//! - Re-exports are followed to where the item is defined: `crate::pipeline::Cancel` is
//!   `pipeline/cancel.rs`, not `pipeline/mod.rs`. A `pub`/`pub(crate)` `use` only re-exports,
//!   so it makes no edge by itself (a `mod.rs` that re-exports its children does not depend
//!   on them); a `use` of a module makes none either, the paths through it do. The layer
//!   check reads re-exports as well: a layer may not hand out an item of a layer above it.
//! - Items under `#[cfg(test)]` are left out: a unit test may reach across the layers to
//!   build its case.
//!
//! A cycle fails the test with the files on it and the paths that make each of its edges.
//! It is the module `import_cycles::` of the test binary `it` (how to run one module:
//! docs/testing.md); `ZARRBUF_PRINT_IMPORTS=1` with `-- --nocapture` prints the whole file
//! graph.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

type ModId = usize;

/// One module: the file that holds it, its parent, its child modules and the names its
/// `use` items bring in.
struct Module {
    file: String,
    parent: Option<ModId>,
    children: BTreeMap<String, ModId>,
    /// Name brought in by a `use` -> the path it names, as written.
    imports: BTreeMap<String, Vec<String>>,
}

/// A path named in the code of module `from`, as written, and whether it is a re-export.
struct Reference {
    from: ModId,
    path: Vec<String>,
    reexport: bool,
    is_use: bool,
}

/// What a path names: a module, or an item defined in a file.
#[derive(Debug, PartialEq)]
enum Target {
    Module(ModId),
    Item(String),
}

#[derive(Default)]
struct Crate {
    modules: Vec<Module>,
    references: Vec<Reference>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                let t = l.tokens.to_string().replace(' ', "");
                t == "test" || t.starts_with("all(test")
            })
    })
}

/// The file a `#[path = "..."]` attribute names, if there is one.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Every leaf of a `use` tree: (name it binds, path it names); globs bind `*`.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                // `use a::b::{self}` binds `b`.
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((name, path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// `crate`/`super`/`self` paths inside a macro's tokens (`format!("{}", crate::x::y())`).
fn macro_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => macro_paths(g.stream(), out),
            TokenTree::Ident(id)
                if ["crate", "super", "self"].contains(&id.to_string().as_str()) =>
            {
                let mut path = vec![id.to_string()];
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    path.push(next.to_string());
                    i += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Collects the paths of one module's code (not its `use` items or inline modules).
struct PathCollector<'a> {
    module: ModId,
    out: &'a mut Vec<Reference>,
}

impl<'ast> Visit<'ast> for PathCollector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) || matches!(item, syn::Item::Mod(_)) {
            return;
        }
        if let syn::Item::Use(u) = item {
            // Module-level and function-level `use`s alike.
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            for (_, path) in leaves {
                self.out.push(Reference {
                    from: self.module,
                    path,
                    reexport: !matches!(u.vis, syn::Visibility::Inherited),
                    is_use: true,
                });
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            self.out.push(Reference {
                from: self.module,
                path: path.segments.iter().map(|s| s.ident.to_string()).collect(),
                reexport: false,
                is_use: false,
            });
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        let mut found = Vec::new();
        macro_paths(mac.tokens.clone(), &mut found);
        for path in found {
            self.out.push(Reference {
                from: self.module,
                path,
                reexport: false,
                is_use: false,
            });
        }
    }
}

impl Crate {
    fn add_module(&mut self, file: &str, parent: Option<ModId>, name: Option<&str>) -> ModId {
        let id = self.modules.len();
        self.modules.push(Module {
            file: file.to_string(),
            parent,
            children: BTreeMap::new(),
            imports: BTreeMap::new(),
        });
        if let (Some(p), Some(n)) = (parent, name) {
            self.modules[p].children.insert(n.to_string(), id);
        }
        id
    }

    /// Reads the module `id`'s items; `dir` is where its `mod x;` files are.
    fn read_items(&mut self, root: &Path, id: ModId, items: &[syn::Item], dir: &Path) {
        for item in items {
            if is_cfg_test(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    if let Some((_, inline)) = &m.content {
                        let file = self.modules[id].file.clone();
                        let child = self.add_module(&file, Some(id), Some(&name));
                        self.read_items(root, child, inline, &dir.join(&name));
                    } else if let Some(path) = path_attr(&m.attrs) {
                        // `#[path = "x.rs"] mod y;`: the file is named, relative to `dir`,
                        // and its own `mod` files are beside it (as for a `mod.rs`).
                        let file = dir.join(path);
                        let child_dir = file.parent().unwrap_or(dir).to_path_buf();
                        self.read_file(root, &file, Some((id, &name)), &child_dir);
                    } else {
                        let flat = dir.join(format!("{name}.rs"));
                        let (file, child_dir) = if root.join(&flat).exists() {
                            (flat, dir.join(&name))
                        } else {
                            (dir.join(&name).join("mod.rs"), dir.join(&name))
                        };
                        self.read_file(root, &file, Some((id, &name)), &child_dir);
                    }
                }
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for (name, path) in leaves {
                        if name != "*" && name != "_" {
                            self.modules[id].imports.insert(name, path);
                        }
                    }
                }
                _ => {}
            }
        }
        let mut collector = PathCollector {
            module: id,
            out: &mut self.references,
        };
        for item in items {
            collector.visit_item(item);
        }
    }

    fn read_file(&mut self, root: &Path, file: &Path, parent: Option<(ModId, &str)>, dir: &Path) {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file.to_string_lossy().into_owned();
        let id = self.add_module(&name, parent.map(|p| p.0), parent.map(|p| p.1));
        self.read_items(root, id, &parsed.items, dir);
    }

    /// What a path written in module `from` names: a module, or an item and the file that
    /// defines it; `None` for paths into other crates.
    fn start(&self, from: ModId, path: &[String], depth: usize) -> Option<Target> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => self.walk(0, rest, depth),
            "self" => self.walk(from, rest, depth),
            "super" => self.walk(self.modules[from].parent?, rest, depth),
            _ if self.modules[from].children.contains_key(first) => self.walk(from, path, depth),
            _ => {
                let target = self.modules[from].imports.get(first)?;
                if depth > 32 || target == path {
                    return None;
                }
                self.start(from, &[target.as_slice(), rest].concat(), depth + 1)
            }
        }
    }

    /// Follows `path` down from module `at`: child modules, then re-exports.
    fn walk(&self, at: ModId, path: &[String], depth: usize) -> Option<Target> {
        let Some((first, rest)) = path.split_first() else {
            return Some(Target::Module(at));
        };
        if first == "super" {
            return self.walk(self.modules[at].parent?, rest, depth);
        }
        if let Some(&child) = self.modules[at].children.get(first) {
            return self.walk(child, rest, depth);
        }
        if let Some(target) = self.modules[at].imports.get(first) {
            if depth > 32 {
                return None;
            }
            return self.start(at, &[target.as_slice(), rest].concat(), depth + 1);
        }
        // Defined here (a function, a type, an enum's variant, a macro).
        Some(Target::Item(self.modules[at].file.clone()))
    }
}

/// The file graph: importing file -> imported file -> the paths that make the edge.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn file_graph(src_root: &Path) -> Graph {
    edges(src_root, false)
}

/// The re-exports: the file of a `pub`/`pub(crate)` `use` -> the file that defines what it
/// names. A re-export is no import (a `mod.rs` re-exporting its children depends on none of
/// them), so [`file_graph`] leaves them out; but a layer that re-exports an item of a layer
/// above it hands that item out from below (as `store/` once re-exported `zarr/`'s
/// `open_store`), so the layer check reads them too.
fn reexport_graph(src_root: &Path) -> Graph {
    edges(src_root, true)
}

/// The import edges, or with `reexports` the re-export edges, between the files of a crate.
fn edges(src_root: &Path, reexports: bool) -> Graph {
    let mut krate = Crate::default();
    krate.read_file(src_root, Path::new("src/lib.rs"), None, Path::new("src"));
    let mut graph = Graph::new();
    for m in &krate.modules {
        graph.entry(m.file.clone()).or_default();
    }
    for r in &krate.references {
        if r.reexport != reexports {
            continue;
        }
        let first = r.path[0].as_str();
        let local = ["crate", "super", "self"].contains(&first)
            || krate.modules[r.from].children.contains_key(first)
            || krate.modules[r.from].imports.contains_key(first);
        if !local {
            continue;
        }
        // Code naming an imported item (`Error::Io` after `use crate::error::Error`) is the
        // `use`'s edge; only paths through an imported module (`zarr::label(..)` after
        // `use crate::zarr`) are followed on their own.
        let through_import = !r.is_use && krate.modules[r.from].imports.contains_key(first);
        if through_import
            && !matches!(
                krate.start(r.from, &r.path[..1], 0),
                Some(Target::Module(_))
            )
        {
            continue;
        }
        let Some(Target::Item(to)) = krate.start(r.from, &r.path, 0) else {
            continue;
        };
        let from = &krate.modules[r.from].file;
        if *from != to {
            let how = format!(
                "{}{}",
                if r.is_use { "use " } else { "" },
                r.path.join("::")
            );
            graph
                .entry(from.clone())
                .or_default()
                .entry(to)
                .or_default()
                .insert(how);
        }
    }
    graph
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph[v].keys() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.found
}

fn describe(graph: &Graph, component: &[String]) -> String {
    let mut text = format!("import cycle between {} files:\n", component.len());
    for from in component {
        for (to, how) in &graph[from] {
            if component.contains(to) {
                let how: Vec<&str> = how.iter().map(String::as_str).collect();
                text += &format!("  {from} -> {to} ({})\n", how.join(", "));
            }
        }
    }
    text
}

#[test]
fn src_has_no_import_cycles() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let graph = file_graph(&root);
    if std::env::var_os("ZARRBUF_PRINT_IMPORTS").is_some() {
        for (from, tos) in &graph {
            for (to, how) in tos {
                println!(
                    "{from} -> {to} ({})",
                    how.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
    }
    assert!(
        graph.len() > 50,
        "only {} files found under src/",
        graph.len()
    );
    let found = cycles(&graph);
    let text: Vec<String> = found.iter().map(|c| describe(&graph, c)).collect();
    assert!(found.is_empty(), "{}", text.join("\n"));
}

/// The workspace's other crates with a module tree of their own (the Python package's
/// extension and the kernels crate): no import cycles between their files either.
#[test]
fn the_other_crates_have_no_import_cycles() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (krate, at_least) in [("python", 9), ("codecs", 10)] {
        let graph = file_graph(&root.join(krate));
        assert!(
            graph.len() >= at_least,
            "only {} files found under {krate}/src/",
            graph.len()
        );
        let found = cycles(&graph);
        let text: Vec<String> = found.iter().map(|c| describe(&graph, c)).collect();
        assert!(found.is_empty(), "{krate}/: {}", text.join("\n"));
    }
}

/// The layers of ARCHITECTURE.md, bottom to top: a file's layer is the first part of its path
/// under `src/`. A file may import from its own layer's files and from lower layers only;
/// layers of one rank (`buffer` and `zarr`; `pipeline` and `check`) sit side by side and
/// import nothing from each other.
const LAYERS: &[&[&str]] = &[
    &["place", "process_local", "stage_timings"],
    &["errors"],
    &[
        "data_types",
        "option_types",
        "memory_limit",
        "thread_pool",
        "compression_formats",
    ],
    &["stores"],
    &["driver"],
    &["memory"],
    &["device"],
    &["buffer", "zarr"],
    &["cache"],
    &["pipeline"],
    &["checking"],
    &["api"],
    &["lib"],
];

/// The two towers the middle layers form (ARCHITECTURE.md): the format (where bytes live and
/// what they mean) and the memory (where buffers live and what runs on them). Neither imports
/// the other; they meet above them, in `cache` and `pipeline`.
const TOWERS: [&[&str]; 2] = [
    &["stores", "zarr"],
    &["driver", "memory", "device", "buffer"],
];

fn tower_of(layer: &str) -> Option<usize> {
    TOWERS.iter().position(|t| t.contains(&layer))
}

/// The layer of a file (`src/zarr/plugins/codecs/delta.rs` -> `zarr`) and its rank in [`LAYERS`].
fn layer_of(file: &str) -> (String, usize) {
    let rest = file.strip_prefix("src/").unwrap_or(file);
    let first = rest.split('/').next().unwrap_or(rest);
    let name = first.strip_suffix(".rs").unwrap_or(first).to_string();
    let rank = LAYERS
        .iter()
        .position(|layer| layer.contains(&name.as_str()))
        .unwrap_or_else(|| panic!("{file}: its layer '{name}' is not in LAYERS (ARCHITECTURE.md)"));
    (name, rank)
}

/// The imports that run the wrong way: from a layer up to a higher one, or across to a layer
/// of the same rank.
fn layer_violations(graph: &Graph) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, tos) in graph {
        let (from_layer, from_rank) = layer_of(from);
        for (to, how) in tos {
            let (to_layer, to_rank) = layer_of(to);
            let across_towers = matches!(
                (tower_of(&from_layer), tower_of(&to_layer)),
                (Some(a), Some(b)) if a != b
            );
            if to_rank > from_rank
                || (to_rank == from_rank && to_layer != from_layer)
                || across_towers
            {
                let how: Vec<&str> = how.iter().map(String::as_str).collect();
                wrong.push(format!(
                    "{from} ({from_layer}) imports {to} ({to_layer}): {}",
                    how.join(", ")
                ));
            }
        }
    }
    wrong
}

#[test]
fn src_imports_run_down_the_layers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = layer_violations(&file_graph(&root));
    wrong.extend(
        layer_violations(&reexport_graph(&root))
            .into_iter()
            .map(|w| format!("re-export: {w}")),
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Writes `text` to `path` under `dir` (a scratch crate of the tests below), making its
/// folders.
fn write_at(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A lower layer re-exporting a higher one's item is a layer violation, though no import.
#[test]
fn the_layer_check_reads_reexports() {
    let dir = std::env::temp_dir().join(format!("zarrbuf-import-reexports-{}", std::process::id()));
    let write = |path: &str, text: &str| write_at(&dir, path, text);
    write(
        "src/lib.rs",
        "mod stores;\nmod zarr;\npub mod store { pub use crate::zarr::open_store; }\n",
    );
    write("src/zarr/mod.rs", "mod open;\npub use open::open_store;\n");
    write("src/zarr/open.rs", "pub fn open_store() {}\n");
    write("src/stores/mod.rs", "pub struct Location;\n");
    assert!(layer_violations(&file_graph(&dir)).is_empty());
    assert!(layer_violations(&reexport_graph(&dir)).is_empty());
    write(
        "src/stores/mod.rs",
        "pub struct Location;\npub use crate::zarr::open_store;\n",
    );
    assert!(file_graph(&dir)["src/stores/mod.rs"].is_empty());
    let wrong = layer_violations(&reexport_graph(&dir));
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].starts_with("src/stores/mod.rs (stores) imports src/zarr/open.rs (zarr)"),
        "{wrong:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_layer_check_finds_an_import_up_or_across() {
    let edge = |from: &str, to: &str| {
        let mut g = Graph::new();
        g.entry(from.to_string())
            .or_default()
            .entry(to.to_string())
            .or_default()
            .insert("use crate::x".to_string());
        layer_violations(&g)
    };
    assert!(edge("src/memory/pinned.rs", "src/driver.rs").is_empty());
    assert!(edge("src/zarr/array/data_type.rs", "src/zarr/plan/units.rs").is_empty());
    assert_eq!(edge("src/memory/pinned.rs", "src/device/ops.rs").len(), 1);
    assert_eq!(
        edge("src/buffer/npy.rs", "src/zarr/array/data_type.rs").len(),
        1
    );
    assert_eq!(edge("src/errors.rs", "src/data_types.rs").len(), 1);
    assert!(edge("src/zarr/open/open_store.rs", "src/stores/open.rs").is_empty());
    assert_eq!(
        edge("src/stores/open.rs", "src/zarr/array/data_type.rs").len(),
        1
    );
    // The format and the memory towers: down, but never across.
    assert_eq!(
        edge("src/zarr/framing/mod.rs", "src/device/batch.rs").len(),
        1
    );
    assert_eq!(edge("src/device/ops.rs", "src/stores/open.rs").len(), 1);
    assert!(edge("src/zarr/framing/mod.rs", "src/compression_formats.rs").is_empty());
    // A file in a folder of pipeline/ is of the layer `pipeline`: down is allowed, up is not.
    assert!(edge("src/pipeline/fetch/fetch_unit.rs", "src/zarr/plan/units.rs").is_empty());
    assert!(edge("src/pipeline/fetch/fetch_unit.rs", "src/device/ops.rs").is_empty());
    assert!(
        edge(
            "src/pipeline/read/read_driver.rs",
            "src/pipeline/fetch/fetch_unit.rs"
        )
        .is_empty()
    );
    assert_eq!(
        edge("src/pipeline/read/read_driver.rs", "src/api/read.rs").len(),
        1
    );
}

/// The check itself finds a cycle, follows re-exports and `super::`, and skips test code.
#[test]
fn the_check_finds_a_cycle_and_follows_reexports() {
    let dir = std::env::temp_dir().join(format!("zarrbuf-import-cycles-{}", std::process::id()));
    let write = |path: &str, text: &str| write_at(&dir, path, text);
    write("src/lib.rs", "mod a; mod b; mod p;\npub use a::A;\n");
    write("src/a.rs", "use crate::p::Deep;\npub struct A;\n");
    // `p/mod.rs` re-exports `Deep` from `p/deep.rs`, which uses `super::helper` (defined in
    // mod.rs): neither is an edge into a cycle with mod.rs.
    write(
        "src/p/mod.rs",
        "mod deep;\npub(crate) use deep::Deep;\npub(crate) fn helper() {}\n",
    );
    write(
        "src/p/deep.rs",
        "pub struct Deep;\nfn f() { super::helper(); }\n#[cfg(test)]\nmod tests { use crate::b::B; }\n",
    );
    write("src/b.rs", "pub struct B;\n");
    let graph = file_graph(&dir);
    assert!(graph["src/a.rs"].contains_key("src/p/deep.rs"), "{graph:?}");
    assert!(
        graph["src/p/deep.rs"].contains_key("src/p/mod.rs"),
        "{graph:?}"
    );
    assert!(cycles(&graph).is_empty(), "{graph:?}");
    // Now b.rs and a.rs import each other, once in a macro's arguments.
    write(
        "src/b.rs",
        "pub struct B;\nfn g() { let _ = format!(\"{:?}\", crate::a::A); }\n",
    );
    write(
        "src/a.rs",
        "use crate::p::Deep;\nuse crate::b::B;\npub struct A;\n",
    );
    let graph = file_graph(&dir);
    assert_eq!(
        cycles(&graph),
        vec![vec!["src/a.rs".to_string(), "src/b.rs".to_string()]]
    );
    std::fs::remove_dir_all(&dir).ok();
}
