//! The two 8-bit float formats: `f8e4m3` (PyTorch's `float8_e4m3fn`) and `f8e5m2`
//! (`float8_e5m2`), their exact conversions from and to `f32`, and host element types.
//!
//! Both conversions from `f32` round to nearest, ties to even, by integer arithmetic on
//! the bit patterns (the generated kernels' preamble does the same arithmetic, so both
//! devices give the same byte for the same `f32`):
//!
//! * **e4m3fn** (1 sign, 4 exponent bits with bias 7, 3 mantissa bits): no infinities;
//!   the one NaN pattern per sign is `S.1111.111`; the largest finite value is
//!   `448 = 0x7e`; subnormals down to `2^-9 = 0x01`. A value whose rounded magnitude
//!   is above 448 (that is, `|x| > 464`: 464 is the tie between 448 and the NaN
//!   pattern's would-be value 480, and ties go to the even 448) becomes NaN, as do
//!   `±inf` and NaN: PyTorch's non-saturating `float8_e4m3fn` conversion. The sign is
//!   kept (`-inf -> 0xff`), and `-0.0 -> 0x80`.
//! * **e5m2** (1 sign, 5 exponent bits with bias 15, 2 mantissa bits): IEEE-like;
//!   largest finite `57344 = 0x7b`, `inf = 0x7c`, NaN `0x7f` (with the input's sign);
//!   subnormals down to `2^-16`. A value whose rounded magnitude exceeds 57344 (that
//!   is, `|x| >= 61440`, the tie rounding to the even `0x7c`) becomes `±inf`.
//!
//! Decoding to `f32` is exact; a NaN code decodes to the quiet NaN `0x7fc00000` with
//! the code's sign.

use std::fmt;

/// Rounds the 24-bit significand `mant` (hidden bit included) shifted right by `shift`
/// to nearest, ties to even. `shift` is at least 1.
fn shift_round(mant: u32, shift: u32) -> u32 {
    if shift > 24 {
        // mant < 2^24 <= half of 2^shift: below the halfway point.
        return 0;
    }
    let q = mant >> shift;
    let rem = mant & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// The code of a finite nonzero `ax` (an f32 bit pattern without sign) in a format with
/// `mbits` mantissa bits and exponent bias `bias`, rounded to nearest even. Below the
/// smallest normal the result is a subnormal code (possibly 0, or the smallest normal
/// after rounding up); above, the exponent field may round up into the next binade,
/// which the caller checks against its format's top.
fn round_bits(ax: u32, mbits: u32, bias: u32) -> u32 {
    let e = ax >> 23;
    if e == 0 {
        // An f32 subnormal is far below half of any fp8 subnormal.
        return 0;
    }
    let mant = (ax & 0x007f_ffff) | 0x0080_0000;
    // Smallest normal exponent of the format, as an f32 biased exponent.
    let min_normal = 127 + 1 - bias;
    if e < min_normal {
        // Units of the smallest subnormal 2^(1 - bias - mbits):
        // value = mant * 2^(e - 150), so the count is mant >> (150 - e - (bias - 1 + mbits)).
        let shift = (127 + 23 + 1) - e - bias - mbits;
        return shift_round(mant, shift);
    }
    let code = ((e + bias - 127) << mbits) | ((ax >> (23 - mbits)) & ((1 << mbits) - 1));
    let rem = ax & ((1u32 << (23 - mbits)) - 1);
    let half = 1u32 << (22 - mbits);
    if rem > half || (rem == half && code & 1 == 1) {
        code + 1
    } else {
        code
    }
}

/// `f32` to e4m3fn bits (see the module doc).
pub fn e4m3_from_f32(f: f32) -> u8 {
    let x = f.to_bits();
    let sign = ((x >> 24) & 0x80) as u8;
    let ax = x & 0x7fff_ffff;
    // 480.0 and above (and inf, NaN): the NaN pattern.
    if ax >= 0x43f0_0000 {
        return sign | 0x7f;
    }
    let code = round_bits(ax, 3, 7);
    if code > 0x7e {
        sign | 0x7f
    } else {
        sign | code as u8
    }
}

/// `f32` to e5m2 bits (see the module doc).
pub fn e5m2_from_f32(f: f32) -> u8 {
    let x = f.to_bits();
    let sign = ((x >> 24) & 0x80) as u8;
    let ax = x & 0x7fff_ffff;
    if ax > 0x7f80_0000 {
        return sign | 0x7f;
    }
    // 65536.0 and above, and inf: infinity.
    if ax >= 0x4780_0000 {
        return sign | 0x7c;
    }
    // Rounding up from 57344 gives 0x7c, infinity, by itself.
    sign | round_bits(ax, 2, 15) as u8
}

/// The f32 bits of a subnormal count `m` (1..2^mbits) of units 2^`unit_exp`.
fn subnormal_bits(m: u32, unit_exp: i32) -> u32 {
    let p = 31 - m.leading_zeros();
    let e = (127 + unit_exp + p as i32) as u32;
    (e << 23) | ((m - (1 << p)) << (23 - p))
}

/// e4m3fn bits to `f32`, exactly.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = ((b & 0x80) as u32) << 24;
    let c = (b & 0x7f) as u32;
    let (e, m) = (c >> 3, c & 7);
    let bits = if c == 0x7f {
        0x7fc0_0000
    } else if e == 0 {
        if m == 0 {
            0
        } else {
            subnormal_bits(m, -9)
        }
    } else {
        ((e + 120) << 23) | (m << 20)
    };
    f32::from_bits(sign | bits)
}

/// e5m2 bits to `f32`, exactly.
pub fn e5m2_to_f32(b: u8) -> f32 {
    let sign = ((b & 0x80) as u32) << 24;
    let c = (b & 0x7f) as u32;
    let (e, m) = (c >> 2, c & 3);
    let bits = if e == 31 {
        if m == 0 {
            0x7f80_0000
        } else {
            0x7fc0_0000
        }
    } else if e == 0 {
        if m == 0 {
            0
        } else {
            subnormal_bits(m, -16)
        }
    } else {
        ((e + 112) << 23) | (m << 21)
    };
    f32::from_bits(sign | bits)
}

macro_rules! fp8_type {
    ($t:ident, $enc:ident, $dec:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// A host element type: one byte, the format's bit pattern. Conversions from
        /// `f64` go through `f32` first (round to nearest even twice), as PyTorch's do.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $t(u8);

        impl $t {
            /// The value with bit pattern `bits`.
            pub const fn from_bits(bits: u8) -> Self {
                $t(bits)
            }
            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// `x` rounded to nearest even (see [`crate::fp8`]).
            pub fn from_f32(x: f32) -> Self {
                $t($enc(x))
            }
            /// `x` rounded to `f32`, then to this format.
            pub fn from_f64(x: f64) -> Self {
                $t($enc(x as f32))
            }
            /// The exact value.
            pub fn to_f32(self) -> f32 {
                $dec(self.0)
            }
            /// The exact value.
            pub fn to_f64(self) -> f64 {
                $dec(self.0) as f64
            }
            /// True for the NaN patterns.
            pub fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.to_f32())
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl From<$t> for f32 {
            fn from(v: $t) -> f32 {
                v.to_f32()
            }
        }
    };
}

fp8_type!(
    f8e4m3,
    e4m3_from_f32,
    e4m3_to_f32,
    "8-bit float with 4 exponent and 3 mantissa bits, no infinities (PyTorch's `float8_e4m3fn`)."
);
fp8_type!(
    f8e5m2,
    e5m2_from_f32,
    e5m2_to_f32,
    "8-bit float with 5 exponent and 2 mantissa bits (PyTorch's `float8_e5m2`)."
);

#[cfg(test)]
mod tests;
