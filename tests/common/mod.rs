//! Shared test helpers: the fixture manifest and the prototypes available on this machine.
#![allow(dead_code)]

use std::path::PathBuf;
use zarrbuf::{BufferPrototype, Device};

/// One entry of fixtures/manifest.json.
pub struct Fixture {
    pub name: String,
    pub store: String,
    pub path: String,
    pub npy: String,
}

impl Fixture {
    pub fn store_path(&self) -> String {
        root().join(&self.store).to_string_lossy().into_owned()
    }
    pub fn npy_path(&self) -> PathBuf {
        root().join(&self.npy)
    }
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Reads the manifest with a tiny field extractor (the manifest is written by generate.py).
pub fn fixtures() -> Vec<Fixture> {
    let text =
        std::fs::read_to_string(root().join("manifest.json")).expect("fixtures/manifest.json");
    let value: serde_json::Value = serde_json::from_str(&text).expect("manifest is JSON");
    let list = value
        .as_array()
        .cloned()
        .or_else(|| value.get("fixtures").and_then(|v| v.as_array()).cloned())
        .expect("a list of fixtures");
    list.iter()
        .map(|e| Fixture {
            name: e["name"].as_str().unwrap().to_string(),
            store: e["store"].as_str().unwrap().to_string(),
            path: e["path"].as_str().unwrap_or("").to_string(),
            npy: e["npy"].as_str().unwrap().to_string(),
        })
        .collect()
}

/// The README quick start's array (fixtures/data/demo_layers.zarr, 256 MiB decoded), as
/// fixtures/data/demo_layers.json describes it.
pub struct Demo {
    pub store: String,
    pub shape: Vec<u64>,
    pub plane_values: Vec<f32>,
    pub crc32: u32,
}

pub fn demo() -> Demo {
    let text = std::fs::read_to_string(root().join("data/demo_layers.json"))
        .expect("fixtures/data/demo_layers.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("demo description is JSON");
    Demo {
        store: root()
            .join(v["store"].as_str().unwrap())
            .to_string_lossy()
            .into_owned(),
        shape: v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect(),
        // Each value is a float32 written exactly as a JSON double.
        plane_values: v["plane_values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect(),
        crc32: v["crc32"].as_u64().unwrap() as u32,
    }
}

/// Whether GPU tests must run (ZARRBUF_REQUIRE_GPU=1).
pub fn gpu_required() -> bool {
    std::env::var("ZARRBUF_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// CPU always; pinned and CUDA when a GPU is present. Prints a line when skipping them, and
/// panics instead when ZARRBUF_REQUIRE_GPU=1.
pub fn prototypes() -> Vec<(String, BufferPrototype)> {
    let mut protos = vec![("cpu".to_string(), BufferPrototype::cpu())];
    if Device::Cuda(0).is_available() {
        protos.push(("pinned:0".into(), BufferPrototype::pinned(0)));
        protos.push(("cuda:0".into(), BufferPrototype::cuda(0)));
    } else if gpu_required() {
        panic!(
            "ZARRBUF_REQUIRE_GPU=1 but no CUDA device: {:?}",
            zarrbuf::cuda_device_count().err()
        );
    } else {
        println!("skipping pinned and CUDA prototypes: no CUDA device on this machine");
    }
    protos
}

/// Every file under `dir`, in sorted order.
pub fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for p in entries {
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
