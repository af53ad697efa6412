// Adler-32 pieces: the Adler-32 sums of each `piece`-byte piece of `nbytes` bytes of src (the
// last piece possibly shorter), started from a = 0, b = 0, so that the host combines them
// into the checksum of the whole (host::adler32_combine). One thread per piece; out[2 p] is
// piece p's a, out[2 p + 1] its b, both reduced mod 65521. The host twin is
// host::adler32_pieces.

extern "C" __global__ void zb_adler32_pieces(const zb_u8* __restrict__ src, zb_u64 nbytes,
                                             zb_u64 piece, zb_u32* __restrict__ out) {
    const zb_u64 pieces = (nbytes + piece - 1) / piece;
    const zb_u64 step = zb_grid_step();
    for (zb_u64 p = zb_first_index(); p < pieces; p += step) {
        const zb_u64 start = p * piece;
        const zb_u64 rest = nbytes - start;
        const zb_u64 n = rest < piece ? rest : piece;
        zb_u64 a = 0, b = 0;
        for (zb_u64 k = 0; k < n; ++k) {
            a += src[start + k];
            b += a;
            // Both stay far below 2^64 between reductions.
            if ((k & 0xffff) == 0xffff) {
                a %= 65521;
                b %= 65521;
            }
        }
        out[2 * p] = (zb_u32)(a % 65521);
        out[2 * p + 1] = (zb_u32)(b % 65521);
    }
}
