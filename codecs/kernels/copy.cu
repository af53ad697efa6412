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

// Transpose-like copies: the last two dims of L are (p, q) where p is contiguous in the source
// and q (innermost) contiguous in the destination; dims before them are batch dims. Each block
// moves 32 x 32 tiles through shared memory so that both the reads (along p) and the writes
// (along q) are coalesced. L.n is the number of tiles. Launched with 32 x 8 threads.
#define ZB_TILE 32
#define ZB_TILE_ROWS 8

template <typename W>
__device__ __forceinline__ void zb_transpose_loop(const zb_u8* src, zb_u8* dst,
                                                  const ZbLayout& L,
                                                  W (*tile)[ZB_TILE + 1]) {
    const int k = (int)L.ndim - 2;
    const zb_u64 np = L.shape[k], nq = L.shape[k + 1];
    const zb_i64 sp = L.src_strides[k], dp = L.dst_strides[k];
    const zb_i64 sq = L.src_strides[k + 1], dq = L.dst_strides[k + 1];
    const zb_u64 ntp = (np + ZB_TILE - 1) / ZB_TILE, ntq = (nq + ZB_TILE - 1) / ZB_TILE;
    const zb_u32 unit = L.swap_unit;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (zb_u64 t = blockIdx.x; t < L.n; t += gridDim.x) {
        zb_u64 r = t;
        const zb_u64 tq = r % ntq;
        r /= ntq;
        const zb_u64 tp = r % ntp;
        r /= ntp;
        zb_i64 so = 0, dof = 0;
#pragma unroll
        for (int d = ZB_MAX_DIMS - 3; d >= 0; --d) {
            if (d < k) {
                const zb_u64 n = L.shape[d];
                const zb_u64 i = r % n;
                r /= n;
                so += (zb_i64)i * L.src_strides[d];
                dof += (zb_i64)i * L.dst_strides[d];
            }
        }
        const zb_u64 p0 = tp * ZB_TILE, q0 = tq * ZB_TILE;
        {
            const zb_u64 p = p0 + tx;
            for (int j = ty; j < ZB_TILE; j += ZB_TILE_ROWS) {
                const zb_u64 q = q0 + j;
                if (p < np && q < nq) {
                    W v = *(const W*)(src + so + (zb_i64)p * sp + (zb_i64)q * sq);
                    if (unit > 1) v = zb_swap(v, unit);
                    tile[j][tx] = v;
                }
            }
        }
        __syncthreads();
        {
            const zb_u64 q = q0 + tx;
            for (int j = ty; j < ZB_TILE; j += ZB_TILE_ROWS) {
                const zb_u64 p = p0 + j;
                if (p < np && q < nq) {
                    *(W*)(dst + dof + (zb_i64)p * dp + (zb_i64)q * dq) = tile[tx][j];
                }
            }
        }
        __syncthreads();
    }
}

#define ZB_TRANSPOSE_KERNEL(NAME, W)                                                  \
    extern "C" __global__ void NAME(const zb_u8* src, zb_u8* dst, ZbLayout L) {       \
        __shared__ W tile[ZB_TILE][ZB_TILE + 1];                                      \
        zb_transpose_loop<W>(src, dst, L, tile);                                      \
    }

ZB_TRANSPOSE_KERNEL(zb_transpose_w1, zb_u8)
ZB_TRANSPOSE_KERNEL(zb_transpose_w2, zb_u16)
ZB_TRANSPOSE_KERNEL(zb_transpose_w4, zb_u32)
ZB_TRANSPOSE_KERNEL(zb_transpose_w8, zb_u64)
ZB_TRANSPOSE_KERNEL(zb_transpose_w16, zb_u128)
