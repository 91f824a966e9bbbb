//! Comparing tensors with dtype-aware tolerances (the check every GPU test makes).

use std::fmt;

use ndarray::ArrayD;

use super::tensor::{HostData, HostTensor};
use crate::dtype::{DataType, ScalarValue};

/// How close two float values must be: `|actual - expected| <= atol + rtol * |expected|`.
/// NaN matches NaN; an infinity matches only the same infinity. Integers and bools
/// always compare exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// A tolerance.
    pub fn new(rtol: f64, atol: f64) -> Self {
        Tolerance { rtol, atol }
    }

    /// Exact equality (NaN still matches NaN).
    pub fn exact() -> Self {
        Tolerance {
            rtol: 0.0,
            atol: 0.0,
        }
    }

    /// The default for comparing results of type `dtype`: f64 `1e-12`/`1e-12`, f32
    /// `1e-5`/`1e-5`, f16 `1e-3`/`1e-5`, bf16 `1e-2`/`1e-5` (rtol/atol, about one or two
    /// units in the last place); f8e4m3 `2^-3`/`2^-9` and f8e5m2 `2^-2`/`2^-16` (one
    /// unit in the last place, and the smallest subnormal: an f32 result a few f32 ulps
    /// off can round to the neighbouring fp8 value); exact for integers and bool.
    pub fn for_dtype(dtype: DataType) -> Self {
        match dtype {
            DataType::F8E4M3 => Tolerance::new(0.125, 2f64.powi(-9)),
            DataType::F8E5M2 => Tolerance::new(0.25, 2f64.powi(-16)),
            DataType::F64 => Tolerance::new(1e-12, 1e-12),
            DataType::F32 => Tolerance::new(1e-5, 1e-5),
            DataType::F16 => Tolerance::new(1e-3, 1e-5),
            DataType::BF16 => Tolerance::new(1e-2, 1e-5),
            _ => Tolerance::exact(),
        }
    }

    /// The tolerance of a `cumsum` or `cumprod` along a dim of `len` elements, whose
    /// result has type `dtype` and whose running values reach `magnitude` in absolute
    /// value (the largest `|element|` of the expected output, when the running value
    /// does not cancel on the way): [`for_dtype`](Self::for_dtype) plus an absolute
    /// `len * u * magnitude`, with `u` the unit roundoff of the type the scan computes
    /// in (`2^-24` for f32, f16 and bf16, which scan in f32; `2^-53` for f64). A kernel
    /// rounds the running value up to `len` times, in any association order, against
    /// the reference's f64 running value: the bound of a sum over the same `len`
    /// elements. Exact for integers and bool; `cummax`/`cummin` select an element and
    /// take [`for_dtype`](Self::for_dtype).
    pub fn for_scan(dtype: DataType, len: usize, magnitude: f64) -> Self {
        let base = Self::for_dtype(dtype);
        let unit = match dtype {
            DataType::F64 => f64::EPSILON / 2.0,
            DataType::F32 => f64::from(f32::EPSILON) / 2.0,
            d if d.is_narrow_float() => f64::from(f32::EPSILON) / 2.0,
            _ => return base,
        };
        Tolerance::new(base.rtol, base.atol + len as f64 * unit * magnitude.abs())
    }
}

/// Why two tensors differ.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Mismatch {
    /// Different element types.
    DType {
        /// The actual tensor's type.
        actual: DataType,
        /// The expected tensor's type.
        expected: DataType,
    },
    /// Different shapes.
    Shape {
        /// The actual shape.
        actual: Vec<usize>,
        /// The expected shape.
        expected: Vec<usize>,
    },
    /// Some elements differ by more than the tolerance; the worst one is reported.
    Values {
        /// Index of the worst element.
        index: Vec<usize>,
        /// Its actual value.
        actual: ScalarValue,
        /// Its expected value.
        expected: ScalarValue,
        /// `|actual - expected|` (infinite for NaN or infinity mismatches).
        abs_diff: f64,
        /// The difference allowed at that element.
        allowed: f64,
        /// How many elements are out of tolerance.
        count: usize,
        /// How many elements were compared.
        total: usize,
        /// The tolerance used.
        tolerance: Tolerance,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::DType { actual, expected } => {
                write!(f, "dtype mismatch: expected {expected}, found {actual}")
            }
            Mismatch::Shape { actual, expected } => {
                write!(f, "shape mismatch: expected {expected:?}, found {actual:?}")
            }
            Mismatch::Values {
                index,
                actual,
                expected,
                abs_diff,
                allowed,
                count,
                total,
                tolerance,
            } => write!(
                f,
                "{count} of {total} elements differ; worst at {index:?}: actual {actual}, expected {expected} \
                 (|diff| {abs_diff:e} > allowed {allowed:e}; rtol {:e}, atol {:e})",
                tolerance.rtol, tolerance.atol
            ),
        }
    }
}

impl std::error::Error for Mismatch {}

/// Checks that `actual` matches `expected` (same dtype, same shape, every element within
/// `tolerance`). On failure, reports the worst element (largest ratio of difference to
/// allowed difference; NaN and infinity mismatches rank above everything), its index,
/// both values and how many elements failed.
pub fn compare(
    actual: &HostTensor,
    expected: &HostTensor,
    tolerance: Tolerance,
) -> Result<(), Mismatch> {
    if actual.dtype() != expected.dtype() {
        return Err(Mismatch::DType {
            actual: actual.dtype(),
            expected: expected.dtype(),
        });
    }
    if actual.shape() != expected.shape() {
        return Err(Mismatch::Shape {
            actual: actual.shape().to_vec(),
            expected: expected.shape().to_vec(),
        });
    }
    let total = actual.numel();
    // (linear index of the worst element, its badness, count of failures)
    let (worst, count) = match (actual.data(), expected.data()) {
        (HostData::Float(a), HostData::Float(e)) => {
            scan(a, e, |&x, &y| float_badness(x, y, tolerance))
        }
        (HostData::Int(a), HostData::Int(e)) => scan(a, e, |&x, &y| {
            if x == y {
                None
            } else {
                Some((x as i128 - y as i128).unsigned_abs() as f64)
            }
        }),
        (HostData::Bool(a), HostData::Bool(e)) => scan(a, e, |&x, &y| (x != y).then_some(1.0)),
        // Same dtype implies the same storage kind.
        _ => {
            return Err(Mismatch::DType {
                actual: actual.dtype(),
                expected: expected.dtype(),
            })
        }
    };
    let Some((lin, _)) = worst else {
        return Ok(());
    };
    let index = unravel(lin, actual.shape());
    let av = actual.get(&index).unwrap_or(ScalarValue::Int(0));
    let ev = expected.get(&index).unwrap_or(ScalarValue::Int(0));
    let (abs_diff, allowed) = match (av, ev) {
        (ScalarValue::Float(x), ScalarValue::Float(y)) => {
            let d = if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
                f64::INFINITY
            } else {
                (x - y).abs()
            };
            (d, tolerance.atol + tolerance.rtol * y.abs())
        }
        (ScalarValue::Int(x), ScalarValue::Int(y)) => {
            ((x as i128 - y as i128).unsigned_abs() as f64, 0.0)
        }
        _ => (1.0, 0.0),
    };
    Err(Mismatch::Values {
        index,
        actual: av,
        expected: ev,
        abs_diff,
        allowed,
        count,
        total,
        tolerance,
    })
}

/// `None` when `x` matches `y`, else how bad the mismatch is.
fn float_badness(x: f64, y: f64, tol: Tolerance) -> Option<f64> {
    if x == y || (x.is_nan() && y.is_nan()) {
        return None;
    }
    if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
        return Some(f64::INFINITY);
    }
    let diff = (x - y).abs();
    let allowed = tol.atol + tol.rtol * y.abs();
    if diff <= allowed {
        None
    } else if allowed > 0.0 {
        Some(diff / allowed)
    } else {
        Some(f64::MAX)
    }
}

/// Walks both arrays in row-major order; returns the worst (first on ties) mismatch and
/// the number of mismatches.
fn scan<T>(
    a: &ArrayD<T>,
    e: &ArrayD<T>,
    bad: impl Fn(&T, &T) -> Option<f64>,
) -> (Option<(usize, f64)>, usize) {
    let mut worst: Option<(usize, f64)> = None;
    let mut count = 0;
    // `iter()` is row-major whatever the memory layout.
    for (i, (x, y)) in a.iter().zip(e.iter()).enumerate() {
        if let Some(b) = bad(x, y) {
            count += 1;
            if worst.is_none_or(|(_, w)| b > w) {
                worst = Some((i, b));
            }
        }
    }
    (worst, count)
}

fn unravel(mut lin: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = lin % n;
        lin /= n;
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` lanes of `len` values in `[-2, 2)` (a fixed LCG, as f32).
    fn lanes(rows: usize, len: usize) -> Vec<f32> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        (0..rows * len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f64 / (1u64 << 24) as f64 * 4.0 - 2.0) as f32
            })
            .collect()
    }

    /// The reference's cumsum of each lane: the f64 running value rounded to f32 once.
    fn reference(x: &[f32], len: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(x.len());
        for lane in x.chunks(len) {
            let mut acc = 0.0f64;
            out.extend(lane.iter().map(|&v| {
                acc += f64::from(v);
                acc as f32
            }));
        }
        out
    }

    /// A kernel's cumsum of each lane in f32: blocks of `block` elements, each summed in
    /// order, plus the running carry of the blocks before it (none when `carry` is
    /// false); `shift` makes it exclusive, `reverse` runs from the end.
    fn kernel(
        x: &[f32],
        len: usize,
        block: usize,
        carry: bool,
        shift: bool,
        reverse: bool,
    ) -> Vec<f32> {
        let mut out = Vec::with_capacity(x.len());
        for lane in x.chunks(len) {
            let mut lane = lane.to_vec();
            if reverse {
                lane.reverse();
            }
            let mut scanned = Vec::with_capacity(len);
            let mut before = 0.0f32;
            for chunk in lane.chunks(block) {
                let mut acc = 0.0f32;
                let local: Vec<f32> = chunk
                    .iter()
                    .map(|&v| {
                        acc += v;
                        acc
                    })
                    .collect();
                scanned.extend(local.iter().map(|&v| if carry { before + v } else { v }));
                before += acc;
            }
            if shift {
                scanned.pop();
                scanned.insert(0, 0.0);
            }
            if reverse {
                scanned.reverse();
            }
            out.extend(scanned);
        }
        out
    }

    fn check(got: &[f32], want: &[f32], len: usize, tol: Tolerance) -> bool {
        let shape = [got.len() / len, len];
        let g = HostTensor::from_vec(got.to_vec(), &shape).unwrap();
        let w = HostTensor::from_vec(want.to_vec(), &shape).unwrap();
        compare(&g, &w, tol).is_ok()
    }

    #[test]
    fn scan_tolerance_takes_right_scans_and_refuses_wrong_ones() {
        for len in [100, 1000, 4096] {
            let x = lanes(16, len);
            let want = reference(&x, len);
            let magnitude = want.iter().fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
            let tol = Tolerance::for_scan(DataType::F32, len, magnitude);
            for block in [1, 32, 256, len] {
                assert!(
                    check(&kernel(&x, len, block, true, false, false), &want, len, tol),
                    "len {len}, blocks of {block}"
                );
            }
            let exclusive = kernel(&x, len, 256, true, true, false);
            let reversed = kernel(&x, len, 256, true, false, true);
            let lost_carry = kernel(&x, len, 32, false, false, false);
            for (what, got) in [
                ("exclusive", exclusive),
                ("reversed", reversed),
                ("without carries", lost_carry),
            ] {
                assert!(!check(&got, &want, len, tol), "len {len}: {what} passes");
            }
        }
        // Integers and bools stay exact; an f64 scan gets f64's unit roundoff.
        assert_eq!(
            Tolerance::for_scan(DataType::I64, 1000, 1e6),
            Tolerance::exact()
        );
        let t = Tolerance::for_scan(DataType::F64, 1 << 20, 1.0);
        assert_eq!(t.rtol, 1e-12);
        assert!((t.atol - (1e-12 + f64::EPSILON / 2.0 * (1 << 20) as f64)).abs() < 1e-20);
    }
}
