//! The read benchmark (zarrs vs zarrbuf on the CPU vs zarrbuf into the GPU) and the pinned
//! host-device bandwidth.

use crate::Check;
use crate::fixtures::same;
use std::time::Instant;
use zarrbuf::options::Decode;
use zarrbuf::{
    ArrayReadExt, Buffer, BufferPrototype, NDBuffer,
    options::{PipelineMode, ReadOptions},
};
use zarrbuf_test_cases::variants;

/// Median GB/s of whole-array reads of `array` into cuda:0 with each (decode, staging
/// bytes) choice, each result checked against `data` first.
fn cuda_reads(
    array: &zarrs::array::Array<zarrs::filesystem::FilesystemStore>,
    name: &str,
    data: &NDBuffer,
    total: usize,
    reps: usize,
    choices: &[(Decode, usize)],
) -> std::result::Result<Vec<f64>, String> {
    let all = variants::full(array.shape());
    let mut rates = Vec::with_capacity(choices.len());
    for &(decode, staging) in choices {
        let o = ReadOptions::default()
            .with_decode(decode)
            .with_staging_bytes(staging);
        let check = array
            .read_opt(&all, &BufferPrototype::cuda(0), &o)
            .map_err(|e| e.to_string())?;
        same(
            &format!("bench {name} on cuda, decode {decode:?}"),
            &check,
            data,
        )?;
        drop(check);
        rates.push(variants::median_gbps(total, reps, || {
            drop(
                array
                    .read_opt(&all, &BufferPrototype::cuda(0), &o)
                    .expect("cuda read"),
            )
        }));
    }
    Ok(rates)
}

/// The pinned host-device bandwidth, then the read benchmark on every GPU variant at 64³ and
/// 128³ chunks, each reader's result checked first; adds the figures to `table`.
pub(crate) fn bench(bytes: u64, reps: usize, table: &mut Vec<(String, String)>) -> Check {
    let e = |x: zarrbuf::Error| x.to_string();
    // Pinned <-> device bandwidth, 256 MiB.
    let n = 256 << 20;
    let pinned = Buffer::empty(n, &BufferPrototype::pinned(0)).map_err(e)?;
    let mut device = Buffer::empty(n, &BufferPrototype::cuda(0)).map_err(e)?;
    let h2d = variants::median_gbps(n, reps, || device.copy_from(&pinned).expect("h2d"));
    let mut back = pinned.clone();
    let d2h = variants::median_gbps(n, reps, || back.copy_from(&device).expect("d2h"));
    table.push((
        "pinned H2D / D2H (256 MiB)".into(),
        format!("{h2d:.1} / {d2h:.1} GB/s"),
    ));

    let shape = variants::shape_for(bytes);
    let total = shape.iter().product::<u64>() as usize * 4;
    let dir = std::env::temp_dir().join("zarrbuf-bench");
    let t = Instant::now();
    let data = variants::data(&shape);
    table.push((
        "bench array".into(),
        format!(
            "float32 {shape:?} = {total} bytes, 64³ chunks (generated in {:.1} s)",
            t.elapsed().as_secs_f64()
        ),
    ));
    let mut reused = vec![0u8; total];
    let all = variants::full(&shape);
    for v in variants::Variant::GPU {
        let array = variants::create(&dir, v, &shape, &data);
        let zi = variants::median_gbps(total, reps, || variants::zarrs_into(&array, &mut reused));
        let za = variants::median_gbps(total, reps, || {
            variants::zarrs_alloc(&array);
        });
        let cpu = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::cpu()))
        });
        let staged = ReadOptions::default().with_mode(PipelineMode::Staged);
        let cpu_staged = variants::median_gbps(total, reps, || {
            drop(
                array
                    .read_opt(&all, &BufferPrototype::cpu(), &staged)
                    .expect("staged read"),
            )
        });
        let pin = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::pinned(0)))
        });
        let cuda = cuda_reads(
            &array,
            v.name(),
            &data,
            total,
            reps,
            &[
                (Decode::Cpu, 256usize << 20),
                (Decode::Gpu, 256 << 20),
                (Decode::Both, 256 << 20),
                (Decode::Gpu, 1 << 30),
                (Decode::Both, 1 << 30),
            ],
        )?;
        let best = cuda.iter().copied().fold(0.0, f64::max);
        table.push((
            format!("read {} (GB/s, median of {reps})", v.name()),
            format!(
                "zarrs into reused {zi:.2} | zarrs alloc {za:.2} | zarrbuf cpu {cpu:.2} ({:.2}x) | zarrbuf cpu staged {cpu_staged:.2} | zarrbuf pinned {pin:.2} | zarrbuf cuda decode cpu {:.2} / gpu {:.2} / both {:.2}; 1 GiB staging: gpu {:.2} / both {:.2} (best {:.2}x cpu)",
                cpu / zi,
                cuda[0],
                cuda[1],
                cuda[2],
                cuda[3],
                cuda[4],
                best / cpu
            ),
        ));
    }
    // 128³ chunks: 8x fewer, 8 MiB each (the fewer, larger chunks GPU decoders prefer).
    for v in variants::Variant::GPU {
        let array = variants::create_chunked(&dir, v, &shape, &data, 128);
        let zi = variants::median_gbps(total, reps, || variants::zarrs_into(&array, &mut reused));
        let cpu = variants::median_gbps(total, reps, || {
            drop(variants::zarrbuf_read(&array, &BufferPrototype::cpu()))
        });
        let name = format!("{} 128³", v.name());
        let cuda = cuda_reads(
            &array,
            &name,
            &data,
            total,
            reps,
            &[
                (Decode::Cpu, 1usize << 30),
                (Decode::Gpu, 1 << 30),
                (Decode::Both, 1 << 30),
            ],
        )?;
        table.push((
            format!("read {name} (GB/s, median of {reps})"),
            format!(
                "zarrs into reused {zi:.2} | zarrbuf cpu {cpu:.2} ({:.2}x) | zarrbuf cuda, 1 GiB staging, decode cpu {:.2} / gpu {:.2} / both {:.2}",
                cpu / zi,
                cuda[0],
                cuda[1],
                cuda[2],
            ),
        ));
    }
    Ok(())
}
