//! Shared test helpers: the fixture manifest, the prototypes available on this machine, and
//! (from `zarrbuf-test-support`, shared with zarrbuf-codecs' tests) how a test says it could
//! not run: [`skip`] prints `SKIPPED: <test>: <what> (<why>)` past libtest's capture, appends
//! it to `$ZARRBUF_SKIP_LOG`, and fails instead under the `ZARRBUF_REQUIRE_*` variables (see
//! tests/support/src/lib.rs, "Skips fail closed").
//!
//! All of `tests/it/` is one test binary, so its tests share one process: a test that must
//! see the process alone (its environment, its peak RSS, its stderr, an abort) re-runs itself
//! in a child process with [`run_own_test`] and [`own_test!`].
#![allow(dead_code)]

pub mod access_log;
pub mod s3;
pub mod servers;

use std::path::PathBuf;
use zarrbuf::{BufferPrototype, Device};
pub use zarrbuf_test_support::{Need, assert_ran_one_test, own_test, run_own_test, skip};

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
    Need::Gpu.required()
}

/// CPU always; pinned and CUDA when a GPU is present. Without one it [`skip`]s them: a
/// visible `SKIPPED:` line, or a panic under ZARRBUF_REQUIRE_GPU=1.
pub fn prototypes() -> Vec<(String, BufferPrototype)> {
    let mut protos = vec![("cpu".to_string(), BufferPrototype::cpu())];
    if Device::Cuda(0).is_available() {
        protos.push(("pinned:0".into(), BufferPrototype::pinned(0)));
        protos.push(("cuda:0".into(), BufferPrototype::cuda(0)));
    } else {
        let why = match zarrbuf::cuda::cuda_device_count() {
            // The error's first clause says what is missing; the rest is advice.
            Err(e) => format!(
                "no CUDA device: {}",
                e.to_string().split(';').next().unwrap_or("")
            ),
            Ok(n) => format!("no usable CUDA device ({n} reported)"),
        };
        skip(Need::Gpu, "pinned:0 and cuda:0 prototypes", &why);
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

/// Implements zarrs' `WritableStorageTraits` for a test store wrapper by forwarding every
/// call to its `inner` field (a store that writes), for wrappers that only instrument reads.
macro_rules! writable_through_inner {
    ($store:ty) => {
        impl zarrs::storage::WritableStorageTraits for $store {
            fn set(
                &self,
                key: &zarrs::storage::StoreKey,
                value: zarrs::storage::Bytes,
            ) -> Result<(), zarrs::storage::StorageError> {
                self.inner.set(key, value)
            }

            fn set_partial_many(
                &self,
                key: &zarrs::storage::StoreKey,
                offset_values: zarrs::storage::OffsetBytesIterator,
            ) -> Result<(), zarrs::storage::StorageError> {
                self.inner.set_partial_many(key, offset_values)
            }

            fn supports_set_partial(&self) -> bool {
                self.inner.supports_set_partial()
            }

            fn erase(
                &self,
                key: &zarrs::storage::StoreKey,
            ) -> Result<(), zarrs::storage::StorageError> {
                self.inner.erase(key)
            }

            fn erase_prefix(
                &self,
                prefix: &zarrs::storage::StorePrefix,
            ) -> Result<(), zarrs::storage::StorageError> {
                self.inner.erase_prefix(prefix)
            }
        }
    };
}
pub(crate) use writable_through_inner;
