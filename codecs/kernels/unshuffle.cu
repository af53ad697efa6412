// Blosc unshuffle: undoes blosc's byte shuffle (bit == 0) or bit shuffle (bit == 1) over one
// decoded chunk of `nbytes` bytes, block by block (blocks of `blocksize` bytes, the last one
// possibly shorter). One thread per output byte; the rules are those of the host twin,
// `host::blosc_unshuffle` (and of c-blosc 1.x):
//   byte shuffle: shuffled byte j * n + i is byte j of element i (n whole elements in the
//     block); typesize 1 and the bytes after the last whole element are copied.
//   bit shuffle: bit k of byte j of element i is bit i % 8 of shuffled byte
//     (8 j + k) * n / 8 + i / 8; blocks whose n is 0 or not a multiple of 8 are copied, as are
//     the bytes after the last whole element.
// src and dst must not overlap.

extern "C" __global__ void zb_blosc_unshuffle(const zb_u8* __restrict__ src,
                                              zb_u8* __restrict__ dst, zb_u64 nbytes,
                                              zb_u64 blocksize, zb_u32 typesize, zb_u32 bit) {
    const zb_u64 step = zb_grid_step();
    const zb_u64 ts = typesize;
    for (zb_u64 p = zb_first_index(); p < nbytes; p += step) {
        const zb_u64 start = (p / blocksize) * blocksize;
        const zb_u64 rest = nbytes - start;
        const zb_u64 bsize = rest < blocksize ? rest : blocksize;
        const zb_u64 q = p - start;
        const zb_u64 n = bsize / ts;
        zb_u8 v = src[p];
        if (q < n * ts) {
            const zb_u64 e = q / ts;
            const zb_u64 j = q - e * ts;
            if (!bit) {
                if (ts > 1) v = src[start + j * n + e];
            } else if (n % 8 == 0) {
                const zb_u64 row = n / 8;
                const zb_u64 at = start + 8 * j * row + e / 8;
                const zb_u32 shift = (zb_u32)(e % 8);
                zb_u32 acc = 0;
                for (zb_u32 k = 0; k < 8; ++k) {
                    acc |= ((zb_u32)(src[at + k * row] >> shift) & 1u) << k;
                }
                v = (zb_u8)acc;
            }
        }
        dst[p] = v;
    }
}
