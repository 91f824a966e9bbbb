//! Reductions: sum, prod, max, min, mean, var, var_mean and welford; and the scans
//! cumsum, cumprod, cummax and cummin.
//!
//! The reduced axes are moved innermost and made contiguous, so every output element
//! reduces one contiguous row. Float sums are pairwise in f64.

use ndarray::{ArrayD, ArrayView2, ArrayViewD, IxDyn};

use super::convert::operand_f64;
use super::math::{maximum, minimum};
use super::tensor::{HostData, HostTensor};
use crate::dtype::{Category, DataType};
use crate::error::{Error, Result};
use crate::ir::{ReductionOp, ScanOp};

/// Checks `axes` against the rank and returns the kept axes and the output shape.
fn split_axes(
    op: &str,
    shape: &[usize],
    axes: &[usize],
) -> Result<(Vec<usize>, Vec<usize>, usize)> {
    let rank = shape.len();
    let mut reduced = vec![false; rank];
    for &a in axes {
        if a >= rank {
            return Err(Error::AxisOutOfRange {
                op: op.into(),
                axis: a as i64,
                rank,
            });
        }
        if std::mem::replace(&mut reduced[a], true) {
            return Err(Error::InvalidIr(format!("{op}: axis {a} is listed twice")));
        }
    }
    let kept: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let inner: usize = (0..rank)
        .filter(|&d| reduced[d])
        .map(|d| shape[d])
        .product();
    Ok((kept, out_shape, inner))
}

/// Applies `f` to each row of reduced elements; the result has the kept dims.
fn rows<T: Clone, O>(
    op: &str,
    a: ArrayViewD<'_, T>,
    axes: &[usize],
    f: impl Fn(&[T]) -> O,
) -> Result<ArrayD<O>> {
    let (kept, out_shape, inner) = split_axes(op, a.shape(), axes)?;
    let mut order = kept.clone();
    order.extend(axes.iter().copied());
    let permuted = a.permuted_axes(IxDyn(&order));
    let standard = permuted.as_standard_layout();
    let outer: usize = out_shape.iter().product();
    let data = standard
        .as_slice()
        .ok_or_else(|| Error::InvalidIr(format!("{op}: internal layout error")))?;
    let values: Vec<O> = if inner == 0 {
        (0..outer).map(|_| f(&[])).collect()
    } else {
        let m = ArrayView2::from_shape((outer, inner), data)
            .map_err(|_| Error::InvalidIr(format!("{op}: internal layout error")))?;
        m.outer_iter()
            .map(|row| row.as_slice().map_or_else(|| f(&row.to_vec()), &f))
            .collect()
    };
    ArrayD::from_shape_vec(IxDyn(&out_shape), values)
        .map_err(|_| Error::InvalidIr(format!("{op}: internal shape error")))
}

/// Pairwise sum of `g(x)` over a slice.
fn pairwise(s: &[f64], g: &impl Fn(f64) -> f64) -> f64 {
    if s.len() <= 128 {
        let mut acc = [0.0f64; 4];
        let chunks = s.chunks_exact(4);
        let rest = chunks.remainder();
        for c in chunks {
            for k in 0..4 {
                acc[k] += g(c[k]);
            }
        }
        let tail: f64 = rest.iter().map(|&v| g(v)).sum();
        (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
    } else {
        let mid = s.len() / 2;
        pairwise(&s[..mid], g) + pairwise(&s[mid..], g)
    }
}

fn sum_f(s: &[f64]) -> f64 {
    pairwise(s, &|v| v)
}

/// `op` over `axes` of `x`, computing in the output type `out`.
pub(super) fn reduction(
    op: ReductionOp,
    x: &HostTensor,
    axes: &[usize],
    out: DataType,
) -> Result<HostData> {
    use ReductionOp::*;
    let name = op.name();
    // A max or min over no elements gives its identity (-inf, +inf, the integer type's
    // bounds, false, true); the evaluator refuses the call if an output observes it
    // (`bind::observed_empty_reduction`).
    split_axes(name, x.shape(), axes)?;
    match out.category() {
        Category::Floating => {
            let a = operand_f64(x, out, false);
            let a = a.view();
            let r = match op {
                Sum => rows(name, a, axes, sum_f)?,
                Prod => rows(name, a, axes, |s| s.iter().product())?,
                Max => rows(name, a, axes, |s| {
                    s.iter().copied().fold(f64::NEG_INFINITY, maximum)
                })?,
                Min => rows(name, a, axes, |s| {
                    s.iter().copied().fold(f64::INFINITY, minimum)
                })?,
                // The sum rounded to the output type, then divided (PyTorch's mean:
                // an f32 sum of values near f32::MAX overflows to inf, as on the GPU).
                Mean => rows(name, a, axes, |s| {
                    crate::dtype::round_to(sum_f(s), out) / s.len() as f64
                })?,
            };
            Ok(HostData::Float(r))
        }
        Category::Integer => {
            let a = super::convert::operand_i64(x, out).ok_or_else(|| {
                Error::dtype(name, format!("an operand convertible to {out}"), x.dtype())
            })?;
            let a = a.view();
            let mut r = match op {
                Sum => rows(name, a, axes, |s| {
                    s.iter().fold(0i64, |p, &q| p.wrapping_add(q))
                })?,
                Prod => rows(name, a, axes, |s| {
                    s.iter().fold(1i64, |p, &q| p.wrapping_mul(q))
                })?,
                Max => rows(name, a, axes, |s| {
                    s.iter().copied().max().unwrap_or(i64::MIN)
                })?,
                Min => rows(name, a, axes, |s| {
                    s.iter().copied().min().unwrap_or(i64::MAX)
                })?,
                Mean => return Err(Error::dtype(name, "a floating point type", out)),
            };
            super::convert::wrap_array(&mut r, out);
            Ok(HostData::Int(r))
        }
        Category::Bool => {
            let HostData::Bool(a) = x.data() else {
                return Err(Error::dtype(
                    name,
                    "a bool operand for a bool reduction",
                    x.dtype(),
                ));
            };
            let r = match op {
                Sum | Max => rows(name, a.view(), axes, |s| s.iter().any(|&v| v))?,
                Prod | Min => rows(name, a.view(), axes, |s| s.iter().all(|&v| v))?,
                Mean => return Err(Error::dtype(name, "a floating point type", out)),
            };
            Ok(HostData::Bool(r))
        }
    }
}

/// Per output element: (mean, sum of squared deviations, count), two-pass in f64.
fn moments(
    op: &str,
    x: &HostTensor,
    axes: &[usize],
    c: DataType,
) -> Result<(ArrayD<f64>, ArrayD<f64>, usize)> {
    if !c.is_float() {
        return Err(Error::dtype(op, "a floating point computation type", c));
    }
    let (_, _, n) = split_axes(op, x.shape(), axes)?;
    let a = operand_f64(x, c, false);
    let both = rows(op, a.view(), axes, |s| {
        let mean = sum_f(s) / s.len() as f64;
        let m2 = pairwise(s, &|v| (v - mean) * (v - mean));
        (mean, m2)
    })?;
    Ok((both.mapv(|p| p.0), both.mapv(|p| p.1), n))
}

/// Variance with `correction`: `M2 / max(0, n - correction)` (so `inf` or NaN when
/// `n <= correction`, as PyTorch), and the mean.
pub(super) fn var_mean(
    op: &str,
    x: &HostTensor,
    axes: &[usize],
    correction: i64,
    c: DataType,
) -> Result<(HostData, HostData)> {
    let (mean, m2, n) = moments(op, x, axes, c)?;
    let dof = (n as i128 - correction as i128).max(0) as f64;
    Ok((HostData::Float(m2.mapv(|v| v / dof)), HostData::Float(mean)))
}

/// Welford: (mean, M2, count as i64).
pub(super) fn welford(
    x: &HostTensor,
    axes: &[usize],
    c: DataType,
) -> Result<(HostData, HostData, HostData)> {
    let (mean, m2, n) = moments("welford", x, axes, c)?;
    let count = ArrayD::from_elem(mean.raw_dim(), n as i64);
    Ok((
        HostData::Float(mean),
        HostData::Float(m2),
        HostData::Int(count),
    ))
}

/// Running `f` along `axis`: every element becomes `f(previous result, element)`.
fn running<T: Clone>(a: ArrayViewD<'_, T>, axis: usize, f: impl Fn(T, T) -> T) -> ArrayD<T> {
    let mut r = a.to_owned();
    for mut lane in r.lanes_mut(ndarray::Axis(axis)) {
        let mut it = lane.iter_mut();
        if let Some(first) = it.next() {
            let mut acc = first.clone();
            for v in it {
                acc = f(acc, v.clone());
                *v = acc.clone();
            }
        }
    }
    r
}

/// The inclusive scan `op` of `x` along `axis`, computing in the output type `out`.
/// Floats run in f64 and each element is rounded once to `out` (by the evaluator, as
/// every value); integers wrap in `out`; bool `cummax`/`cummin` are running any/all.
pub(super) fn scan(op: ScanOp, x: &HostTensor, axis: usize, out: DataType) -> Result<HostData> {
    let name = op.name();
    let rank = x.shape().len();
    if axis >= rank {
        return Err(Error::AxisOutOfRange {
            op: name.into(),
            axis: axis as i64,
            rank,
        });
    }
    match out.category() {
        Category::Floating => {
            let a = operand_f64(x, out, false);
            let a = a.view();
            Ok(HostData::Float(match op {
                ScanOp::Sum => running(a, axis, |p, q| p + q),
                ScanOp::Prod => running(a, axis, |p, q| p * q),
                ScanOp::Max => running(a, axis, maximum),
                ScanOp::Min => running(a, axis, minimum),
            }))
        }
        Category::Integer => {
            let a = super::convert::operand_i64(x, out).ok_or_else(|| {
                Error::dtype(name, format!("an operand convertible to {out}"), x.dtype())
            })?;
            let a = a.view();
            let mut r = match op {
                ScanOp::Sum => running(a, axis, i64::wrapping_add),
                ScanOp::Prod => running(a, axis, i64::wrapping_mul),
                ScanOp::Max => running(a, axis, i64::max),
                ScanOp::Min => running(a, axis, i64::min),
            };
            super::convert::wrap_array(&mut r, out);
            Ok(HostData::Int(r))
        }
        Category::Bool => {
            let HostData::Bool(a) = x.data() else {
                return Err(Error::dtype(
                    name,
                    "a bool operand for a bool scan",
                    x.dtype(),
                ));
            };
            Ok(HostData::Bool(match op {
                ScanOp::Sum | ScanOp::Max => running(a.view(), axis, |p, q| p | q),
                ScanOp::Prod | ScanOp::Min => running(a.view(), axis, |p, q| p & q),
            }))
        }
    }
}
