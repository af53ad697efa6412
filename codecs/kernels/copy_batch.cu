// Batched strided copy: many items, each its own source, layout and element count, all in
// one launch. The host (src/cuda/copy_batch.rs) validates every item, merges and widens its
// layout as for zb_copy_*, splits it into runs of ZB_BATCH_RUN elements and writes one
// ZbCopyItem per item into device memory (first_run: the batch-wide index of the item's
// first run; items are non-empty, so first_run strictly increases). Blocks grid-stride over
// the batch's runs; a block finds its run's item by binary search, then its threads
// grid-stride over the run's elements exactly as zb_copy_w* / zb_copy_bytes do.
// Sources never overlap the destination (checked on the host).

#define ZB_BATCH_RUN 2048

// Must match `write_item` in src/cuda/copy_batch.rs (432 bytes, 8-byte aligned).
struct ZbCopyItem {
    zb_u64 src;       // device address of the item's element [0, ..]
    zb_u64 dst;       // device address of its destination element [0, ..]
    zb_u64 n;         // elements (product of shape), > 0
    zb_u64 first_run; // batch-wide index of the item's first run
    zb_u32 ndim;      // 1..=16
    zb_u32 word;      // typed path: element (word) size 1, 2, 4, 8, 16; 0: byte-wise path
    zb_u32 elem_size; // bytes per element (the word size on the typed path)
    zb_u32 index64;   // 1: n does not fit in 32 bits
    zb_u64 shape[ZB_MAX_DIMS];
    zb_i64 src_strides[ZB_MAX_DIMS];
    zb_i64 dst_strides[ZB_MAX_DIMS];
};

// Byte offsets of element i (C order) of one item.
template <typename I>
__device__ __forceinline__ void zb_item_offsets(const ZbCopyItem& it, I i, zb_i64& so,
                                                zb_i64& dof) {
    so = 0;
    dof = 0;
    const int nd = (int)it.ndim;
    for (int d = nd - 1; d >= 1; --d) {
        const I n = (I)it.shape[d];
        const I q = i / n;
        const I r = i - q * n;
        so += (zb_i64)r * it.src_strides[d];
        dof += (zb_i64)r * it.dst_strides[d];
        i = q;
    }
    so += (zb_i64)i * it.src_strides[0];
    dof += (zb_i64)i * it.dst_strides[0];
}

template <typename W, typename I>
__device__ __forceinline__ void zb_batch_words(const ZbCopyItem& it, zb_u64 begin, zb_u64 end,
                                               zb_u32 unit) {
    const zb_u8* src = (const zb_u8*)it.src;
    zb_u8* dst = (zb_u8*)it.dst;
    for (zb_u64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
        zb_i64 so, dof;
        zb_item_offsets<I>(it, (I)i, so, dof);
        W v = *(const W*)(src + so);
        if (unit > 1) v = zb_swap(v, unit);
        *(W*)(dst + dof) = v;
    }
}

template <typename I>
__device__ __forceinline__ void zb_batch_bytes(const ZbCopyItem& it, zb_u64 begin, zb_u64 end,
                                               zb_u32 unit) {
    const zb_u8* src = (const zb_u8*)it.src;
    zb_u8* dst = (zb_u8*)it.dst;
    const zb_u32 es = it.elem_size;
    for (zb_u64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
        zb_i64 so, dof;
        zb_item_offsets<I>(it, (I)i, so, dof);
        const zb_u8* s = src + so;
        zb_u8* d = dst + dof;
        if (unit <= 1) {
            for (zb_u32 k = 0; k < es; ++k) d[k] = s[k];
        } else {
            // byte k of each swap group comes from byte unit - 1 - k of the same group
            for (zb_u32 g = 0; g < es; g += unit) {
                for (zb_u32 k = 0; k < unit; ++k) d[g + k] = s[g + unit - 1 - k];
            }
        }
    }
}

template <typename I>
__device__ __forceinline__ void zb_batch_run(const ZbCopyItem& it, zb_u64 begin, zb_u64 end,
                                             zb_u32 unit) {
    switch (it.word) {
    case 1: zb_batch_words<zb_u8, I>(it, begin, end, unit); break;
    case 2: zb_batch_words<zb_u16, I>(it, begin, end, unit); break;
    case 4: zb_batch_words<zb_u32, I>(it, begin, end, unit); break;
    case 8: zb_batch_words<zb_u64, I>(it, begin, end, unit); break;
    case 16: zb_batch_words<zb_u128, I>(it, begin, end, unit); break;
    default: zb_batch_bytes<I>(it, begin, end, unit); break;
    }
}

extern "C" __global__ void zb_copy_batch(const ZbCopyItem* items, zb_u64 count, zb_u64 runs,
                                         zb_u32 unit) {
    for (zb_u64 r = blockIdx.x; r < runs; r += gridDim.x) {
        // the last item whose first run is at or before r (items[0].first_run == 0)
        zb_u64 lo = 0, hi = count;
        while (hi - lo > 1) {
            const zb_u64 mid = lo + (hi - lo) / 2;
            if (items[mid].first_run <= r) lo = mid;
            else hi = mid;
        }
        const ZbCopyItem& it = items[lo];
        const zb_u64 begin = (r - it.first_run) * ZB_BATCH_RUN;
        const zb_u64 end = begin + ZB_BATCH_RUN < it.n ? begin + ZB_BATCH_RUN : it.n;
        if (it.index64) zb_batch_run<zb_u64>(it, begin, end, unit);
        else zb_batch_run<zb_u32>(it, begin, end, unit);
    }
}
