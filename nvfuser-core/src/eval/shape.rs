//! Shape ops on resolved sizes (the interpreter resolves and checks the IR's arguments)
//! and the indexing ops.

use ndarray::{concatenate, ArrayD, ArrayViewD, Axis, Dimension, IxDyn, Slice};

use super::tensor::HostData;
use crate::error::{Error, Result};

/// Applies the same generic body to whichever storage `data` holds.
macro_rules! each {
    ($data:expr, $a:ident => $body:expr) => {
        match $data {
            HostData::Float($a) => HostData::Float($body),
            HostData::Int($a) => HostData::Int($body),
            HostData::Bool($a) => HostData::Bool($body),
        }
    };
}

fn internal(op: &str, what: &str) -> Error {
    Error::InvalidIr(format!("{op}: {what}"))
}

/// Inserts size-1 dims where `mask` is true.
pub(super) fn broadcast(data: &HostData, mask: &[bool]) -> HostData {
    fn go<T: Clone>(a: &ArrayD<T>, mask: &[bool]) -> ArrayD<T> {
        let mut v = a.view();
        for (i, &m) in mask.iter().enumerate() {
            if m {
                v = v.insert_axis(Axis(i));
            }
        }
        v.to_owned()
    }
    each!(data, a => go(a, mask))
}

/// Broadcasts to `shape` (size-1 dims repeat) and materializes.
pub(super) fn expand(op: &str, data: &HostData, shape: &[usize]) -> Result<HostData> {
    fn go<T: Clone>(op: &str, a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>> {
        Ok(a.broadcast(IxDyn(shape))
            .ok_or_else(|| internal(op, "cannot broadcast"))?
            .to_owned())
    }
    Ok(each!(data, a => go(op, a, shape)?))
}

/// Row-major reshape (sizes already checked).
pub(super) fn reshape(data: &HostData, shape: &[usize]) -> Result<HostData> {
    fn go<T: Clone>(a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>> {
        let std = a.as_standard_layout();
        let v: Vec<T> = std.iter().cloned().collect();
        ArrayD::from_shape_vec(IxDyn(shape), v)
            .map_err(|_| internal("reshape", "element count changed"))
    }
    Ok(each!(data, a => go(a, shape)?))
}

/// Reorders dims (`perm` already checked to be a permutation).
pub(super) fn permute(data: &HostData, perm: &[usize]) -> HostData {
    each!(data, a => a.view().permuted_axes(IxDyn(perm)).to_owned())
}

/// Removes the given size-1 axes (sorted ascending, already checked).
pub(super) fn squeeze(data: &HostData, axes: &[usize]) -> HostData {
    fn go<T: Clone>(a: &ArrayD<T>, axes: &[usize]) -> ArrayD<T> {
        let mut v = a.view();
        for &ax in axes.iter().rev() {
            v = v.index_axis_move(Axis(ax), 0);
        }
        v.to_owned()
    }
    each!(data, a => go(a, axes))
}

/// Strided slice with resolved `(start, stop, step)` per dim, `0 <= start <= stop <=
/// size`, `step >= 1`.
pub(super) fn slice(data: &HostData, ranges: &[(usize, usize, usize)]) -> HostData {
    fn go<T: Clone>(a: &ArrayD<T>, ranges: &[(usize, usize, usize)]) -> ArrayD<T> {
        a.slice_each_axis(|ax| {
            let (start, stop, step) = ranges[ax.axis.index()];
            Slice::new(start as isize, Some(stop as isize), step as isize)
        })
        .to_owned()
    }
    each!(data, a => go(a, ranges))
}

/// Pads with `fill` (a 0-d value of the same storage).
pub(super) fn pad(data: &HostData, widths: &[(usize, usize)], fill: &HostData) -> Result<HostData> {
    fn go<T: Clone>(
        a: &ArrayD<T>,
        widths: &[(usize, usize)],
        fill: &ArrayD<T>,
    ) -> Result<ArrayD<T>> {
        let v = fill
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| internal("pad", "empty pad value"))?;
        let shape: Vec<usize> = a
            .shape()
            .iter()
            .zip(widths)
            .map(|(&n, &(lo, hi))| n + lo + hi)
            .collect();
        let mut out = ArrayD::from_elem(IxDyn(&shape), v);
        out.slice_each_axis_mut(|ax| {
            let d = ax.axis.index();
            let lo = widths[d].0;
            Slice::new(lo as isize, Some((lo + a.shape()[d]) as isize), 1)
        })
        .assign(a);
        Ok(out)
    }
    Ok(match (data, fill) {
        (HostData::Float(a), HostData::Float(f)) => HostData::Float(go(a, widths, f)?),
        (HostData::Int(a), HostData::Int(f)) => HostData::Int(go(a, widths, f)?),
        (HostData::Bool(a), HostData::Bool(f)) => HostData::Bool(go(a, widths, f)?),
        _ => return Err(internal("pad", "pad value of another storage kind")),
    })
}

/// Concatenates along `axis`; each part is first broadcast to `shapes[i]`.
pub(super) fn cat(parts: &[&HostData], shapes: &[Vec<usize>], axis: usize) -> Result<HostData> {
    fn go<T: Clone>(
        parts: Vec<&ArrayD<T>>,
        shapes: &[Vec<usize>],
        axis: usize,
    ) -> Result<ArrayD<T>> {
        let views = parts
            .iter()
            .zip(shapes)
            .map(|(a, s)| {
                a.broadcast(IxDyn(s))
                    .ok_or_else(|| internal("cat", "cannot broadcast a part"))
            })
            .collect::<Result<Vec<ArrayViewD<'_, T>>>>()?;
        concatenate(Axis(axis), &views).map_err(|e| internal("cat", &e.to_string()))
    }
    macro_rules! collect {
        ($variant:ident) => {
            parts
                .iter()
                .map(|p| match p {
                    HostData::$variant(a) => Ok(a),
                    _ => Err(internal("cat", "parts of different storage kinds")),
                })
                .collect::<Result<Vec<_>>>()?
        };
    }
    Ok(match parts.first() {
        Some(HostData::Float(_)) => HostData::Float(go(collect!(Float), shapes, axis)?),
        Some(HostData::Int(_)) => HostData::Int(go(collect!(Int), shapes, axis)?),
        Some(HostData::Bool(_)) => HostData::Bool(go(collect!(Bool), shapes, axis)?),
        None => return Err(internal("cat", "no tensors")),
    })
}

/// Checks that every index is in `0..size`, naming the first offender.
pub(super) fn check_indices(op: &str, idx: &ArrayD<i64>, axis: usize, size: usize) -> Result<()> {
    if let Some((pos, &v)) = idx.indexed_iter().find(|(_, &v)| v < 0 || v >= size as i64) {
        return Err(Error::invalid(
            op,
            format!(
                "index {v} at position {:?} is out of range for dim {axis} of size {size} (expected 0..{size})",
                pos.slice()
            ),
        ));
    }
    Ok(())
}

/// `index_select`: entries of `data` along `axis` picked by `idx` (checked in range).
pub(super) fn index_select(data: &HostData, axis: usize, idx: &[usize]) -> HostData {
    each!(data, a => a.select(Axis(axis), idx))
}

/// `select`: one index along `axis`, removing the dim.
pub(super) fn select(data: &HostData, axis: usize, i: usize) -> HostData {
    each!(data, a => a.index_axis(Axis(axis), i).to_owned())
}

/// General gather: `out[p] = x[q]` with `q[axis] = idx[p]` and, for other dims,
/// `q[d] = p[d]`, or 0 where `x` has size 1 (broadcast). `idx` has the output's shape
/// and holds checked indices.
pub(super) fn gather(
    op: &str,
    data: &HostData,
    axis: usize,
    idx: ArrayViewD<'_, i64>,
) -> Result<HostData> {
    fn go<T: Clone>(
        op: &str,
        a: &ArrayD<T>,
        axis: usize,
        idx: ArrayViewD<'_, i64>,
    ) -> Result<ArrayD<T>> {
        let std = a.as_standard_layout();
        let shape = std.shape().to_vec();
        let rank = shape.len();
        let mut strides = vec![0usize; rank];
        let mut s = 1;
        for d in (0..rank).rev() {
            strides[d] = if shape[d] == 1 { 0 } else { s };
            s *= shape[d];
        }
        let flat = std.as_slice().ok_or_else(|| internal(op, "layout"))?;
        if idx.ndim() != rank || axis >= rank {
            return Err(internal(op, "index rank"));
        }
        let axis_stride = {
            let mut st = 1;
            for &n in &shape[axis + 1..] {
                st *= n;
            }
            st
        };
        let out_shape = idx.shape().to_vec();
        let mut out = Vec::with_capacity(idx.len());
        // Row-major walk over the output with an odometer; `base` is the input offset
        // of the current position without the axis term.
        let mut pos = vec![0usize; rank];
        let mut base = 0usize;
        for &i in idx.iter() {
            let off = base + i as usize * axis_stride;
            out.push(
                flat.get(off)
                    .cloned()
                    .ok_or_else(|| internal(op, "index out of range"))?,
            );
            for d in (0..rank).rev() {
                pos[d] += 1;
                if d != axis {
                    base += strides[d];
                }
                if pos[d] < out_shape[d] {
                    break;
                }
                if d != axis {
                    base -= strides[d] * out_shape[d];
                }
                pos[d] = 0;
            }
        }
        ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(|_| internal(op, "shape"))
    }
    Ok(each!(data, a => go(op, a, axis, idx)?))
}
