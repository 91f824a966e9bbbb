//! Indexing ops: index_select, select, gather and take_along_axis.

use super::{describe_shape, normalize_axis, FusionDefinition, Size};
use crate::error::{Error, Result};
use crate::ir::{IterDomain, IterKind, Op, ValId};

impl FusionDefinition {
    /// Picks entries of `x` along `axis` by the 1-D integer tensor `index`.
    pub fn index_select(&mut self, x: ValId, axis: i64, index: ValId) -> Result<ValId> {
        let op = "index_select";
        let mut shape = self.shape(op, x)?;
        let axis = normalize_axis(op, axis, shape.len())?;
        let idx = self.index_shape(op, index)?;
        if idx.len() != 1 {
            return Err(Error::Rank {
                op: op.into(),
                expected: "1 for the index".into(),
                found: idx.len(),
            });
        }
        shape[axis] = as_iteration(&idx[0]);
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::IndexSelect { axis }, &[x, index], d, shape)
    }

    /// Picks index `index` along `axis`, removing that dim.
    pub fn select(&mut self, x: ValId, axis: i64, index: Size) -> Result<ValId> {
        let op = "select";
        let mut shape = self.shape(op, x)?;
        let axis = normalize_axis(op, axis, shape.len())?;
        let mut inputs = vec![x];
        let (args, _) = self.size_args(op, &[index], &mut inputs)?;
        if let (Some(i), Some(n)) = (index_const(index), shape[axis].extent.as_const()) {
            if i >= n || i < -n {
                return Err(Error::invalid(
                    op,
                    format!("index {i} is out of range for dim {axis} of size {n}"),
                ));
            }
        }
        shape.remove(axis);
        let d = self.dtype(op, x)?;
        self.emit_tensor(
            Op::Select {
                axis,
                index: args[0],
            },
            &inputs,
            d,
            shape,
        )
    }

    /// `torch.gather`: `out[i][j] = x[index[i][j]][j]` for `axis = 0`. The index has the
    /// rank of `x` and may be smaller than `x` in the other dims; the output has the
    /// index's shape.
    pub fn gather(&mut self, x: ValId, axis: i64, index: ValId) -> Result<ValId> {
        let op = "gather";
        let shape = self.shape(op, x)?;
        let axis = normalize_axis(op, axis, shape.len())?;
        let idx = self.index_shape(op, index)?;
        if idx.len() != shape.len() {
            return Err(Error::Rank {
                op: op.into(),
                expected: format!("{} (the input's rank) for the index", shape.len()),
                found: idx.len(),
            });
        }
        for (i, (a, b)) in shape.iter().zip(&idx).enumerate() {
            if let (Some(n), Some(m)) = (a.extent.as_const(), b.extent.as_const()) {
                if i != axis && m > n {
                    return Err(Error::shape(
                        op,
                        format!("index size <= {n} at dim {i}"),
                        format!("{m}"),
                    ));
                }
            }
        }
        let domain = idx.iter().map(as_iteration).collect();
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::Gather { axis }, &[x, index], d, domain)
    }

    /// `numpy.take_along_axis`: like gather, with the index broadcast against `x` in the
    /// other dims (sizes there must match or be 1).
    pub fn take_along_axis(&mut self, x: ValId, index: ValId, axis: i64) -> Result<ValId> {
        let op = "take_along_axis";
        let shape = self.shape(op, x)?;
        let axis = normalize_axis(op, axis, shape.len())?;
        let idx = self.index_shape(op, index)?;
        if idx.len() != shape.len() {
            return Err(Error::Rank {
                op: op.into(),
                expected: format!("{} (the input's rank) for the index", shape.len()),
                found: idx.len(),
            });
        }
        let mut domain = Vec::with_capacity(shape.len());
        for (i, (a, b)) in shape.iter().zip(&idx).enumerate() {
            if i == axis {
                domain.push(as_iteration(b));
                continue;
            }
            domain.push(match (a.is_broadcast_like(), b.is_broadcast_like()) {
                (true, false) => b.clone(),
                // A size-1 broadcast input dim takes an expanded index dim's size.
                (true, true) if a.kind == IterKind::Broadcast => b.clone(),
                (false, true) | (true, true) => a.clone(),
                (false, false) => {
                    if let (Some(n), Some(m)) = (a.extent.as_const(), b.extent.as_const()) {
                        if n != m {
                            return Err(Error::shape(
                                op,
                                format!("index size {n} at dim {i} (or 1)"),
                                format!("{} for the index", describe_shape(&idx)),
                            ));
                        }
                    }
                    a.clone()
                }
            });
        }
        let d = self.dtype(op, x)?;
        self.emit_tensor(Op::TakeAlongAxis { axis }, &[x, index], d, domain)
    }

    fn index_shape(&self, op: &str, index: ValId) -> Result<Vec<IterDomain>> {
        let d = self.dtype(op, index)?;
        if !d.is_int() {
            return Err(Error::dtype(op, "an integer index tensor", d));
        }
        self.shape(op, index)
    }
}

fn index_const(s: Size) -> Option<i64> {
    match s {
        Size::Const(c) => Some(c),
        Size::Val(_) => None,
    }
}

/// An index dim picked as an output dim keeps its extent; a broadcast index dim of size
/// 1 stays a broadcast.
fn as_iteration(d: &IterDomain) -> IterDomain {
    match d.kind {
        IterKind::Expanded => IterDomain::iteration(d.extent.clone()),
        _ => d.clone(),
    }
}
