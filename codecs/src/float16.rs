//! Correctly rounded narrowing of `f64` to binary16 and bfloat16.
//!
//! `half` 2.x narrows `f64` either through `f32` (double rounding) or by truncating the low
//! mantissa bits before rounding, so neither is round-to-nearest-even in every case. These
//! routines are, and `kernels/common.cuh` holds their bit-for-bit twins, so host and device
//! casts agree exactly.

/// Rounds `x` to nearest-even in a binary format with `ebits` exponent bits and `mbits`
/// mantissa bits (at most 15 bits in total) and returns its bit pattern.
///
/// NaN keeps its sign and top mantissa bits and is quieted; overflow gives infinity.
fn narrow(x: f64, ebits: u32, mbits: u32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 63) as u16) << (ebits + mbits);
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let man = bits & ((1u64 << 52) - 1);
    let emax = (1u16 << ebits) - 1;
    let inf = sign | (emax << mbits);
    if exp == 0x7ff {
        if man == 0 {
            return inf;
        }
        return inf | (1 << (mbits - 1)) | (man >> (52 - mbits)) as u16;
    }
    if exp == 0 {
        // zero or an f64 subnormal: far below the smallest subnormal of either format
        return sign;
    }
    let bias = (1i32 << (ebits - 1)) - 1;
    let te = exp - 1023 + bias; // biased target exponent
    if te >= emax as i32 {
        return inf;
    }
    let m = man | (1u64 << 52);
    let shift = if te >= 1 {
        52 - mbits
    } else {
        52 - mbits + (1 - te) as u32
    };
    if shift >= 54 {
        return sign; // below half the smallest subnormal
    }
    let mut q = m >> shift;
    let rem = m & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    let r = if te >= 1 {
        (((te - 1) as u64) << mbits) + q
    } else {
        q
    };
    if r >= (emax as u64) << mbits {
        return inf;
    }
    sign | r as u16
}

/// `f64` to binary16 bits, round to nearest even.
pub(crate) fn f64_to_f16_bits(x: f64) -> u16 {
    narrow(x, 5, 10)
}

/// `f64` to bfloat16 bits, round to nearest even.
pub(crate) fn f64_to_bf16_bits(x: f64) -> u16 {
    narrow(x, 8, 7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_half_from_f32() {
        // f32 -> f64 is exact, and half's f32 narrowing is correctly rounded.
        let mut s = 0x1234_5678_9abc_def0u64;
        for i in 0..2_000_000u64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let f = if i < 65536 * 4 {
                // walk every f16-relevant exponent densely
                f32::from_bits((i as u32).wrapping_mul(16411) ^ (s as u32 & 0x8000_1fff))
            } else {
                f32::from_bits(s as u32)
            };
            if f.is_nan() {
                continue;
            }
            assert_eq!(
                f64_to_f16_bits(f as f64),
                half::f16::from_f32(f).to_bits(),
                "f16 {f:e}"
            );
            assert_eq!(
                f64_to_bf16_bits(f as f64),
                half::bf16::from_f32(f).to_bits(),
                "bf16 {f:e}"
            );
        }
    }

    #[test]
    fn sticky_bits_below_f32_precision_round_up() {
        // 1 + 2^-11 is exactly halfway between two f16 values; a tiny bit more must round up.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f64_to_f16_bits(x), 0x3c01);
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(f64_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f64_to_f16_bits(65519.99), 0x7bff);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25) * 1.0001), 1);
        assert_eq!(f64_to_f16_bits(-0.0), 0x8000);
        assert_eq!(f64_to_f16_bits(f64::NAN) & 0x7e00, 0x7e00);
        assert_eq!(f64_to_bf16_bits(f64::INFINITY), 0x7f80);
    }
}
