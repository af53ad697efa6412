//! Device-versus-host comparison of every kernel, callable from a GPU check binary.

use super::kernels::CudaKernels;
use super::params::FORCE_INDEX64;
use crate::error::{CodecError, Result};
use crate::float16::{f64_to_bf16_bits, f64_to_f16_bits};
use crate::host;
use crate::layout::Strided;
use crate::scalar::ScalarKind;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;

/// Runs every CUDA kernel on pseudo-random inputs (fixed seed) in `ctx` and compares the bytes
/// it produces with the host implementation: strided copies over random shapes, strides
/// (negative, broadcast, padded), offsets (unaligned too), element sizes and swap units;
/// batched strided copies (many items in one launch, and a batch with a bad item refused);
/// fills; casts between every pair of [`ScalarKind`]s; in-place byte swaps; permutes; blosc
/// unshuffles; a few large launches and the 64-bit index path.
///
/// Returns a one-paragraph report on success, and [`CodecError::Cuda`] naming the first case
/// that differs (or the CUDA call that failed). Takes a few seconds.
///
/// ```no_run
/// let ctx = cudarc::driver::CudaContext::new(0)?;
/// println!("{}", zarrbuf_codecs::cuda::self_test(&ctx)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn self_test(ctx: &Arc<CudaContext>) -> Result<String> {
    let kernels = CudaKernels::for_context(ctx)?;
    let stream = ctx
        .new_stream()
        .map_err(|e| CodecError::Cuda(format!("cuStreamCreate failed: {e}")))?;
    let t = Tester {
        k: &kernels,
        stream: &stream,
    };
    let mut rng = Rng(0x5eed_c0de_cafe_f00d);
    let start = std::time::Instant::now();
    let mut counts = Vec::new();

    let mut n = 0;
    for case in 0..400 {
        t.copy_case(&mut rng, case, false)?;
        n += 1;
    }
    FORCE_INDEX64.with(|f| f.set(true));
    let forced = (0..60).try_for_each(|case| t.copy_case(&mut rng, case, false));
    FORCE_INDEX64.with(|f| f.set(false));
    forced?;
    n += 60;
    for case in 0..6 {
        t.copy_case(&mut rng, case, true)?;
        n += 1;
    }
    counts.push(format!("strided_copy {n}"));

    let mut n = 0;
    for case in 0..150 {
        t.copy_batch_case(&mut rng, case, case % 10 == 9)?;
        n += 1;
    }
    t.copy_batch_refused()?;
    counts.push(format!("strided_copy_batch {}", n + 1));

    let mut n = 0;
    for case in 0..200 {
        t.fill_case(&mut rng, case, false)?;
        n += 1;
    }
    for case in 0..3 {
        t.fill_case(&mut rng, case, true)?;
        n += 1;
    }
    counts.push(format!("fill {n}"));

    let mut n = 0;
    for (i, &sk) in ScalarKind::ALL.iter().enumerate() {
        for (j, &dk) in ScalarKind::ALL.iter().enumerate() {
            for rep in 0..3 {
                t.cast_case(&mut rng, sk, dk, i * 100 + j * 3 + rep)?;
                n += 1;
            }
        }
    }
    counts.push(format!("cast {n}"));

    let mut n = 0;
    for case in 0..60 {
        t.swap_case(&mut rng, case)?;
        n += 1;
    }
    counts.push(format!("byte_swap {n}"));

    let mut n = 0;
    for case in 0..120 {
        t.permute_case(&mut rng, case, false)?;
        n += 1;
    }
    for case in 0..3 {
        t.permute_case(&mut rng, case, true)?;
        n += 1;
    }
    counts.push(format!("permute {n}"));

    let mut n = 0;
    for case in 0..120 {
        t.unshuffle_case(&mut rng, case)?;
        n += 1;
    }
    counts.push(format!("blosc_unshuffle {n}"));

    let mut n = 0;
    for case in 0..60 {
        t.adler32_case(&mut rng, case)?;
        n += 1;
    }
    counts.push(format!("adler32_pieces {n}"));

    let name = ctx.name().unwrap_or_else(|_| "unknown device".into());
    Ok(format!(
        "CUDA codec kernels on {name} (PTX {}): device output equals host output for {} cases \
         ({:.1} s)",
        kernels.arch(),
        counts.join(", "),
        start.elapsed().as_secs_f64()
    ))
}

/// SplitMix64: a small deterministic generator (the crate has no runtime dependency on rand).
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// `true` with probability `p`.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub(super) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    pub(super) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    pub(super) fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            xs.swap(i, self.below(i + 1));
        }
    }
}

/// A random layout of `shape` with `es`-byte elements: strides, offset and region length.
pub(super) struct Layout {
    pub(super) strides: Vec<isize>,
    pub(super) offset: usize,
    pub(super) len: usize,
}

impl Layout {
    pub(super) fn view(&self) -> Strided<'_> {
        Strided {
            offset: self.offset,
            strides: &self.strides,
        }
    }
}

/// Random layout: permuted C order, optional padding, sign flips, zero strides if `broadcast`,
/// random start offset (alignment varies) and slack after the end.
pub(super) fn random_layout(rng: &mut Rng, shape: &[usize], es: usize, broadcast: bool) -> Layout {
    let nd = shape.len();
    let mut order: Vec<usize> = (0..nd).collect();
    if rng.chance(0.5) {
        rng.shuffle(&mut order);
    }
    let mut strides = vec![0isize; nd];
    let mut acc = if rng.chance(0.15) { es * 2 } else { es };
    for &d in order.iter().rev() {
        strides[d] = acc as isize;
        acc *= shape[d].max(1);
        if rng.chance(0.15) {
            acc += es * (1 + rng.below(3));
        }
    }
    for s in strides.iter_mut() {
        if rng.chance(0.2) {
            *s = -*s;
        }
        if broadcast && rng.chance(0.12) {
            *s = 0;
        }
    }
    let (mut lo, mut hi) = (0isize, es as isize);
    for (&n, &s) in shape.iter().zip(&strides) {
        let span = s * (n.max(1) as isize - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let offset = (-lo) as usize
        + if rng.chance(0.5) {
            rng.below(17)
        } else {
            16 * rng.below(3)
        };
    let len = offset + hi as usize + rng.below(9);
    Layout {
        strides,
        offset,
        len: len.max(1),
    }
}

pub(super) fn random_shape(rng: &mut Rng) -> Vec<usize> {
    let nd = rng.pick(&[0usize, 1, 1, 2, 2, 3, 3, 4, 5, 6]);
    (0..nd)
        .map(|_| {
            if rng.chance(0.03) {
                0
            } else {
                rng.pick(&[1usize, 1, 2, 3, 4, 5, 7, 8, 16, 33])
            }
        })
        .collect()
}

/// 2 to 4 dimensions of 12 to 80, at most ~100k elements: exercises the tiled transposes.
pub(super) fn medium_shape(rng: &mut Rng) -> Vec<usize> {
    let nd = 2 + rng.below(3);
    let mut shape: Vec<usize> = (0..nd).map(|_| 12 + rng.below(69)).collect();
    while shape.iter().product::<usize>() > 100_000 {
        shape[0] = (shape[0] / 2).max(1);
        shape.rotate_left(1);
    }
    shape
}

pub(super) fn valid_units(es: usize) -> Vec<usize> {
    [0usize, 1, 2, 4, 8, 16]
        .into_iter()
        .filter(|&u| u <= 1 || es.is_multiple_of(u))
        .collect()
}

pub(super) fn cuda_err(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> CodecError {
    move |e| CodecError::Cuda(format!("self-test: {call} failed: {e}"))
}

pub(super) struct Tester<'a> {
    pub(super) k: &'a CudaKernels,
    pub(super) stream: &'a Arc<CudaStream>,
}

impl Tester<'_> {
    pub(super) fn upload(&self, data: &[u8]) -> Result<CudaSlice<u8>> {
        self.stream
            .clone_htod(data)
            .map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    pub(super) fn download(&self, s: &CudaSlice<u8>) -> Result<Vec<u8>> {
        self.stream
            .clone_dtoh(s)
            .map_err(cuda_err("cuMemcpyDtoHAsync"))
    }

    /// Runs `op(src_ptr, dst_ptr)` on device copies of `src` and `dst` and returns the
    /// resulting destination bytes.
    fn on_device(
        &self,
        src: &[u8],
        dst: &[u8],
        op: impl FnOnce(u64, u64) -> Result<()>,
    ) -> Result<Vec<u8>> {
        let s = self.upload(src)?;
        let mut d = self.upload(dst)?;
        {
            let (sp, _gs) = s.device_ptr(self.stream);
            let (dp, _gd) = d.device_ptr_mut(self.stream);
            op(sp, dp)?;
        }
        let out = self.download(&d)?;
        self.stream
            .synchronize()
            .map_err(cuda_err("cuStreamSynchronize"))?;
        Ok(out)
    }

    fn copy_case(&self, rng: &mut Rng, case: usize, large: bool) -> Result<()> {
        let (shape, es) = if large {
            let es = rng.pick(&[1usize, 2, 4, 8, 3]);
            (vec![64, 129, 1 + rng.below(300)], es)
        } else if case.is_multiple_of(4) {
            (medium_shape(rng), rng.pick(&[1usize, 2, 4, 8, 16, 12]))
        } else {
            (
                random_shape(rng),
                rng.pick(&[1usize, 2, 3, 4, 6, 8, 12, 16]),
            )
        };
        let unit = rng.pick(&valid_units(es));
        let (sl, dl) = if rng.chance(0.25) {
            // both C-contiguous at 16-aligned offsets: memcpy and widened-word paths
            let c = |rng: &mut Rng| {
                let (strides, bytes) = crate::layout::c_strides(&shape, es).unwrap_or_default();
                let offset = 16 * rng.below(3);
                Layout {
                    strides,
                    offset,
                    len: (offset + bytes).max(1),
                }
            };
            (c(rng), c(rng))
        } else {
            (
                random_layout(rng, &shape, es, true),
                random_layout(rng, &shape, es, false),
            )
        };
        let src = rng.bytes(sl.len);
        let init = rng.bytes(dl.len);
        let mut want = init.clone();
        host::strided_copy_slices(&src, sl.view(), &mut want, dl.view(), &shape, es, unit)?;
        let got = self.on_device(&src, &init, |s, d| {
            // SAFETY: fresh device copies of `src`/`init`, lengths as given, distinct.
            unsafe {
                self.k.strided_copy(
                    self.stream,
                    s,
                    sl.len,
                    sl.view(),
                    d,
                    dl.len,
                    dl.view(),
                    &shape,
                    es,
                    unit,
                )
            }
        })?;
        compare(&got, &want, || {
            format!(
                "strided_copy case {case}: shape {shape:?}, elem {es}, swap {unit}, src {:?}@{} \
                 ({} B), dst {:?}@{} ({} B)",
                sl.strides, sl.offset, sl.len, dl.strides, dl.offset, dl.len
            )
        })
    }

    fn fill_case(&self, rng: &mut Rng, case: usize, large: bool) -> Result<()> {
        let (shape, es) = if large {
            (
                vec![3, 1000, 1001 + rng.below(64)],
                rng.pick(&[1usize, 4, 5]),
            )
        } else {
            (
                random_shape(rng),
                rng.pick(&[1usize, 2, 3, 4, 5, 8, 12, 16, 24, 40]),
            )
        };
        let pattern = if rng.chance(0.3) {
            vec![rng.next() as u8; es]
        } else {
            rng.bytes(es)
        };
        let l = if rng.chance(0.3) {
            let (strides, bytes) = crate::layout::c_strides(&shape, es).unwrap_or_default();
            Layout {
                strides,
                offset: 0,
                len: bytes.max(1),
            }
        } else {
            random_layout(rng, &shape, es, false)
        };
        let init = rng.bytes(l.len);
        let mut want = init.clone();
        host::fill(&mut want, l.view(), &shape, &pattern)?;
        let got = self.on_device(&[0], &init, |_, d| {
            // SAFETY: fresh device copy of `init`, `l.len` bytes.
            unsafe {
                self.k
                    .fill(self.stream, d, l.len, l.view(), &shape, &pattern)
            }
        })?;
        compare(&got, &want, || {
            format!(
                "fill case {case}: shape {shape:?}, pattern {pattern:?}, dst {:?}@{} ({} B)",
                l.strides, l.offset, l.len
            )
        })
    }

    fn cast_case(&self, rng: &mut Rng, sk: ScalarKind, dk: ScalarKind, case: usize) -> Result<()> {
        let shape = if case.is_multiple_of(3) {
            vec![1 + rng.below(2000)]
        } else {
            random_shape(rng)
        };
        let (ses, des) = (sk.size(), dk.size());
        let (sl, dl) = if case.is_multiple_of(3) {
            let n = shape[0];
            (
                Layout {
                    strides: vec![ses as isize],
                    offset: 0,
                    len: n * ses,
                },
                Layout {
                    strides: vec![des as isize],
                    offset: 0,
                    len: n * des,
                },
            )
        } else {
            (
                random_layout(rng, &shape, ses, true),
                random_layout(rng, &shape, des, false),
            )
        };
        let mut src = rng.bytes(sl.len);
        // Overwrite most source elements with "interesting" values of their kind.
        for_each_offset(&shape, sl.view(), |o| {
            if rng.chance(0.7) {
                let v = interesting(rng);
                src[o..o + ses].copy_from_slice(&encode(sk, v, rng)[..ses]);
            }
        });
        let init = rng.bytes(dl.len);
        let mut want = init.clone();
        host::cast_slices(&src, sl.view(), sk, &mut want, dl.view(), dk, &shape)?;
        let got = self.on_device(&src, &init, |s, d| {
            // SAFETY: fresh device copies of `src`/`init`, lengths as given, distinct.
            unsafe {
                self.k.cast(
                    self.stream,
                    s,
                    sl.len,
                    sl.view(),
                    sk,
                    d,
                    dl.len,
                    dl.view(),
                    dk,
                    &shape,
                )
            }
        })?;
        let describe = || {
            format!(
                "cast case {case} {sk:?} -> {dk:?}: shape {shape:?}, src {:?}@{} ({} B), dst \
                 {:?}@{} ({} B)",
                sl.strides, sl.offset, sl.len, dl.strides, dl.offset, dl.len
            )
        };
        if !dk.is_float() {
            return compare(&got, &want, describe);
        }
        // Float results: equal bytes, or both NaN (payloads are not specified).
        let mut nan_ok = vec![false; got.len()];
        for_each_offset(&shape, dl.view(), |o| {
            if both_nan(dk, &got[o..o + des], &want[o..o + des]) {
                nan_ok[o..o + des].iter_mut().for_each(|b| *b = true);
            }
        });
        let masked = |v: &[u8]| -> Vec<u8> {
            v.iter()
                .zip(&nan_ok)
                .map(|(&b, &m)| if m { 0 } else { b })
                .collect()
        };
        compare(&masked(&got), &masked(&want), describe)
    }

    fn swap_case(&self, rng: &mut Rng, case: usize) -> Result<()> {
        let unit = rng.pick(&[0usize, 1, 2, 4, 8, 16]);
        let u = unit.max(1);
        let count = if case.is_multiple_of(10) {
            100_000 + rng.below(1000)
        } else {
            rng.below(300)
        };
        let offset = if rng.chance(0.5) { rng.below(16) } else { 0 };
        let len = count * u;
        let data = rng.bytes(offset + len + 1);
        let mut want = data.clone();
        host::byte_swap(&mut want[offset..offset + len], unit)?;
        let got = self.on_device(&[0], &data, |_, d| {
            // SAFETY: `offset + len` is inside the fresh device copy of `data`.
            unsafe { self.k.byte_swap(self.stream, d + offset as u64, len, unit) }
        })?;
        compare(&got, &want, || {
            format!("byte_swap case {case}: {len} bytes at offset {offset}, unit {unit}")
        })
    }

    fn permute_case(&self, rng: &mut Rng, case: usize, large: bool) -> Result<()> {
        let (shape, es) = if large {
            (
                vec![33, 1 + rng.below(600), 257],
                rng.pick(&[1usize, 2, 4, 8]),
            )
        } else if case.is_multiple_of(3) {
            (medium_shape(rng), rng.pick(&[1usize, 2, 3, 4, 8, 16]))
        } else {
            (random_shape(rng), rng.pick(&[1usize, 2, 3, 4, 8, 16]))
        };
        let mut axes: Vec<usize> = (0..shape.len()).collect();
        rng.shuffle(&mut axes);
        let (_, bytes) = crate::layout::c_strides(&shape, es)?;
        let src = rng.bytes(bytes.max(1));
        let init = rng.bytes(bytes.max(1));
        let mut want = init.clone();
        host::permute(&src, &mut want, &shape, &axes, es)?;
        let got = self.on_device(&src, &init, |s, d| {
            // SAFETY: fresh device copies, each at least `bytes` long, distinct.
            unsafe {
                self.k
                    .permute(self.stream, s, src.len(), d, init.len(), &shape, &axes, es)
            }
        })?;
        compare(&got, &want, || {
            format!("permute case {case}: shape {shape:?}, axes {axes:?}, elem {es}")
        })
    }
}

impl Tester<'_> {
    fn adler32_case(&self, rng: &mut Rng, case: usize) -> Result<()> {
        let piece = rng.pick(&[1usize, 7, 4096, 65536, 1 << 20]);
        let nbytes = if case.is_multiple_of(10) {
            (1 << 20) + rng.below(4096)
        } else {
            rng.below(200_000)
        };
        let src = rng.bytes(nbytes.max(1));
        let words = 2 * host::adler32_piece_count(nbytes, piece);
        let mut want = vec![0u32; words.max(1)];
        host::adler32_pieces(&src, nbytes, piece, &mut want)?;
        let want: Vec<u8> = want.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let init = rng.bytes(want.len());
        let mut got = self.on_device(&src, &init, |s, d| {
            // SAFETY: fresh device copies, distinct, `d` holding two words per piece.
            unsafe {
                self.k
                    .adler32_pieces(self.stream, s, src.len(), nbytes, piece, d, init.len())
            }
        })?;
        // Words past the pieces are left as they were.
        got.truncate(4 * words);
        compare(&got, &want[..4 * words], || {
            format!("adler32_pieces case {case}: {nbytes} bytes in pieces of {piece}")
        })
    }

    fn unshuffle_case(&self, rng: &mut Rng, case: usize) -> Result<()> {
        let typesize = rng.pick(&[1usize, 2, 3, 4, 8, 16, 255]);
        let shuffle = if case.is_multiple_of(2) {
            host::Shuffle::Byte
        } else {
            host::Shuffle::Bit
        };
        // Whole blocks of 8·typesize elements, odd leftovers, and blocks of under one element.
        let blocksize = match case % 3 {
            0 => 8 * typesize * (1 + rng.below(64)),
            1 => 1 + rng.below(4096),
            _ => 1 + rng.below(typesize),
        };
        let nbytes = if case.is_multiple_of(10) {
            1 << 20
        } else {
            rng.below(20_000)
        };
        let src = rng.bytes(nbytes.max(1));
        let init = rng.bytes(nbytes.max(1));
        let mut want = init.clone();
        host::blosc_unshuffle(&src, &mut want, nbytes, shuffle, typesize, blocksize)?;
        let got = self.on_device(&src, &init, |s, d| {
            // SAFETY: fresh device copies, each at least `nbytes` long, distinct.
            unsafe {
                self.k.blosc_unshuffle(
                    self.stream,
                    s,
                    src.len(),
                    d,
                    init.len(),
                    nbytes,
                    shuffle,
                    typesize,
                    blocksize,
                )
            }
        })?;
        compare(&got, &want, || {
            format!(
                "blosc_unshuffle case {case}: {shuffle:?}, {nbytes} bytes, type size \
                 {typesize}, block {blocksize}"
            )
        })
    }
}

pub(super) fn compare(got: &[u8], want: &[u8], describe: impl FnOnce() -> String) -> Result<()> {
    if got == want {
        return Ok(());
    }
    let first = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let lo = first.saturating_sub(4);
    let hi = (first + 12).min(got.len()).min(want.len());
    Err(CodecError::Cuda(format!(
        "self-test mismatch in {}: first differing byte {first}: device {:?} host {:?} (bytes \
         {lo}..{hi})",
        describe(),
        &got[lo..hi],
        &want[lo..hi]
    )))
}

/// Calls `f` with the byte offset of every element of `shape` at `view`, in C order.
fn for_each_offset(shape: &[usize], view: Strided<'_>, mut f: impl FnMut(usize)) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        let off = view.offset as isize
            + idx
                .iter()
                .zip(view.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        f(off as usize);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A value likely to hit conversion edge cases: exact small integers, halfway points,
/// range limits, huge and tiny magnitudes, infinities, NaN, signed zeros.
fn interesting(rng: &mut Rng) -> f64 {
    match rng.below(10) {
        0 => rng.below(600) as f64 - 300.0,
        1 => (rng.below(2000) as f64 - 1000.0) + 0.5,
        2 => rng.pick(&[
            127.0,
            128.0,
            -128.0,
            -129.0,
            255.0,
            256.0,
            32767.0,
            32768.0,
            65504.0,
            65520.0,
            2147483647.0,
            2147483648.0,
            -2147483649.0,
            4294967296.0,
            9.223_372_036_854_776e18,
            -9.223_372_036_854_776e18,
            1.8446744073709552e19,
            -1.0,
            -0.99,
            0.99,
        ]),
        3 => rng.pick(&[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0, -0.0]),
        4 => f64::from_bits(rng.next()),
        5 => (rng.next() as i64 as f64) * 2f64.powi(-(rng.below(80) as i32)),
        6 => 2f64.powi(rng.below(300) as i32 - 150) * (1.0 + rng.below(1024) as f64 / 1024.0),
        7 => f32::from_bits(rng.next() as u32) as f64,
        _ => (rng.next() % 1_000_000) as f64 / 997.0 - 500.0,
    }
}

/// Little-endian bytes of `v` as kind `k` (16 bytes, the first `k.size()` meaningful).
fn encode(k: ScalarKind, v: f64, rng: &mut Rng) -> [u8; 16] {
    let mut out = [0u8; 16];
    let le = |b: &[u8], out: &mut [u8; 16]| out[..b.len()].copy_from_slice(b);
    match k {
        ScalarKind::Bool => out[0] = rng.pick(&[0u8, 1, 1, 2, 255]),
        ScalarKind::I8 => le(&(v as i8).to_le_bytes(), &mut out),
        ScalarKind::I16 => le(&(v as i16).to_le_bytes(), &mut out),
        ScalarKind::I32 => le(&(v as i32).to_le_bytes(), &mut out),
        ScalarKind::I64 => le(&(v as i64).to_le_bytes(), &mut out),
        ScalarKind::U8 => le(&(v as u8).to_le_bytes(), &mut out),
        ScalarKind::U16 => le(&(v as u16).to_le_bytes(), &mut out),
        ScalarKind::U32 => le(&(v as u32).to_le_bytes(), &mut out),
        ScalarKind::U64 => le(&(v as u64).to_le_bytes(), &mut out),
        ScalarKind::F16 => le(&f64_to_f16_bits(v).to_le_bytes(), &mut out),
        ScalarKind::BF16 => le(&f64_to_bf16_bits(v).to_le_bytes(), &mut out),
        ScalarKind::F32 => le(&(v as f32).to_le_bytes(), &mut out),
        ScalarKind::F64 => le(&v.to_le_bytes(), &mut out),
        ScalarKind::C64 => {
            le(&(v as f32).to_le_bytes(), &mut out);
            let im = interesting(rng) as f32;
            out[4..8].copy_from_slice(&im.to_le_bytes());
        }
        ScalarKind::C128 => {
            le(&v.to_le_bytes(), &mut out);
            out[8..16].copy_from_slice(&interesting(rng).to_le_bytes());
        }
    }
    out
}

/// Whether both elements of float kind `k` are NaN (complex: each part both NaN or equal).
fn both_nan(k: ScalarKind, a: &[u8], b: &[u8]) -> bool {
    fn part_nan(bytes: &[u8], kind: ScalarKind) -> bool {
        match kind {
            ScalarKind::F16 => {
                let h = u16::from_le_bytes([bytes[0], bytes[1]]);
                h & 0x7c00 == 0x7c00 && h & 0x3ff != 0
            }
            ScalarKind::BF16 => {
                let h = u16::from_le_bytes([bytes[0], bytes[1]]);
                h & 0x7f80 == 0x7f80 && h & 0x7f != 0
            }
            ScalarKind::F32 | ScalarKind::C64 => {
                f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]).is_nan()
            }
            _ => {
                let mut x = [0u8; 8];
                x.copy_from_slice(&bytes[..8]);
                f64::from_le_bytes(x).is_nan()
            }
        }
    }
    match k {
        ScalarKind::C64 | ScalarKind::C128 => {
            let h = k.size() / 2;
            let same = |x: &[u8], y: &[u8]| x == y || (part_nan(x, k) && part_nan(y, k));
            same(&a[..h], &b[..h]) && same(&a[h..], &b[h..])
        }
        _ => part_nan(a, k) && part_nan(b, k),
    }
}
