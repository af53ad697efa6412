// zarrbuf-codecs: definitions shared by every kernel. Compiled at run time with NVRTC, so no
// #include (NVRTC may have no include path): only built-in types, no intrinsics.
// The Rust side concatenates common.cuh, copy.cu, fill.cu and cast.cu into one program.

#define ZB_MAX_DIMS 16
// ZbLayout.flags
#define ZB_INDEX64 1u     // element count does not fit in 32 bits: use 64-bit index math
#define ZB_SRC_ALIGNED 2u // cast: every source element is aligned to min(size, 8)
#define ZB_DST_ALIGNED 4u // cast: every destination element is aligned to min(size, 8)

typedef unsigned char zb_u8;
typedef unsigned short zb_u16;
typedef unsigned int zb_u32;
typedef unsigned long long zb_u64;
typedef long long zb_i64;

struct alignas(16) zb_u128 {
    zb_u64 lo;
    zb_u64 hi;
};

// Must match `KernelLayout` in src/cuda/params.rs field for field.
struct ZbLayout {
    zb_u64 n;            // number of elements (product of shape)
    zb_u32 ndim;         // 1..=16
    zb_u32 elem_size;    // bytes per element (source element for cast)
    zb_u32 swap_unit;    // 1 = no swap; 2, 4, 8, 16
    zb_u32 src_kind;     // cast only: ScalarKind code
    zb_u32 dst_kind;     // cast only
    zb_u32 flags;        // ZB_* flags
    zb_u64 shape[ZB_MAX_DIMS];
    zb_i64 src_strides[ZB_MAX_DIMS]; // bytes
    zb_i64 dst_strides[ZB_MAX_DIMS]; // bytes
};

// Must match `KernelPattern` in src/cuda/params.rs.
struct ZbPattern {
    zb_u8 bytes[256];
};

// Byte offsets (from the operands' element [0, ..]) of linear element index i (C order).
template <typename I>
__device__ __forceinline__ void zb_offsets(const ZbLayout& L, I i, zb_i64& so, zb_i64& dof) {
    so = 0;
    dof = 0;
#pragma unroll
    for (int d = ZB_MAX_DIMS - 1; d >= 1; --d) {
        if (d < (int)L.ndim) {
            const I n = (I)L.shape[d];
            const I q = i / n;
            const I r = i - q * n;
            so += (zb_i64)r * L.src_strides[d];
            dof += (zb_i64)r * L.dst_strides[d];
            i = q;
        }
    }
    so += (zb_i64)i * L.src_strides[0];
    dof += (zb_i64)i * L.dst_strides[0];
}

// ---- byte swaps: reverse every `unit`-byte group of a word (unit divides the word size) ----

__device__ __forceinline__ zb_u32 zb_bswap32(zb_u32 x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
__device__ __forceinline__ zb_u32 zb_bswap16x2(zb_u32 x) {
    return ((x >> 8) & 0x00ff00ffu) | ((x << 8) & 0xff00ff00u);
}
__device__ __forceinline__ zb_u8 zb_swap(zb_u8 v, zb_u32) { return v; }
__device__ __forceinline__ zb_u16 zb_swap(zb_u16 v, zb_u32) {
    return (zb_u16)((v >> 8) | (v << 8));
}
__device__ __forceinline__ zb_u32 zb_swap(zb_u32 v, zb_u32 unit) {
    return unit == 2 ? zb_bswap16x2(v) : zb_bswap32(v);
}
__device__ __forceinline__ zb_u64 zb_swap(zb_u64 v, zb_u32 unit) {
    zb_u32 lo = (zb_u32)v, hi = (zb_u32)(v >> 32);
    if (unit == 2) {
        return ((zb_u64)zb_bswap16x2(hi) << 32) | zb_bswap16x2(lo);
    }
    lo = zb_bswap32(lo);
    hi = zb_bswap32(hi);
    if (unit == 4) {
        return ((zb_u64)hi << 32) | lo;
    }
    return ((zb_u64)lo << 32) | hi;
}
__device__ __forceinline__ zb_u128 zb_swap(zb_u128 v, zb_u32 unit) {
    zb_u128 r;
    if (unit == 16) {
        r.lo = zb_swap(v.hi, 8u);
        r.hi = zb_swap(v.lo, 8u);
    } else {
        r.lo = zb_swap(v.lo, unit);
        r.hi = zb_swap(v.hi, unit);
    }
    return r;
}

// ---- bit casts (unions: no intrinsics needed) ----

__device__ __forceinline__ double zb_f64_from_bits(zb_u64 b) {
    union { zb_u64 u; double d; } x;
    x.u = b;
    return x.d;
}
__device__ __forceinline__ zb_u64 zb_f64_to_bits(double d) {
    union { zb_u64 u; double d; } x;
    x.d = d;
    return x.u;
}
__device__ __forceinline__ float zb_f32_from_bits(zb_u32 b) {
    union { zb_u32 u; float f; } x;
    x.u = b;
    return x.f;
}
__device__ __forceinline__ zb_u32 zb_f32_to_bits(float f) {
    union { zb_u32 u; float f; } x;
    x.f = f;
    return x.u;
}

// ---- binary16 / bfloat16 (twins of src/float16.rs: round to nearest even) ----

__device__ zb_u16 zb_narrow(double xd, zb_u32 ebits, zb_u32 mbits) {
    const zb_u64 bits = zb_f64_to_bits(xd);
    const zb_u32 sign = (zb_u32)(bits >> 63) << (ebits + mbits);
    const int exp = (int)((bits >> 52) & 0x7ff);
    const zb_u64 man = bits & ((1ull << 52) - 1);
    const zb_u32 emax = (1u << ebits) - 1;
    const zb_u32 inf = sign | (emax << mbits);
    if (exp == 0x7ff) {
        if (man == 0) return (zb_u16)inf;
        return (zb_u16)(inf | (1u << (mbits - 1)) | (zb_u32)(man >> (52 - mbits)));
    }
    if (exp == 0) return (zb_u16)sign;
    const int bias = (1 << (ebits - 1)) - 1;
    const int te = exp - 1023 + bias;
    if (te >= (int)emax) return (zb_u16)inf;
    const zb_u64 m = man | (1ull << 52);
    const zb_u32 shift = te >= 1 ? 52 - mbits : 52 - mbits + (zb_u32)(1 - te);
    if (shift >= 54) return (zb_u16)sign;
    zb_u64 q = m >> shift;
    const zb_u64 rem = m & ((1ull << shift) - 1);
    const zb_u64 half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1) == 1)) q += 1;
    const zb_u64 r = te >= 1 ? ((zb_u64)(te - 1) << mbits) + q : q;
    if (r >= ((zb_u64)emax << mbits)) return (zb_u16)inf;
    return (zb_u16)(sign | (zb_u32)r);
}

__device__ double zb_f16_to_f64(zb_u16 h) {
    const zb_u64 sign = (zb_u64)(h >> 15) << 63;
    const zb_u32 e = (h >> 10) & 0x1f;
    const zb_u64 m = h & 0x3ff;
    if (e == 0x1f) return zb_f64_from_bits(sign | (0x7ffull << 52) | (m << 42));
    if (e == 0) {
        // subnormal or zero: m * 2^-24, exact
        const double v = (double)m * zb_f64_from_bits((zb_u64)(1023 - 24) << 52);
        return sign ? -v : v;
    }
    return zb_f64_from_bits(sign | ((zb_u64)(e - 15 + 1023) << 52) | (m << 42));
}

__device__ double zb_bf16_to_f64(zb_u16 h) {
    const zb_u64 sign = (zb_u64)(h >> 15) << 63;
    const zb_u32 e = (h >> 7) & 0xff;
    const zb_u64 m = h & 0x7f;
    if (e == 0xff) return zb_f64_from_bits(sign | (0x7ffull << 52) | (m << 45));
    if (e == 0) {
        // subnormal or zero: m * 2^-133, exact
        const double v = (double)m * zb_f64_from_bits((zb_u64)(1023 - 133) << 52);
        return sign ? -v : v;
    }
    return zb_f64_from_bits(sign | ((zb_u64)(e - 127 + 1023) << 52) | (m << 45));
}

// ---- grid-stride helpers ----

__device__ __forceinline__ zb_u64 zb_first_index() {
    return (zb_u64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ zb_u64 zb_grid_step() {
    return (zb_u64)blockDim.x * gridDim.x;
}
