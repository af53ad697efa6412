// Fill: write one pattern to every element of dst (dst strides in L.dst_strides; the source
// side of L is unused). Typed kernels take the pattern as a word (lo, hi) already widened by
// the host; zb_fill_bytes takes up to 256 pattern bytes.

template <typename W> __device__ __forceinline__ W zb_word(zb_u64 lo, zb_u64 hi);
template <> __device__ __forceinline__ zb_u8 zb_word<zb_u8>(zb_u64 lo, zb_u64) { return (zb_u8)lo; }
template <> __device__ __forceinline__ zb_u16 zb_word<zb_u16>(zb_u64 lo, zb_u64) { return (zb_u16)lo; }
template <> __device__ __forceinline__ zb_u32 zb_word<zb_u32>(zb_u64 lo, zb_u64) { return (zb_u32)lo; }
template <> __device__ __forceinline__ zb_u64 zb_word<zb_u64>(zb_u64 lo, zb_u64) { return lo; }
template <> __device__ __forceinline__ zb_u128 zb_word<zb_u128>(zb_u64 lo, zb_u64 hi) {
    zb_u128 r;
    r.lo = lo;
    r.hi = hi;
    return r;
}

template <typename W, typename I>
__device__ __forceinline__ void zb_fill_loop(zb_u8* dst, const ZbLayout& L, W v) {
    const zb_u64 step = zb_grid_step();
    for (zb_u64 i = zb_first_index(); i < L.n; i += step) {
        zb_i64 so, dof;
        zb_offsets<I>(L, (I)i, so, dof);
        *(W*)(dst + dof) = v;
    }
}

#define ZB_FILL_KERNEL(NAME, W)                                                          \
    extern "C" __global__ void NAME(zb_u8* dst, ZbLayout L, zb_u64 lo, zb_u64 hi) {     \
        const W v = zb_word<W>(lo, hi);                                                  \
        if (L.flags & ZB_INDEX64) zb_fill_loop<W, zb_u64>(dst, L, v);                   \
        else zb_fill_loop<W, zb_u32>(dst, L, v);                                        \
    }

ZB_FILL_KERNEL(zb_fill_w1, zb_u8)
ZB_FILL_KERNEL(zb_fill_w2, zb_u16)
ZB_FILL_KERNEL(zb_fill_w4, zb_u32)
ZB_FILL_KERNEL(zb_fill_w8, zb_u64)
ZB_FILL_KERNEL(zb_fill_w16, zb_u128)

template <typename I>
__device__ __forceinline__ void zb_fill_bytes_loop(zb_u8* dst, const ZbLayout& L,
                                                   const ZbPattern& P) {
    const zb_u64 step = zb_grid_step();
    const zb_u32 es = L.elem_size;
    for (zb_u64 i = zb_first_index(); i < L.n; i += step) {
        zb_i64 so, dof;
        zb_offsets<I>(L, (I)i, so, dof);
        for (zb_u32 k = 0; k < es; ++k) dst[dof + k] = P.bytes[k];
    }
}

extern "C" __global__ void zb_fill_bytes(zb_u8* dst, ZbLayout L, ZbPattern P) {
    if (L.flags & ZB_INDEX64) zb_fill_bytes_loop<zb_u64>(dst, L, P);
    else zb_fill_bytes_loop<zb_u32>(dst, L, P);
}
