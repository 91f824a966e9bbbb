//! Indexing ops: index_select, select, gather, take_along_axis, scatter and scatter_add.

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

    /// `torch.scatter(x, axis, index, src)`: a new tensor equal to `x` where, for every
    /// element `j` of `index`, the element at `j` with `j[axis]` replaced by `index[j]`
    /// is `src[j]`. `src` is a tensor of `x`'s dtype, or a scalar (torch's `value` form,
    /// cast to `x`'s dtype). The index has `x`'s rank, is no larger than `src` in any
    /// dim and no larger than `x` outside `axis`. When several index elements name one
    /// target, the last in row-major order wins (see the evaluator's "# Indexing").
    pub fn scatter(&mut self, x: ValId, axis: i64, index: ValId, src: ValId) -> Result<ValId> {
        self.scatter_op("scatter", x, axis, index, src, false)
    }

    /// `torch.scatter_add(x, axis, index, src)` (= `scatter_reduce(reduce="sum")` with
    /// `include_self`): like [`Self::scatter`], but each target is increased by the
    /// `src` elements that name it, added in row-major order of the index. `src` is a
    /// tensor of `x`'s dtype; bool is refused.
    pub fn scatter_add(&mut self, x: ValId, axis: i64, index: ValId, src: ValId) -> Result<ValId> {
        self.scatter_op("scatter_add", x, axis, index, src, true)
    }

    fn scatter_op(
        &mut self,
        op: &str,
        x: ValId,
        axis: i64,
        index: ValId,
        src: ValId,
        add: bool,
    ) -> Result<ValId> {
        let shape = self.shape(op, x)?;
        let axis = normalize_axis(op, axis, shape.len())?;
        let idx = self.index_shape(op, index)?;
        let d = self.dtype(op, x)?;
        if add && d == crate::dtype::DataType::Bool {
            return Err(Error::dtype(op, "a numeric tensor (not bool)", d));
        }
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
                        format!("index size <= {n} at dim {i} (the input's size)"),
                        format!("{m}"),
                    ));
                }
            }
        }
        let src = if self.val(op, src)?.is_tensor() {
            let sd = self.dtype(op, src)?;
            if sd != d {
                return Err(Error::dtype(
                    op,
                    format!("a source of the input's dtype {d}"),
                    sd,
                ));
            }
            let sshape = self.shape(op, src)?;
            if sshape.len() != shape.len() {
                return Err(Error::Rank {
                    op: op.into(),
                    expected: format!("{} (the input's rank) for the source", shape.len()),
                    found: sshape.len(),
                });
            }
            for (i, (a, b)) in sshape.iter().zip(&idx).enumerate() {
                if let (Some(n), Some(m)) = (a.extent.as_const(), b.extent.as_const()) {
                    if m > n {
                        return Err(Error::shape(
                            op,
                            format!("index size <= {n} at dim {i} (the source's size)"),
                            format!("{m}"),
                        ));
                    }
                }
            }
            src
        } else if add {
            return Err(Error::Kind {
                op: op.into(),
                expected: "a source tensor".into(),
                found: format!("scalar of type {}", self.dtype(op, src)?),
            });
        } else if self.dtype(op, src)? != d {
            self.cast(src, d)?
        } else {
            src
        };
        let domain = shape.iter().map(as_iteration).collect();
        self.emit_tensor(Op::Scatter { axis, add }, &[x, index, src], d, domain)
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
