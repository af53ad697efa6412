//! Damaged chunks refused on the device's routes: a chunk cut short, under every codec the
//! device decodes (zstd, gzip, numcodecs lz4, blosc lz4 + shuffle), read into device memory
//! with each decode choice, must be one error naming the chunk, never wrong data.

use crate::args::Target;
use std::ops::Range;
use zarrbuf::options::Decode;
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};

/// The chains, as zarr v3 codecs after `bytes`.
const CHAINS: &[(&str, &str)] = &[
    (
        "zstd",
        r#"{"name":"zstd","configuration":{"level":1,"checksum":false}}"#,
    ),
    ("gzip", r#"{"name":"gzip","configuration":{"level":1}}"#),
    (
        "lz4",
        r#"{"name":"numcodecs.lz4","configuration":{"acceleration":1}}"#,
    ),
    (
        "blosc",
        r#"{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":4,"blocksize":0}}"#,
    ),
];

const SHAPE: [u64; 3] = [32, 128, 128];
const CHUNKS: [u64; 3] = [8, 64, 64];
/// The chunk cut short, and how the error must name it.
const DAMAGED_KEY: &str = "c/1/1/0";
const DAMAGED_NAME: &str = "[1, 1, 0]";

/// Writes every chain of [`CHAINS`] (16 chunks each), checks that it reads back exactly on
/// the device, cuts one chunk to half its length, and checks that a read of the whole
/// array into device memory with each decode choice fails naming that chunk. Returns the
/// table row.
pub(crate) fn damaged_chunks(target: Target) -> Result<String, String> {
    let n: u64 = SHAPE.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 0.001).sin() * 100.0 + (i % 7) as f32)
        .collect();
    let data = NDBuffer::from_vec(values, &SHAPE.map(|v| v as usize)).map_err(|e| e.to_string())?;
    let base =
        std::env::temp_dir().join(format!("zarrbuf-gpucheck-damaged-{}", std::process::id()));
    let all: Vec<Range<u64>> = SHAPE.iter().map(|&n| 0..n).collect();
    let decodes = [Decode::Gpu, Decode::Both, Decode::Cpu];
    for (name, codecs) in CHAINS {
        let e = |x: zarrbuf::Error| format!("damaged {name}: {x}");
        let io = |x: std::io::Error| format!("damaged {name}: {x}");
        let dir = base.join(format!("{name}.zarr"));
        std::fs::create_dir_all(&dir).map_err(io)?;
        let meta = format!(
            r#"{{"zarr_format":3,"node_type":"array","shape":{SHAPE:?},"data_type":"float32",
            "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":{CHUNKS:?}}}}},
            "chunk_key_encoding":{{"name":"default"}},"fill_value":0.0,
            "codecs":[{{"name":"bytes","configuration":{{"endian":"little"}}}},{codecs}]}}"#
        );
        std::fs::write(dir.join("zarr.json"), meta).map_err(io)?;
        let array = zarrbuf::open(&dir.to_string_lossy(), "").map_err(e)?;
        array.write(&all, &data).map_err(e)?;
        for decode in decodes {
            let o = target.read_options().with_decode(decode);
            let got = array.read_opt(&all, &target.device(), &o).map_err(e)?;
            crate::fixtures::same(&format!("{name} intact, decode {decode:?}"), &got, &data)?;
        }
        let file = dir.join(DAMAGED_KEY);
        let bytes = std::fs::read(&file).map_err(io)?;
        std::fs::write(&file, &bytes[..bytes.len() / 2]).map_err(io)?;
        for decode in decodes {
            let o = target.read_options().with_decode(decode);
            match array.read_opt(&all, &target.device(), &o) {
                Ok(_) => {
                    return Err(format!(
                        "damaged {name}: a read with decode {decode:?} into {} returned data \
                         from a chunk cut short ({DAMAGED_KEY})",
                        target.device_name()
                    ));
                }
                Err(x) if !x.to_string().contains(DAMAGED_NAME) => {
                    return Err(format!(
                        "damaged {name}, decode {decode:?}: the error does not name chunk \
                         {DAMAGED_NAME}: {x}"
                    ));
                }
                Err(_) => {}
            }
        }
        // The CPU's own route refuses it too.
        if array.read_all(&BufferPrototype::cpu()).is_ok() {
            return Err(format!("damaged {name}: the CPU read returned data"));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(format!(
        "ok: {} chains x decode gpu/both/cpu into {} refused chunk {DAMAGED_NAME} cut short",
        CHAINS.len(),
        target.device_name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check itself, on the host twin: it passes on the real decoders (and so can fail:
    /// it would, were a damaged chunk read as data).
    #[test]
    fn damaged_chunks_are_refused_on_the_host_twin() {
        let row = damaged_chunks(Target::Host).unwrap();
        assert!(row.starts_with("ok: 4 chains"), "{row}");
    }
}
