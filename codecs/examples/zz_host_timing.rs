use std::time::Instant;
use zarrbuf_codecs::{host, ScalarKind, Strided};

fn t(name: &str, bytes: usize, mut f: impl FnMut()) {
    f();
    let n = 5;
    let s = Instant::now();
    for _ in 0..n {
        f();
    }
    let dt = s.elapsed().as_secs_f64() / n as f64;
    println!("{name:40} {:8.2} GB/s", bytes as f64 / dt / 1e9);
}

fn main() {
    let len = 64 << 20;
    let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut dst = vec![0u8; len];
    let c = |es: usize| [es as isize];
    for (es, unit) in [(1, 0), (2, 2), (4, 4), (8, 8), (16, 16), (8, 4), (4, 0)] {
        let s = c(es);
        let v = Strided {
            offset: 0,
            strides: &s,
        };
        t(&format!("contig copy es {es} swap {unit}"), len, || {
            host::strided_copy_slices(&src, v, &mut dst, v, &[len / es], es, unit).unwrap()
        });
    }
    for unit in [2, 4, 8] {
        t(&format!("byte_swap in place {unit}"), len, || {
            host::byte_swap(&mut dst, unit).unwrap()
        });
    }
    // transpose 4096 x 4096 f32
    let n = 4096;
    t("permute 4096x4096 f32", n * n * 4, || {
        host::permute(&src, &mut dst, &[n, n], &[1, 0], 4).unwrap()
    });
    t("permute 4096x4096 u8", n * n, || {
        host::permute(&src, &mut dst, &[n, n], &[1, 0], 1).unwrap()
    });
    t("permute 256x256x256 f32 (2,1,0)", len, || {
        host::permute(&src, &mut dst, &[256, 256, 256], &[2, 1, 0], 4).unwrap()
    });
    t("permute 256x256x256 f32 (0,2,1)", len, || {
        host::permute(&src, &mut dst, &[256, 256, 256], &[0, 2, 1], 4).unwrap()
    });
    // chunk scatter: 256x256 f32 chunk into a 4096-wide output
    t(
        "scatter 1024 rows of 1 KiB into 16 KiB rows",
        1024 * 1024,
        || {
            host::strided_copy_slices(
                &src,
                Strided {
                    offset: 0,
                    strides: &[1024, 4],
                },
                &mut dst,
                Strided {
                    offset: 0,
                    strides: &[16384, 4],
                },
                &[1024, 256],
                4,
                0,
            )
            .unwrap()
        },
    );
    t("fill 4-byte pattern", len, || {
        host::fill(
            &mut dst,
            Strided {
                offset: 0,
                strides: &[4],
            },
            &[len / 4],
            &[1, 2, 3, 4],
        )
        .unwrap()
    });
    t("fill strided 4-byte", len / 2, || {
        host::fill(
            &mut dst,
            Strided {
                offset: 0,
                strides: &[8],
            },
            &[len / 8],
            &[1, 2, 3, 4],
        )
        .unwrap()
    });
    t("fill zero", len, || {
        host::fill(
            &mut dst,
            Strided {
                offset: 0,
                strides: &[4],
            },
            &[len / 4],
            &[0; 4],
        )
        .unwrap()
    });
    let m = len / 8;
    t("cast f32->f16 (bytes of input)", m * 4, || {
        host::cast_slices(
            &src,
            Strided {
                offset: 0,
                strides: &[4],
            },
            ScalarKind::F32,
            &mut dst,
            Strided {
                offset: 0,
                strides: &[2],
            },
            ScalarKind::F16,
            &[m],
        )
        .unwrap()
    });
    t("cast u8->f32 (bytes of input)", m, || {
        host::cast_slices(
            &src,
            Strided {
                offset: 0,
                strides: &[1],
            },
            ScalarKind::U8,
            &mut dst,
            Strided {
                offset: 0,
                strides: &[4],
            },
            ScalarKind::F32,
            &[m],
        )
        .unwrap()
    });
    t("cast f64->f32 (bytes of input)", m * 8, || {
        host::cast_slices(
            &src,
            Strided {
                offset: 0,
                strides: &[8],
            },
            ScalarKind::F64,
            &mut dst,
            Strided {
                offset: 0,
                strides: &[4],
            },
            ScalarKind::F32,
            &[m],
        )
        .unwrap()
    });
}
