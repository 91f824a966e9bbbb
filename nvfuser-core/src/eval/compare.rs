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
    /// units in the last place); exact for integers and bool.
    pub fn for_dtype(dtype: DataType) -> Self {
        match dtype {
            DataType::F64 => Tolerance::new(1e-12, 1e-12),
            DataType::F32 => Tolerance::new(1e-5, 1e-5),
            DataType::F16 => Tolerance::new(1e-3, 1e-5),
            DataType::BF16 => Tolerance::new(1e-2, 1e-5),
            _ => Tolerance::exact(),
        }
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
