//! Sorting: `sort`, `argsort` and `topk` (IR [`Op::Sort`](crate::ir::Op::Sort)); the
//! order is specified in the module docs of [`crate::eval`] ("Sorting").

use std::cmp::Ordering;

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Zip};

use super::tensor::{HostData, HostTensor};
use crate::error::{Error, Result};

/// The key order of floats: NaN above everything (+inf included), NaNs equal among
/// themselves, -0 equal to +0, otherwise IEEE order.
pub(crate) fn float_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Sorts every lane of `a` along `axis` and keeps the first `k` (all when `None`):
/// a stable sort by `cmp` (reversed when `descending`), so equal keys keep their
/// order, the lower index first, in both directions.
fn sort_lanes<T: Copy + Default>(
    a: ArrayViewD<'_, T>,
    axis: usize,
    descending: bool,
    k: usize,
    cmp: impl Fn(&T, &T) -> Ordering,
) -> (ArrayD<T>, ArrayD<i64>) {
    let mut shape = a.shape().to_vec();
    shape[axis] = k;
    let mut values = ArrayD::<T>::default(IxDyn(&shape));
    let mut indices = ArrayD::<i64>::zeros(IxDyn(&shape));
    let mut order: Vec<usize> = Vec::new();
    Zip::from(a.lanes(Axis(axis)))
        .and(values.lanes_mut(Axis(axis)))
        .and(indices.lanes_mut(Axis(axis)))
        .for_each(|lane, mut v, mut ix| {
            order.clear();
            order.extend(0..lane.len());
            if descending {
                order.sort_by(|&p, &q| cmp(&lane[q], &lane[p]));
            } else {
                order.sort_by(|&p, &q| cmp(&lane[p], &lane[q]));
            }
            for (j, &p) in order.iter().take(k).enumerate() {
                v[j] = lane[p];
                ix[j] = p as i64;
            }
        });
    (values, indices)
}

/// `(values, indices)` of the sort of `x` along `axis` (see the module docs of
/// [`crate::eval`]); `k` keeps the first `k` of the order (`topk`), which must not
/// exceed the size of the dim.
pub(super) fn sort(
    name: &str,
    x: &HostTensor,
    axis: usize,
    descending: bool,
    k: Option<i64>,
) -> Result<(HostData, HostData)> {
    let rank = x.shape().len();
    if axis >= rank {
        return Err(Error::AxisOutOfRange {
            op: name.into(),
            axis: axis as i64,
            rank,
        });
    }
    let n = x.shape()[axis];
    let k = match k {
        None => n,
        Some(k) if k >= 0 && (k as u64) <= n as u64 => k as usize,
        Some(k) => {
            return Err(Error::shape(
                name,
                format!("k at most the size of dim {axis} ({n})"),
                format!("k = {k}"),
            ))
        }
    };
    Ok(match x.data() {
        HostData::Float(a) => {
            let (v, i) = sort_lanes(a.view(), axis, descending, k, |p, q| float_order(*p, *q));
            (HostData::Float(v), HostData::Int(i))
        }
        HostData::Int(a) => {
            let (v, i) = sort_lanes(a.view(), axis, descending, k, |p, q| p.cmp(q));
            (HostData::Int(v), HostData::Int(i))
        }
        HostData::Bool(a) => {
            let (v, i) = sort_lanes(a.view(), axis, descending, k, |p, q| p.cmp(q));
            (HostData::Bool(v), HostData::Int(i))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_order_puts_nan_last_and_zeros_equal() {
        assert_eq!(float_order(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(float_order(-0.0, 0.0), Ordering::Equal);
        assert_eq!(float_order(f64::NAN, f64::NAN), Ordering::Equal);
        assert_eq!(float_order(-1.0, f64::NEG_INFINITY), Ordering::Greater);
    }
}
