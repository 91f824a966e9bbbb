//! Scalar conversions: correctly rounded float narrowing, casts, and the conversion of
//! operands to an op's computation type.
//!
//! `half`'s `f16::from_f64`/`bf16::from_f64` are not correctly rounded for every f64
//! (they go through f32 with round-to-nearest, or drop the low 32 mantissa bits, so a
//! value just above a tie can round down). The evaluator holds floats in f64, so it
//! rounds through f32 with *round-to-odd*, which makes the second rounding exact
//! ([`crate::dtype::round_to`]).

use ndarray::{ArrayD, CowArray, IxDyn};

use super::tensor::{HostData, HostTensor};
use crate::dtype::{round_to, DataType};

/// Round-to-odd conversion of an i64 to f64 (see `dtype::f64_to_f32_odd`).
fn i64_to_f64_odd(i: i64) -> f64 {
    let f = i as f64;
    // Every f64 of magnitude <= 2^63 converts to i128 exactly.
    let back = f as i128;
    let exact = i as i128;
    if back == exact {
        return f;
    }
    let mut bits = f.to_bits();
    if back.abs() > exact.abs() {
        bits -= 1;
    }
    f64::from_bits(bits | 1)
}

/// Converts an integer to the float type `dtype`, correctly rounded.
pub(crate) fn int_to_float(i: i64, dtype: DataType) -> f64 {
    match dtype {
        DataType::F32 => i as f32 as f64,
        DataType::F16 | DataType::BF16 => round_to(i64_to_f64_odd(i), dtype),
        // PyTorch converts an integer to fp8 through f32 (nearest even, twice).
        DataType::F8E4M3 | DataType::F8E5M2 => round_to(i as f32 as f64, dtype),
        _ => i as f64,
    }
}

/// Float to integer as PyTorch's CUDA casts do (measured on an H100 with PyTorch 2.11,
/// `scripts/semantics/torch_casts.py`): truncation toward zero, out-of-range values and
/// infinities saturate at the integer type's bounds; NaN gives `i64::MIN` for i64, and
/// for i32 0 from f16/bf16/f32 but `i32::MIN` from f64. Generated kernels use the same
/// rule (`nvf_f2i32_*` / `nvf_f2i64` in the preamble).
pub(crate) fn float_to_int(x: f64, from: DataType, to: DataType) -> i64 {
    match (to, x.is_nan()) {
        (DataType::I32, true) if from == DataType::F64 => i32::MIN as i64,
        (DataType::I32, true) => 0,
        (DataType::I32, false) => x as i32 as i64,
        (_, true) => i64::MIN,
        (_, false) => x as i64,
    }
}

/// Wraps an i64 into the integer type `dtype` (two's complement).
#[inline]
pub(crate) fn wrap_int(i: i64, dtype: DataType) -> i64 {
    if dtype == DataType::I32 {
        i as i32 as i64
    } else {
        i
    }
}

/// Wraps every element in place when `dtype` is i32.
pub(crate) fn wrap_array(a: &mut ArrayD<i64>, dtype: DataType) {
    if dtype == DataType::I32 {
        a.mapv_inplace(|v| v as i32 as i64);
    }
}

/// The explicit `cast` of a value's data to `to`.
pub(crate) fn cast_data(data: &HostData, from: DataType, to: DataType) -> HostData {
    match (data, to.category()) {
        (HostData::Float(a), crate::dtype::Category::Floating) => {
            HostData::Float(a.mapv(|v| round_to(v, to)))
        }
        (HostData::Float(a), crate::dtype::Category::Integer) => {
            HostData::Int(a.mapv(|v| float_to_int(v, from, to)))
        }
        (HostData::Float(a), crate::dtype::Category::Bool) => HostData::Bool(a.mapv(|v| v != 0.0)),
        (HostData::Int(a), crate::dtype::Category::Floating) => {
            HostData::Float(a.mapv(|v| int_to_float(v, to)))
        }
        (HostData::Int(a), crate::dtype::Category::Integer) => {
            HostData::Int(a.mapv(|v| wrap_int(v, to)))
        }
        (HostData::Int(a), crate::dtype::Category::Bool) => HostData::Bool(a.mapv(|v| v != 0)),
        (HostData::Bool(a), crate::dtype::Category::Floating) => {
            HostData::Float(a.mapv(|v| v as u8 as f64))
        }
        (HostData::Bool(a), crate::dtype::Category::Integer) => HostData::Int(a.mapv(|v| v as i64)),
        (HostData::Bool(a), crate::dtype::Category::Bool) => HostData::Bool(a.clone()),
    }
}

/// The float type an operand is rounded to when it is converted to the floating
/// computation type `c`: `c` itself for tensors; for scalars meeting f16/bf16/fp8
/// math, f32 (PyTorch keeps such scalars in its f32 "opmath" type).
fn float_target(c: DataType, is_scalar: bool) -> DataType {
    if is_scalar && c.is_narrow_float() {
        DataType::F32
    } else {
        c
    }
}

/// The operand as f64 values of the floating computation type `c`. A value already
/// of type `c` is used as is (no copy, no rounding); any other is converted as a cast
/// would (see [`float_target`]).
pub(crate) fn operand_f64(
    t: &HostTensor,
    c: DataType,
    is_scalar: bool,
) -> CowArray<'_, f64, IxDyn> {
    let target = float_target(c, is_scalar);
    match t.data() {
        HostData::Float(a) if t.dtype() == c => CowArray::from(a.view()),
        HostData::Float(a) => CowArray::from(a.mapv(|v| round_to(v, target))),
        HostData::Int(a) => CowArray::from(a.mapv(|v| int_to_float(v, target))),
        HostData::Bool(a) => CowArray::from(a.mapv(|v| v as u8 as f64)),
    }
}

/// The operand as i64 values of the integer computation type `c` (i32 values wrap).
/// Returns `None` for float operands: promotion never converts a float to an integer.
pub(crate) fn operand_i64(t: &HostTensor, c: DataType) -> Option<CowArray<'_, i64, IxDyn>> {
    match t.data() {
        HostData::Int(a) if t.dtype() == c || c == DataType::I64 => Some(CowArray::from(a.view())),
        HostData::Int(a) => Some(CowArray::from(a.mapv(|v| wrap_int(v, c)))),
        HostData::Bool(a) => Some(CowArray::from(a.mapv(|v| v as i64))),
        HostData::Float(_) => None,
    }
}

/// The operand as booleans when it is a bool value.
pub(crate) fn operand_bool(t: &HostTensor) -> Option<CowArray<'_, bool, IxDyn>> {
    match t.data() {
        HostData::Bool(a) => Some(CowArray::from(a.view())),
        _ => None,
    }
}

/// The operand's truth values (nonzero, NaN is true), for the logical ops.
pub(crate) fn operand_truth(t: &HostTensor) -> CowArray<'_, bool, IxDyn> {
    match t.data() {
        HostData::Bool(a) => CowArray::from(a.view()),
        HostData::Int(a) => CowArray::from(a.mapv(|v| v != 0)),
        HostData::Float(a) => CowArray::from(a.mapv(|v| v != 0.0)),
    }
}

impl HostTensor {
    /// Converts to `dtype` with `cast` semantics (float to int truncates toward zero,
    /// saturating, NaN to 0; int to i32 wraps; nonzero to `true`; to float rounds to
    /// nearest even).
    pub fn cast(&self, dtype: DataType) -> HostTensor {
        if dtype == self.dtype {
            return self.clone();
        }
        HostTensor {
            dtype,
            data: cast_data(&self.data, self.dtype, dtype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All finite values of a 16-bit format, sorted, as f64.
    fn all_values(decode: impl Fn(u16) -> f64) -> Vec<f64> {
        let mut v: Vec<f64> = (0..=u16::MAX)
            .map(decode)
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v.dedup();
        v
    }

    /// The correctly rounded value by brute force: nearest representable value, ties to
    /// the one with an even last bit, overflow beyond max + ulp/2 to infinity.
    fn nearest(
        x: f64,
        table: &[f64],
        encode_is_even: impl Fn(f64) -> bool,
        max_half_ulp: f64,
    ) -> f64 {
        let max = *table.last().unwrap();
        if x.abs() >= max + max_half_ulp {
            return f64::INFINITY.copysign(x);
        }
        let i = table.partition_point(|&t| t < x);
        if i < table.len() && table[i] == x {
            return x;
        }
        let hi = table[i.min(table.len() - 1)];
        let lo = table[i.saturating_sub(1)];
        let (dl, dh) = (x - lo, hi - x);
        let r = if dl < dh {
            lo
        } else if dh < dl {
            hi
        } else if encode_is_even(lo) {
            lo
        } else {
            hi
        };
        if r == 0.0 {
            0.0f64.copysign(x)
        } else {
            r
        }
    }

    fn check_format(
        dtype: DataType,
        decode: impl Fn(u16) -> f64,
        bits: impl Fn(f64) -> u16,
        max_half_ulp: f64,
    ) {
        let table = all_values(&decode);
        let even = |v: f64| bits(v) & 1 == 0;
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut cases: Vec<f64> = Vec::new();
        // Midpoints of neighbours, nudged by one f64 ulp either way: the hard cases.
        for w in table.windows(2).step_by(7) {
            let mid = (w[0] + w[1]) / 2.0;
            cases.extend([
                mid,
                f64::from_bits(mid.to_bits() + 1),
                f64::from_bits(mid.to_bits() - 1),
            ]);
            // Just above a tie by a bit far below f32 precision.
            cases.push(mid + mid.abs() * 2f64.powi(-45));
        }
        for _ in 0..20000 {
            let m = (next() % 4000) as f64 / 100.0 - 30.0;
            cases.push((next() as f64 / u64::MAX as f64 - 0.5) * 2f64.powf(m));
        }
        for x in cases {
            let want = nearest(x, &table, even, max_half_ulp);
            let got = round_to(x, dtype);
            assert!(
                got == want && got.is_sign_negative() == want.is_sign_negative(),
                "{dtype} {x:e}: got {got:e}, want {want:e}"
            );
        }
    }

    #[test]
    fn f16_rounding_is_correct() {
        // max 65504, ulp at the top 32.
        check_format(
            DataType::F16,
            |b| half::f16::from_bits(b).to_f64(),
            |v| half::f16::from_f64(v).to_bits(),
            16.0,
        );
    }

    #[test]
    fn bf16_rounding_is_correct() {
        let max = half::bf16::MAX.to_f64();
        let ulp = max - half::bf16::from_bits(half::bf16::MAX.to_bits() - 1).to_f64();
        check_format(
            DataType::BF16,
            |b| half::bf16::from_bits(b).to_f64(),
            |v| half::bf16::from_f64(v).to_bits(),
            ulp / 2.0,
        );
    }

    #[test]
    fn just_above_a_tie_rounds_up() {
        // 1 + 2^-8 is a bf16 tie (rounds to even = 1); a hair above must round up.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(round_to(x, DataType::BF16), 1.0 + 2f64.powi(-7));
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(round_to(x, DataType::F16), 1.0 + 2f64.powi(-10));
    }

    #[test]
    fn integer_conversions() {
        assert_eq!(int_to_float(16_777_217, DataType::F32), 16_777_216.0);
        assert_eq!(int_to_float(65_519, DataType::F16), 65_504.0);
        assert_eq!(int_to_float(65_520, DataType::F16), f64::INFINITY);
        // 2^62 + 2^54 + 1 is just above a bf16 tie at 2^62 (1 + 2^-8 pattern): rounds up.
        let i = (1i64 << 62) + (1i64 << 54) + 1;
        assert_eq!(
            int_to_float(i, DataType::BF16),
            2f64.powi(62) + 2f64.powi(55)
        );
        assert_eq!(
            int_to_float((1i64 << 62) + (1i64 << 54), DataType::BF16),
            2f64.powi(62)
        );
        assert_eq!(float_to_int(-2.7, DataType::F32, DataType::I64), -2);
        assert_eq!(float_to_int(f64::NAN, DataType::F32, DataType::I32), 0);
        assert_eq!(
            float_to_int(f64::NAN, DataType::F64, DataType::I32),
            i32::MIN as i64
        );
        assert_eq!(
            float_to_int(f64::NAN, DataType::F16, DataType::I64),
            i64::MIN
        );
        assert_eq!(
            float_to_int(f64::INFINITY, DataType::BF16, DataType::I64),
            i64::MAX
        );
        assert_eq!(
            float_to_int(3e9, DataType::F32, DataType::I32),
            i32::MAX as i64
        );
        assert_eq!(float_to_int(-1e300, DataType::F64, DataType::I64), i64::MIN);
        assert_eq!(wrap_int(1 << 31, DataType::I32), i32::MIN as i64);
    }
}
