// Strided copy with optional byte swap: dst[i] = swap(src[i]) for every element index i.
// `src`/`dst` point at element [0, ..] of each operand (region offset already applied).
// Typed kernels zb_copy_w{1,2,4,8,16} move one W-byte word per element (the host widens
// contiguous rows to the widest aligned word); zb_copy_bytes handles any element size and
// alignment. src == dst (identical layouts) is allowed: each thread reads its element before
// writing it.

template <typename W, typename I>
__device__ __forceinline__ void zb_copy_loop(const zb_u8* src, zb_u8* dst, const ZbLayout& L) {
    const zb_u64 step = zb_grid_step();
    const zb_u32 unit = L.swap_unit;
    for (zb_u64 i = zb_first_index(); i < L.n; i += step) {
        zb_i64 so, dof;
        zb_offsets<I>(L, (I)i, so, dof);
        W v = *(const W*)(src + so);
        if (unit > 1) v = zb_swap(v, unit);
        *(W*)(dst + dof) = v;
    }
}

#define ZB_COPY_KERNEL(NAME, W)                                                       \
    extern "C" __global__ void NAME(const zb_u8* src, zb_u8* dst, ZbLayout L) {       \
        if (L.flags & ZB_INDEX64) zb_copy_loop<W, zb_u64>(src, dst, L);              \
        else zb_copy_loop<W, zb_u32>(src, dst, L);                                   \
    }

ZB_COPY_KERNEL(zb_copy_w1, zb_u8)
ZB_COPY_KERNEL(zb_copy_w2, zb_u16)
ZB_COPY_KERNEL(zb_copy_w4, zb_u32)
ZB_COPY_KERNEL(zb_copy_w8, zb_u64)
ZB_COPY_KERNEL(zb_copy_w16, zb_u128)

template <typename I>
__device__ __forceinline__ void zb_copy_bytes_loop(const zb_u8* src, zb_u8* dst,
                                                   const ZbLayout& L) {
    const zb_u64 step = zb_grid_step();
    const zb_u32 es = L.elem_size;
    const zb_u32 unit = L.swap_unit;
    for (zb_u64 i = zb_first_index(); i < L.n; i += step) {
        zb_i64 so, dof;
        zb_offsets<I>(L, (I)i, so, dof);
        const zb_u8* s = src + so;
        zb_u8* d = dst + dof;
        if (unit <= 1) {
            for (zb_u32 k = 0; k < es; ++k) d[k] = s[k];
        } else {
            // one swap group at a time, read fully before written (in-place safe)
            for (zb_u32 g = 0; g < es; g += unit) {
                zb_u64 lo = 0, hi = 0;
                for (zb_u32 k = 0; k < unit; ++k) {
                    const zb_u64 b = s[g + k];
                    if (k < 8) lo |= b << (8 * k);
                    else hi |= b << (8 * (k - 8));
                }
                for (zb_u32 k = 0; k < unit; ++k) {
                    const zb_u32 j = unit - 1 - k; // source byte for destination byte k
                    d[g + k] = (zb_u8)(j < 8 ? lo >> (8 * j) : hi >> (8 * (j - 8)));
                }
            }
        }
    }
}

extern "C" __global__ void zb_copy_bytes(const zb_u8* src, zb_u8* dst, ZbLayout L) {
    if (L.flags & ZB_INDEX64) zb_copy_bytes_loop<zb_u64>(src, dst, L);
    else zb_copy_bytes_loop<zb_u32>(src, dst, L);
}
