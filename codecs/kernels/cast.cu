// Converting copy between scalar kinds; the twin of src/host/cast.rs (see its docs for the
// rules). One kernel, with warp-uniform switches on the kinds.
// Kind codes (ScalarKind order): 0 bool, 1 i8, 2 i16, 3 i32, 4 i64, 5 u8, 6 u16, 7 u32,
// 8 u64, 9 f16, 10 bf16, 11 f32, 12 f64, 13 c64, 14 c128.

#define ZB_CLS_INT 0
#define ZB_CLS_UINT 1
#define ZB_CLS_FLOAT 2
#define ZB_CLS_COMPLEX 3

struct ZbVal {
    int cls;
    zb_i64 i;
    zb_u64 u;
    double re;
    double im;
};

__device__ __forceinline__ zb_u32 zb_kind_size(zb_u32 k) {
    switch (k) {
        case 0: case 1: case 5: return 1;
        case 2: case 6: case 9: case 10: return 2;
        case 3: case 7: case 11: return 4;
        case 14: return 16;
        default: return 8;
    }
}

// Loads `es` little-endian bytes into (r0, r1).
__device__ __forceinline__ void zb_load_raw(const zb_u8* p, zb_u32 es, bool aligned,
                                            zb_u64& r0, zb_u64& r1) {
    r0 = 0;
    r1 = 0;
    if (aligned) {
        switch (es) {
            case 1: r0 = *p; break;
            case 2: r0 = *(const zb_u16*)p; break;
            case 4: r0 = *(const zb_u32*)p; break;
            case 8: r0 = *(const zb_u64*)p; break;
            default: r0 = ((const zb_u64*)p)[0]; r1 = ((const zb_u64*)p)[1]; break;
        }
    } else {
        for (zb_u32 k = 0; k < es; ++k) {
            if (k < 8) r0 |= (zb_u64)p[k] << (8 * k);
            else r1 |= (zb_u64)p[k] << (8 * (k - 8));
        }
    }
}

__device__ __forceinline__ void zb_store_raw(zb_u8* p, zb_u32 es, bool aligned, zb_u64 r0,
                                             zb_u64 r1) {
    if (aligned) {
        switch (es) {
            case 1: *p = (zb_u8)r0; break;
            case 2: *(zb_u16*)p = (zb_u16)r0; break;
            case 4: *(zb_u32*)p = (zb_u32)r0; break;
            case 8: *(zb_u64*)p = r0; break;
            default: ((zb_u64*)p)[0] = r0; ((zb_u64*)p)[1] = r1; break;
        }
    } else {
        for (zb_u32 k = 0; k < es; ++k) {
            p[k] = (zb_u8)(k < 8 ? r0 >> (8 * k) : r1 >> (8 * (k - 8)));
        }
    }
}

__device__ ZbVal zb_decode(zb_u32 kind, zb_u64 r0, zb_u64 r1) {
    ZbVal v;
    v.cls = ZB_CLS_INT;
    v.i = 0;
    v.u = 0;
    v.re = 0.0;
    v.im = 0.0;
    switch (kind) {
        case 0: v.cls = ZB_CLS_UINT; v.u = (r0 & 0xff) != 0 ? 1 : 0; break;
        case 1: v.i = (signed char)(zb_u8)r0; break;
        case 2: v.i = (short)(zb_u16)r0; break;
        case 3: v.i = (int)(zb_u32)r0; break;
        case 4: v.i = (zb_i64)r0; break;
        case 5: v.cls = ZB_CLS_UINT; v.u = r0 & 0xff; break;
        case 6: v.cls = ZB_CLS_UINT; v.u = r0 & 0xffff; break;
        case 7: v.cls = ZB_CLS_UINT; v.u = r0 & 0xffffffffull; break;
        case 8: v.cls = ZB_CLS_UINT; v.u = r0; break;
        case 9: v.cls = ZB_CLS_FLOAT; v.re = zb_f16_to_f64((zb_u16)r0); break;
        case 10: v.cls = ZB_CLS_FLOAT; v.re = zb_bf16_to_f64((zb_u16)r0); break;
        case 11: v.cls = ZB_CLS_FLOAT; v.re = (double)zb_f32_from_bits((zb_u32)r0); break;
        case 12: v.cls = ZB_CLS_FLOAT; v.re = zb_f64_from_bits(r0); break;
        case 13:
            v.cls = ZB_CLS_COMPLEX;
            v.re = (double)zb_f32_from_bits((zb_u32)r0);
            v.im = (double)zb_f32_from_bits((zb_u32)(r0 >> 32));
            break;
        default:
            v.cls = ZB_CLS_COMPLEX;
            v.re = zb_f64_from_bits(r0);
            v.im = zb_f64_from_bits(r1);
            break;
    }
    return v;
}

// float -> signed integer of range [lo, hi], truncating, saturating, NaN -> 0 (Rust `as`).
// `below` / `above` are the doubles at and beyond which the result saturates.
__device__ __forceinline__ zb_i64 zb_f2i(double d, double below, double above, zb_i64 lo,
                                         zb_i64 hi) {
    if (d != d) return 0;
    if (d >= above) return hi;
    if (d <= below) return lo;
    return (zb_i64)d;
}

__device__ __forceinline__ zb_u64 zb_f2u(double d, double above, zb_u64 hi) {
    if (d != d) return 0;
    if (d >= above) return hi;
    if (d <= -1.0) return 0;
    return (zb_u64)d;
}

// Integer bit pattern (two's complement, to be truncated to the target width) of v.
__device__ __forceinline__ zb_u64 zb_to_int_bits(const ZbVal& v, zb_u32 kind) {
    if (v.cls == ZB_CLS_INT) return (zb_u64)v.i;
    if (v.cls == ZB_CLS_UINT) return v.u;
    const double d = v.re;
    switch (kind) {
        case 1: return (zb_u64)zb_f2i(d, -129.0, 128.0, -128, 127);
        case 2: return (zb_u64)zb_f2i(d, -32769.0, 32768.0, -32768, 32767);
        case 3: return (zb_u64)zb_f2i(d, -2147483649.0, 2147483648.0, -2147483648ll, 2147483647ll);
        case 4:
            if (d != d) return 0;
            if (d >= 9223372036854775808.0) return 0x7fffffffffffffffull;
            if (d < -9223372036854775808.0) return 0x8000000000000000ull;
            return (zb_u64)(zb_i64)d;
        case 5: return zb_f2u(d, 256.0, 0xffull);
        case 6: return zb_f2u(d, 65536.0, 0xffffull);
        case 7: return zb_f2u(d, 4294967296.0, 0xffffffffull);
        default: return zb_f2u(d, 18446744073709551616.0, 0xffffffffffffffffull);
    }
}

__device__ __forceinline__ float zb_to_f32(const ZbVal& v) {
    if (v.cls == ZB_CLS_INT) return (float)v.i;
    if (v.cls == ZB_CLS_UINT) return (float)v.u;
    return (float)v.re;
}

__device__ __forceinline__ double zb_to_f64(const ZbVal& v) {
    if (v.cls == ZB_CLS_INT) return (double)v.i;
    if (v.cls == ZB_CLS_UINT) return (double)v.u;
    return v.re;
}

__device__ void zb_encode(const ZbVal& v, zb_u32 kind, zb_u64& r0, zb_u64& r1) {
    r1 = 0;
    switch (kind) {
        case 0: {
            bool b;
            if (v.cls == ZB_CLS_INT) b = v.i != 0;
            else if (v.cls == ZB_CLS_UINT) b = v.u != 0;
            else if (v.cls == ZB_CLS_FLOAT) b = v.re != 0.0;
            else b = v.re != 0.0 || v.im != 0.0;
            r0 = b ? 1 : 0;
            break;
        }
        case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8:
            r0 = zb_to_int_bits(v, kind);
            break;
        case 9: r0 = zb_narrow(zb_to_f64(v), 5, 10); break;
        case 10: r0 = zb_narrow(zb_to_f64(v), 8, 7); break;
        case 11: r0 = zb_f32_to_bits(zb_to_f32(v)); break;
        case 12: r0 = zb_f64_to_bits(zb_to_f64(v)); break;
        case 13: {
            const float re = zb_to_f32(v);
            const float im = v.cls == ZB_CLS_COMPLEX ? (float)v.im : 0.0f;
            r0 = (zb_u64)zb_f32_to_bits(re) | ((zb_u64)zb_f32_to_bits(im) << 32);
            break;
        }
        default: {
            const double re = zb_to_f64(v);
            const double im = v.cls == ZB_CLS_COMPLEX ? v.im : 0.0;
            r0 = zb_f64_to_bits(re);
            r1 = zb_f64_to_bits(im);
            break;
        }
    }
}

template <typename I>
__device__ __forceinline__ void zb_cast_loop(const zb_u8* src, zb_u8* dst, const ZbLayout& L) {
    const zb_u64 step = zb_grid_step();
    const zb_u32 ses = L.elem_size;
    const zb_u32 des = zb_kind_size(L.dst_kind);
    const bool sal = (L.flags & ZB_SRC_ALIGNED) != 0;
    const bool dal = (L.flags & ZB_DST_ALIGNED) != 0;
    for (zb_u64 i = zb_first_index(); i < L.n; i += step) {
        zb_i64 so, dof;
        zb_offsets<I>(L, (I)i, so, dof);
        zb_u64 r0, r1;
        zb_load_raw(src + so, ses, sal, r0, r1);
        const ZbVal v = zb_decode(L.src_kind, r0, r1);
        zb_encode(v, L.dst_kind, r0, r1);
        zb_store_raw(dst + dof, des, dal, r0, r1);
    }
}

extern "C" __global__ void zb_cast(const zb_u8* src, zb_u8* dst, ZbLayout L) {
    if (L.flags & ZB_INDEX64) zb_cast_loop<zb_u64>(src, dst, L);
    else zb_cast_loop<zb_u32>(src, dst, L);
}
