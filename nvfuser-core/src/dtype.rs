//! Data types and PyTorch-style type promotion.
//!
//! Promotion follows PyTorch's `result_type`: types fall in the categories
//! bool < integer < floating. Among tensors of one category the wider type wins, with
//! `f16 + bf16 -> f32`. A scalar operand only changes the result when its category is
//! higher than every tensor operand's (an `i32` tensor times `2.5` is `f32`, the default
//! float type; an `f16` tensor times `2.5` stays `f16`).
//!
//! The 8-bit floats `f8e4m3` and `f8e5m2` promote with nothing, as in PyTorch: an fp8
//! tensor meeting a tensor of any other dtype (the other fp8 type, `bool` and `f32`
//! included) is an error that asks for an explicit cast ([`promote_checked`]); scalars
//! do not change an fp8 tensor's type (an `f8e4m3` tensor times `2.5` stays `f8e4m3`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Element type of a tensor or type of a scalar.
///
/// The enum is `non_exhaustive`: complex types will join it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum DataType {
    /// Boolean, one byte per element.
    Bool,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// 8-bit float, 4 exponent and 3 mantissa bits, no infinities (PyTorch's
    /// `float8_e4m3fn`; see [`crate::fp8`]).
    F8E4M3,
    /// 8-bit float, 5 exponent and 2 mantissa bits (PyTorch's `float8_e5m2`).
    F8E5M2,
}

/// The promotion category of a type: bool < integer < floating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// `bool`.
    Bool,
    /// Signed integers.
    Integer,
    /// Floating point types.
    Floating,
}

impl DataType {
    /// Every supported type, in a fixed order (useful for tests and tables).
    pub const ALL: [DataType; 9] = [
        DataType::Bool,
        DataType::I32,
        DataType::I64,
        DataType::F16,
        DataType::BF16,
        DataType::F32,
        DataType::F64,
        DataType::F8E4M3,
        DataType::F8E5M2,
    ];

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DataType::Bool | DataType::F8E4M3 | DataType::F8E5M2 => 1,
            DataType::F16 | DataType::BF16 => 2,
            DataType::I32 | DataType::F32 => 4,
            DataType::I64 | DataType::F64 => 8,
        }
    }

    /// The promotion category.
    pub fn category(self) -> Category {
        match self {
            DataType::Bool => Category::Bool,
            DataType::I32 | DataType::I64 => Category::Integer,
            _ => Category::Floating,
        }
    }

    /// True for floating point types.
    pub fn is_float(self) -> bool {
        self.category() == Category::Floating
    }

    /// True for integer types (not bool).
    pub fn is_int(self) -> bool {
        self.category() == Category::Integer
    }

    /// True for f16 and bf16, whose arithmetic (reductions in particular) runs in f32.
    pub fn is_half(self) -> bool {
        matches!(self, DataType::F16 | DataType::BF16)
    }

    /// True for the 8-bit floats `f8e4m3` and `f8e5m2`.
    pub fn is_fp8(self) -> bool {
        matches!(self, DataType::F8E4M3 | DataType::F8E5M2)
    }

    /// True for the float types narrower than f32 (f16, bf16 and the fp8 types): their
    /// math computes in f32 and rounds once to the type.
    pub fn is_narrow_float(self) -> bool {
        self.is_half() || self.is_fp8()
    }

    /// The type math and reductions over this type compute in: f32 for f16, bf16 and
    /// the fp8 types, else itself.
    pub fn compute_type(self) -> DataType {
        if self.is_narrow_float() {
            DataType::F32
        } else {
            self
        }
    }

    /// The name used in `fusion!` source and in printed IR (`bf16`, `f32`, `i64`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::F16 => "f16",
            DataType::BF16 => "bf16",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::F8E4M3 => "f8e4m3",
            DataType::F8E5M2 => "f8e5m2",
        }
    }

    /// Parses a name produced by [`DataType::name`].
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The default type of a category when a scalar lifts a tensor into it.
    fn category_default(c: Category) -> DataType {
        match c {
            Category::Bool => DataType::Bool,
            Category::Integer => DataType::I64,
            Category::Floating => DataType::F32,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Promotes two types of equal standing (both tensors, or both scalars).
pub fn promote_pair(a: DataType, b: DataType) -> DataType {
    use DataType::*;
    if a == b {
        return a;
    }
    if a.is_fp8() || b.is_fp8() {
        // Refused by `promote_checked` (the builder's rule); f32 keeps this total.
        return F32;
    }
    match (a.category(), b.category()) {
        (ca, cb) if ca != cb => {
            if ca > cb {
                a
            } else {
                b
            }
        }
        _ => match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ => {
                if a.size_bytes() >= b.size_bytes() {
                    a
                } else {
                    b
                }
            }
        },
    }
}

/// One operand of an op, for promotion: its type and whether it is a scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The operand's type.
    pub dtype: DataType,
    /// Scalars participate in promotion only across categories.
    pub is_scalar: bool,
}

/// PyTorch `result_type` over several operands.
pub fn promote(operands: &[Operand]) -> Option<DataType> {
    let tensors = operands.iter().filter(|o| !o.is_scalar).map(|o| o.dtype);
    let scalars = operands.iter().filter(|o| o.is_scalar).map(|o| o.dtype);
    let t = tensors.reduce(promote_pair);
    let s = scalars.reduce(promote_pair);
    match (t, s) {
        (Some(t), Some(s)) if s.category() > t.category() => {
            Some(DataType::category_default(s.category()))
        }
        (Some(t), _) => Some(t),
        (None, s) => s,
    }
}

/// [`promote`], refusing what PyTorch refuses: an fp8 type meeting any other type
/// among the tensors (or among the scalars). The error holds the two types.
pub fn promote_checked(operands: &[Operand]) -> Result<Option<DataType>, (DataType, DataType)> {
    for group in [false, true] {
        let mut types = operands
            .iter()
            .filter(|o| o.is_scalar == group)
            .map(|o| o.dtype);
        if let Some(first) = types.next() {
            for d in types {
                if d != first && (d.is_fp8() || first.is_fp8()) {
                    return Err((first, d));
                }
            }
        }
    }
    Ok(promote(operands))
}

/// A constant scalar value. Floats compare and hash by bit pattern so that constants
/// are part of a fusion's structural identity (and `NaN` equals itself).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum ScalarValue {
    /// A boolean.
    Bool(bool),
    /// An integer (any integer type).
    Int(i64),
    /// A float (any float type), held in f64.
    Float(f64),
}

impl PartialEq for ScalarValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ScalarValue::Bool(a), ScalarValue::Bool(b)) => a == b,
            (ScalarValue::Int(a), ScalarValue::Int(b)) => a == b,
            (ScalarValue::Float(a), ScalarValue::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for ScalarValue {}

impl std::hash::Hash for ScalarValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            ScalarValue::Bool(b) => (0u8, *b).hash(state),
            ScalarValue::Int(i) => (1u8, *i).hash(state),
            ScalarValue::Float(f) => (2u8, f.to_bits()).hash(state),
        }
    }
}

impl ScalarValue {
    /// The natural type of the value (`bool`, `i64`, `f64`).
    pub fn natural_dtype(self) -> DataType {
        match self {
            ScalarValue::Bool(_) => DataType::Bool,
            ScalarValue::Int(_) => DataType::I64,
            ScalarValue::Float(_) => DataType::F64,
        }
    }

    /// The value as f64 (booleans are 0 or 1).
    pub fn as_f64(self) -> f64 {
        match self {
            ScalarValue::Bool(b) => b as u8 as f64,
            ScalarValue::Int(i) => i as f64,
            ScalarValue::Float(f) => f,
        }
    }

    /// The value as i64 when it is an integer or bool; floats give `None`.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            ScalarValue::Bool(b) => Some(b as i64),
            ScalarValue::Int(i) => Some(i),
            ScalarValue::Float(_) => None,
        }
    }

    /// Converts the value to `dtype` the way a cast would (floats truncate toward zero
    /// into integers, saturating; integers wrap into i32; anything nonzero is `true`).
    pub fn cast(self, dtype: DataType) -> ScalarValue {
        match dtype.category() {
            Category::Bool => ScalarValue::Bool(match self {
                ScalarValue::Bool(b) => b,
                ScalarValue::Int(i) => i != 0,
                ScalarValue::Float(f) => f != 0.0,
            }),
            Category::Integer => {
                // Floats truncate and saturate (as CUDA's conversions); integers wrap.
                ScalarValue::Int(match (self, dtype) {
                    (ScalarValue::Float(f), DataType::I32) => f as i32 as i64,
                    (ScalarValue::Float(f), _) => f as i64,
                    (ScalarValue::Bool(b), _) => b as i64,
                    (ScalarValue::Int(i), DataType::I32) => i as i32 as i64,
                    (ScalarValue::Int(i), _) => i,
                })
            }
            Category::Floating => ScalarValue::Float(round_to(self.as_f64(), dtype)),
        }
    }
}

impl fmt::Display for ScalarValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarValue::Bool(b) => write!(f, "{b}"),
            ScalarValue::Int(i) => write!(f, "{i}"),
            ScalarValue::Float(x) => {
                if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x:?}")
                }
            }
        }
    }
}

impl From<bool> for ScalarValue {
    fn from(v: bool) -> Self {
        ScalarValue::Bool(v)
    }
}
impl From<i64> for ScalarValue {
    fn from(v: i64) -> Self {
        ScalarValue::Int(v)
    }
}
impl From<i32> for ScalarValue {
    fn from(v: i32) -> Self {
        ScalarValue::Int(v as i64)
    }
}
impl From<f64> for ScalarValue {
    fn from(v: f64) -> Self {
        ScalarValue::Float(v)
    }
}
impl From<f32> for ScalarValue {
    fn from(v: f32) -> Self {
        ScalarValue::Float(v as f64)
    }
}

/// Rounds `x` to f32 toward zero and sets the last bit when the result is inexact
/// ("round to odd"). Rounding that to any format with at least two bits less precision
/// (f16, bf16) with round-to-nearest-even gives the correctly rounded result.
fn f64_to_f32_odd(x: f64) -> f32 {
    let f = x as f32;
    if !x.is_finite() || f as f64 == x {
        return f;
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > x.abs() {
        // f was rounded away from zero (possibly to infinity): step back toward zero.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// Rounds an f64 to the nearest value of the float type `dtype` (ties to even),
/// returned as f64. For f32, f16 and bf16 this is correctly rounded for every input, unlike a conversion
/// through `half`'s f64 paths (which go through f32 with round-to-nearest, so a value
/// just above a tie can round down; rounding to f32 with round-to-odd first makes the
/// second rounding exact). The fp8 types round to f32 first and then to the format,
/// both to nearest even, as PyTorch does (so a value just above an fp8 tie by less than
/// half an f32 ulp rounds as the tie). Non-float types return `x` unchanged.
pub fn round_to(x: f64, dtype: DataType) -> f64 {
    match dtype {
        DataType::F32 => x as f32 as f64,
        DataType::F16 => half::f16::from_f32(f64_to_f32_odd(x)).to_f64(),
        DataType::BF16 => half::bf16::from_f32(f64_to_f32_odd(x)).to_f64(),
        // Through f32 with round-to-nearest, as PyTorch converts a double (the fp8
        // types have constructors from `float` only).
        DataType::F8E4M3 => crate::fp8::f8e4m3::from_f64(x).to_f64(),
        DataType::F8E5M2 => crate::fp8::f8e5m2::from_f64(x).to_f64(),
        _ => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    fn t(d: DataType) -> Operand {
        Operand {
            dtype: d,
            is_scalar: false,
        }
    }
    fn s(d: DataType) -> Operand {
        Operand {
            dtype: d,
            is_scalar: true,
        }
    }

    #[test]
    fn tensor_tensor_promotion_table() {
        let cases = [
            (Bool, Bool, Bool),
            (Bool, I32, I32),
            (I32, I64, I64),
            (I32, F16, F16),
            (F16, BF16, F32),
            (BF16, F16, F32),
            (F16, F32, F32),
            (BF16, F64, F64),
            (F32, F64, F64),
            (I64, F16, F16),
            (Bool, BF16, BF16),
        ];
        for (a, b, want) in cases {
            assert_eq!(promote(&[t(a), t(b)]), Some(want), "{a} + {b}");
            assert_eq!(promote(&[t(b), t(a)]), Some(want), "{b} + {a}");
        }
    }

    #[test]
    fn scalar_does_not_promote_within_category() {
        assert_eq!(promote(&[t(F16), s(F64)]), Some(F16));
        assert_eq!(promote(&[t(BF16), s(F32)]), Some(BF16));
        assert_eq!(promote(&[t(I32), s(I64)]), Some(I32));
        // Across categories the default type of the higher category wins.
        assert_eq!(promote(&[t(I32), s(F64)]), Some(F32));
        assert_eq!(promote(&[t(Bool), s(I64)]), Some(I64));
        assert_eq!(promote(&[t(Bool), s(F32)]), Some(F32));
        // A lower-category scalar never changes a tensor.
        assert_eq!(promote(&[t(F16), s(I64)]), Some(F16));
        // Scalars alone promote among themselves.
        assert_eq!(promote(&[s(I64), s(F64)]), Some(F64));
        assert_eq!(promote(&[s(F32), s(F64)]), Some(F64));
    }

    #[test]
    fn fp8_promotes_with_nothing_but_scalars() {
        // Same type: itself. Any other tensor type, the other fp8 included: refused.
        assert_eq!(promote_checked(&[t(F8E4M3), t(F8E4M3)]), Ok(Some(F8E4M3)));
        for other in DataType::ALL.into_iter().filter(|&d| d != F8E4M3) {
            assert_eq!(
                promote_checked(&[t(F8E4M3), t(other)]),
                Err((F8E4M3, other)),
                "f8e4m3 + {other}"
            );
            assert_eq!(
                promote_checked(&[t(other), t(F8E4M3)]),
                Err((other, F8E4M3))
            );
        }
        assert_eq!(
            promote_checked(&[t(F8E5M2), t(F8E4M3)]),
            Err((F8E5M2, F8E4M3))
        );
        // Python-like scalars leave an fp8 tensor's type alone.
        for sc in [Bool, I64, I32, F64, F32, F16] {
            assert_eq!(
                promote_checked(&[t(F8E5M2), s(sc)]),
                Ok(Some(F8E5M2)),
                "{sc}"
            );
        }
        // An fp8 scalar meets other tensors as any float scalar does.
        assert_eq!(promote_checked(&[t(F32), s(F8E4M3)]), Ok(Some(F32)));
        assert_eq!(promote_checked(&[t(I32), s(F8E4M3)]), Ok(Some(F32)));
        assert_eq!(F8E4M3.size_bytes(), 1);
        assert_eq!(F8E5M2.compute_type(), F32);
        assert_eq!(DataType::from_name("f8e5m2"), Some(F8E5M2));
        assert_eq!(F8E4M3.to_string(), "f8e4m3");
        assert_eq!(F8E4M3.category(), Category::Floating);
    }

    #[test]
    fn rounding_to_fp8_goes_through_f32() {
        // 0.1 -> 0x1d = 0.1015625 (see fp8::tests).
        assert_eq!(round_to(0.1, F8E4M3), 0.1015625);
        assert_eq!(round_to(0.1, F8E5M2), 0.09375);
        // 1 + 2^-4 + 2^-30 is above the e4m3 tie 1 + 2^-4 only by less than half an
        // f32 ulp: f32 rounds it onto the tie, which goes to the even 1.0 (PyTorch's
        // double -> float -> fp8).
        assert_eq!(round_to(1.0 + 2f64.powi(-4) + 2f64.powi(-30), F8E4M3), 1.0);
        assert!(round_to(500.0, F8E4M3).is_nan());
        assert_eq!(round_to(1e6, F8E5M2), f64::INFINITY);
        assert_eq!(
            ScalarValue::Float(449.0).cast(F8E4M3),
            ScalarValue::Float(448.0)
        );
    }

    #[test]
    fn rounding_to_half_types() {
        assert_eq!(round_to(1.0 + 1.0 / 2048.0, F16), 1.0); // tie rounds to even
        assert_eq!(round_to(1.0 + 3.0 / 2048.0, F16), 1.0 + 2.0 / 1024.0);
        assert_eq!(round_to(1.00390625, BF16), 1.0); // 1 + 2^-8 ties to even
        assert_eq!(round_to(0.1, F32), 0.1f32 as f64);
    }

    #[test]
    fn scalar_cast_semantics() {
        assert_eq!(ScalarValue::Float(-2.7).cast(I64), ScalarValue::Int(-2));
        assert_eq!(ScalarValue::Int(3).cast(Bool), ScalarValue::Bool(true));
        assert_eq!(
            ScalarValue::Int(1 << 40).cast(I32),
            ScalarValue::Int(0),
            "integer casts to i32 wrap"
        );
        assert_eq!(
            ScalarValue::Float(3e9).cast(I32),
            ScalarValue::Int(i32::MAX as i64),
            "float casts saturate"
        );
        assert_eq!(ScalarValue::Float(f64::NAN), ScalarValue::Float(f64::NAN));
        assert_ne!(ScalarValue::Float(0.0), ScalarValue::Float(-0.0));
    }
}
