//! `zarrbuf bench-write`: zarrs' writer, `write_all` and the staged pipeline timed against
//! each other on the same data.

use super::args::BenchWriteCli;
use super::output::outln;
use super::parse::prototype;
use std::ops::Range;
use std::time::Instant;
use zarrbuf::options::{Compress, Durability};
use zarrbuf::{Error, NDBuffer, Result};

/// Smooth float32 data with noise in the low bits (compresses like measurements, partly).
pub(crate) fn bench_data(shape: &[usize]) -> Result<NDBuffer> {
    let n: usize = shape.iter().product();
    let (ny, nx) = (shape[1], shape[2]);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..n)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
            ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos() + x as f32 * 1e-3) * 100.0 + noise
        })
        .collect();
    NDBuffer::from_vec(values, shape)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn bench_write(a: &BenchWriteCli) -> Result<()> {
    let (dir, mib, reps, compress, shards) = (a.dir.as_path(), a.mib, a.reps, a.compress, a.shards);
    let durability = if a.sync {
        Durability::Sync
    } else {
        Durability::Rename
    };
    if reps == 0 || mib == 0 {
        return Err(Error::InvalidArgument(
            "--reps and --mib must be at least 1".into(),
        ));
    }
    if let Some(n) = shards
        && (n == 0 || n % 64 != 0)
    {
        return Err(Error::InvalidArgument(format!(
            "--shards {n}: a shard's edge must be a positive multiple of the 64-element chunks"
        )));
    }
    let specs: Vec<zarrbuf::CodecSpec> =
        a.codecs.split(',').map(str::parse).collect::<Result<_>>()?;
    let shape = [mib as usize, 512, 512];
    let data = bench_data(&shape)?;
    let bytes = data.nbytes();
    std::fs::create_dir_all(dir).map_err(|e| bench_io(dir, e))?;
    zarrbuf::npy::write(&dir.join("data.npy"), &data)?;
    // The staged column's source: the data in the chosen device's memory.
    let staged_data = match a.device.as_deref() {
        Some(device) => data.to_prototype(&prototype(Some(device))?)?,
        None => data.clone(),
    };
    let host = data.buffer().as_host_bytes()?;
    let bench = WriteBench {
        dir,
        shape,
        data: &data,
        raw: &host[data.offset()..data.offset() + bytes],
        staged_data: &staged_data,
        compress,
        durability,
        reps,
    };
    outln!(
        "write benchmark: float32 {shape:?} ({bytes} bytes), 64³ chunks, median of {reps} writes (after a warm-up), GB/s of array data; staged pipeline from {}, compress {compress:?}, zarrbuf durability {durability:?}",
        staged_data.memory()
    )?;
    outln!("| codec | zarrs store_array_subset | zarrbuf write_all | zarrbuf staged pipeline |")?;
    outln!("|---|---|---|---|")?;
    let variants = specs
        .iter()
        .flat_map(|spec| std::iter::once((spec, None)).chain(shards.map(|n| (spec, Some(n)))));
    for (spec, shard) in variants {
        let [a, b, c] = bench.rates(spec, shard)?.map(median);
        let name = match shard {
            Some(n) => format!("{spec}, sharded {n}³/64³"),
            None => spec.to_string(),
        };
        outln!(
            "| {name} | {a:.3} | {b:.3} ({:.2}× zarrs) | {c:.3} ({:.2}× zarrs) |",
            b / a,
            c / a
        )?;
    }
    Ok(())
}

pub(crate) fn bench_io(dir: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io {
        path: dir.display().to_string(),
        source: e,
    }
}

/// One `zarrbuf bench-write` run: the data (as raw bytes for zarrs, and in the staged
/// column's memory), where the arrays are written, and the repetitions.
pub(crate) struct WriteBench<'a> {
    dir: &'a std::path::Path,
    shape: [usize; 3],
    data: &'a NDBuffer,
    raw: &'a [u8],
    staged_data: &'a NDBuffer,
    compress: Compress,
    /// zarrbuf's durability (zarrs' column writes in place, each file synced).
    durability: Durability,
    reps: usize,
}

impl WriteBench<'_> {
    /// A fresh array of codecs `spec` (in shards of `shard`³ when given) in
    /// `bench-write.zarr`, deleting the one before: in zarrs' own file-system store (in
    /// place, each file synced) for zarrs' column, else in the store zarrbuf opens (atomic:
    /// unnamed file or rename).
    fn fresh_array(
        &self,
        spec: &zarrbuf::CodecSpec,
        shard: Option<u64>,
        zarrs_store: bool,
    ) -> Result<zarrbuf::DynArray> {
        use zarrs::array::{ArrayBuilder, data_type};
        let io = |e| bench_io(self.dir, e);
        let store_dir = self.dir.join("bench-write.zarr");
        if store_dir.exists() {
            std::fs::remove_dir_all(&store_dir).map_err(io)?;
        }
        std::fs::create_dir_all(&store_dir).map_err(io)?;
        let store: std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> =
            if zarrs_store {
                std::sync::Arc::new(
                    zarrs::filesystem::FilesystemStore::new(&store_dir)
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?,
                )
            } else {
                zarrbuf::store::open_store(&store_dir.to_string_lossy())?
            };
        let mut builder = ArrayBuilder::new(
            self.shape.iter().map(|&n| n as u64).collect::<Vec<_>>(),
            vec![shard.unwrap_or(64); 3],
            data_type::float32(),
            0.0f32,
        );
        builder.bytes_to_bytes_codecs(spec.bytes_to_bytes_codecs(4)?);
        if shard.is_some() {
            builder.subchunk_shape(vec![64u64; 3]);
        }
        let array = builder
            .build(store, "/")
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        array
            .store_metadata()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(array)
    }

    /// The GB/s of each writer (zarrs, `write_all`, the staged pipeline) in every timed
    /// repetition, each write into a fresh array.
    fn rates(&self, spec: &zarrbuf::CodecSpec, shard: Option<u64>) -> Result<[Vec<f64>; 3]> {
        use zarrbuf::{
            ArrayWriteExt,
            options::{PipelineMode, WriteOptions},
        };
        use zarrs::array::ArraySubset;
        let shape = self.shape;
        let bytes = self.data.nbytes();
        let all = ArraySubset::new_with_shape(shape.iter().map(|&n| n as u64).collect());
        let mut rates = [Vec::new(), Vec::new(), Vec::new()];
        for rep in 0..=self.reps {
            // Each repetition starts with the next writer: a writer's figure does not depend
            // on which one ran just before it (the store deleted before a write, written by
            // the one before, was seen to slow it).
            for step in 0..rates.len() {
                let k = (rep + step) % rates.len();
                let rate = &mut rates[k];
                let array = self.fresh_array(spec, shard, k == 0)?;
                let ranges: Vec<Range<u64>> = shape.iter().map(|&n| 0..n as u64).collect();
                let opts = WriteOptions::default().with_durability(self.durability);
                let start = Instant::now();
                match k {
                    0 => array
                        .store_array_subset(&all, zarrs::array::ArrayBytes::from(self.raw))
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?,
                    1 => array.write_opt(&ranges, self.data, &opts)?,
                    _ => array.write_opt(
                        &ranges,
                        self.staged_data,
                        &opts
                            .with_mode(PipelineMode::Staged)
                            .with_compress(self.compress),
                    )?,
                }
                let s = start.elapsed().as_secs_f64();
                if rep > 0 {
                    rate.push(bytes as f64 / s.max(1e-9) / 1e9);
                }
            }
        }
        Ok(rates)
    }
}
