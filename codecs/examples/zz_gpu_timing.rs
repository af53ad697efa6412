use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use std::time::Instant;
use zarrbuf_codecs::{cuda::CudaKernels, ScalarKind, Strided};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let t0 = Instant::now();
    let k = CudaKernels::for_context(&ctx)?;
    println!(
        "compile+load {:.1} ms, arch {}",
        t0.elapsed().as_secs_f64() * 1e3,
        k.arch()
    );
    let len = 256usize << 20;
    let src = stream.alloc_zeros::<u8>(len + 64)?;
    let mut dst = stream.alloc_zeros::<u8>(len + 64)?;
    let (s, _g1) = src.device_ptr(&stream);
    let (d, _g2) = dst.device_ptr_mut(&stream);
    let time = |name: &str, moved: usize, f: &dyn Fn() -> zarrbuf_codecs::Result<()>| {
        f().unwrap();
        stream.synchronize().unwrap();
        let n = 10;
        let t = Instant::now();
        for _ in 0..n {
            f().unwrap();
        }
        stream.synchronize().unwrap();
        let dt = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "{name:48} {:8.0} GB/s (read+write) {:8.3} ms",
            moved as f64 / dt / 1e9,
            dt * 1e3
        );
    };
    let v = |st: &'static [isize]| Strided {
        offset: 0,
        strides: st,
    };
    unsafe {
        time("contig copy (memcpy)", 2 * len, &|| {
            k.strided_copy(&stream, s, len, v(&[4]), d, len, v(&[4]), &[len / 4], 4, 0)
        });
        time("contig copy swap 4", 2 * len, &|| {
            k.strided_copy(&stream, s, len, v(&[4]), d, len, v(&[4]), &[len / 4], 4, 4)
        });
        time("contig copy swap 2", 2 * len, &|| {
            k.strided_copy(&stream, s, len, v(&[2]), d, len, v(&[2]), &[len / 2], 2, 2)
        });
        time("contig copy swap 8", 2 * len, &|| {
            k.strided_copy(&stream, s, len, v(&[8]), d, len, v(&[8]), &[len / 8], 8, 8)
        });
        time("byte_swap in place 4", 2 * len, &|| {
            k.byte_swap(&stream, d, len, 4)
        });
        time(
            "byte_swap in place 4, offset 1 (bytes kernel)",
            2 * len,
            &|| k.byte_swap(&stream, d + 1, len, 4),
        );
        time("copy es 4 dst offset 1 (bytes kernel)", 2 * len, &|| {
            k.strided_copy(
                &stream,
                s,
                len + 64,
                v(&[4]),
                d + 1,
                len,
                v(&[4]),
                &[len / 4],
                4,
                0,
            )
        });
        time("strided copy es 4 every other (w4)", len, &|| {
            k.strided_copy(&stream, s, len, v(&[8]), d, len, v(&[8]), &[len / 8], 4, 0)
        });
        let n = 8192;
        time("permute 8192x8192 f32", 2 * len, &|| {
            k.permute(&stream, s, len, d, len, &[n, n], &[1, 0], 4)
        });
        time("permute 16384x16384 u8", 2 * len, &|| {
            k.permute(&stream, s, len, d, len, &[16384, 16384], &[1, 0], 1)
        });
        time("permute 512^3/2 f32 (2,1,0)", 2 * len, &|| {
            k.permute(&stream, s, len, d, len, &[256, 512, 512], &[2, 1, 0], 4)
        });
        time("permute 256x512x512 f32 (0,2,1)", 2 * len, &|| {
            k.permute(&stream, s, len, d, len, &[256, 512, 512], &[0, 2, 1], 4)
        });
        // scatter a 512x512 f32 chunk into row 0 of a [*, 8192] f32 array, 64 times
        time("scatter 512x512 f32 chunk (x1)", 2 * 512 * 512 * 4, &|| {
            k.strided_copy(
                &stream,
                s,
                len,
                v(&[2048, 4]),
                d,
                len,
                v(&[32768, 4]),
                &[512, 512],
                4,
                0,
            )
        });
        time(
            "scatter 512x512 f32 chunk swap 4",
            2 * 512 * 512 * 4,
            &|| {
                k.strided_copy(
                    &stream,
                    s,
                    len,
                    v(&[2048, 4]),
                    d,
                    len,
                    v(&[32768, 4]),
                    &[512, 512],
                    4,
                    4,
                )
            },
        );
        time("scatter 4096x8192 f32 region", 2 * 4096 * 8192 * 4, &|| {
            k.strided_copy(
                &stream,
                s,
                len,
                v(&[32768, 4]),
                d,
                len,
                v(&[32768 + 64, 4]),
                &[2000, 8192],
                4,
                0,
            )
        });
        time("fill 4-byte (w16)", len, &|| {
            k.fill(&stream, d, len, v(&[4]), &[len / 4], &[1, 2, 3, 4])
        });
        time("fill zero (memset)", len, &|| {
            k.fill(&stream, d, len, v(&[4]), &[len / 4], &[0; 4])
        });
        time("fill 3-byte (bytes)", len / 4 * 3, &|| {
            k.fill(&stream, d, len, v(&[3]), &[len / 4], &[1, 2, 3])
        });
        let m = len / 8;
        time("cast f32->f16", m * 6, &|| {
            k.cast(
                &stream,
                s,
                len,
                v(&[4]),
                ScalarKind::F32,
                d,
                len,
                v(&[2]),
                ScalarKind::F16,
                &[m],
            )
        });
        time("cast u8->f32", m * 5, &|| {
            k.cast(
                &stream,
                s,
                len,
                v(&[1]),
                ScalarKind::U8,
                d,
                len,
                v(&[4]),
                ScalarKind::F32,
                &[m],
            )
        });
        time("cast f64->f32", m * 12, &|| {
            k.cast(
                &stream,
                s,
                len,
                v(&[8]),
                ScalarKind::F64,
                d,
                len,
                v(&[4]),
                ScalarKind::F32,
                &[m],
            )
        });
    }
    Ok(())
}
