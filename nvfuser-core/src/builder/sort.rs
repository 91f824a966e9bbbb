//! Sorting: `sort`, `argsort` and `topk` along one axis.
//!
//! All three are one primitive expression, [`Op::Sort`], with two outputs: the values
//! (the input's dtype) and their positions along the axis (i64). The order is the
//! evaluator's ("Sorting" in [`crate::eval`]): a stable sort of (key, index) pairs, NaN
//! above +inf, -0 equal to +0, ties by the lower index first in both directions.
//! `argsort` is the indices of `sort` (the values output stays unused); `topk(k)` keeps
//! the first `k` of the descending (`largest`) or ascending order, always sorted. `k`
//! is a constant: a `k` larger than the dim is refused here when the dim's size is
//! known, else by the argument checks of every device (`ir::bind`).

use super::{normalize_axis, FusionDefinition};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::{Extent, IterKind, Op, ValId};

impl FusionDefinition {
    /// The primitive: sorts `x` along `axis` (negative counts from the end), largest
    /// first when `descending`, keeping the first `k` elements of the order when `k` is
    /// given. Returns `(values, indices)`. Refuses 0-d and fp8 tensors, a negative `k`,
    /// and a `k` above a known size of the dim.
    pub fn sort_op(
        &mut self,
        x: ValId,
        axis: i64,
        descending: bool,
        k: Option<i64>,
    ) -> Result<(ValId, ValId)> {
        let name = if k.is_some() { "topk" } else { "sort" };
        let d = self.dtype(name, x)?;
        if d.is_fp8() {
            return Err(Error::dtype(
                name,
                "a bool, integer, f16, bf16, f32 or f64 tensor (cast fp8 first)",
                d,
            ));
        }
        let shape = self.shape(name, x)?;
        if shape.is_empty() {
            return Err(Error::invalid(
                name,
                "a 0-d tensor has no dim to sort (unsqueeze it first)",
            ));
        }
        let axis = normalize_axis(name, axis, shape.len())?;
        let mut domain = shape;
        if let Some(k) = k {
            if k < 0 {
                return Err(Error::invalid(
                    name,
                    format!("k must be >= 0, found k = {k}"),
                ));
            }
            if let Some(n) = domain[axis].extent.as_const() {
                if k > n {
                    return Err(Error::shape(
                        name,
                        format!("k at most the size of dim {axis} ({n})"),
                        format!("k = {k}"),
                    ));
                }
            }
            let kind = match domain[axis].kind {
                IterKind::Broadcast if k == 1 => IterKind::Broadcast,
                _ => IterKind::Iteration,
            };
            domain[axis].extent = Extent::Const(k);
            domain[axis].kind = kind;
        } else if domain[axis].kind == IterKind::Expanded {
            domain[axis].kind = IterKind::Iteration;
        }
        let values = self.new_tensor(name, d, domain.clone())?;
        let indices = self.new_tensor(name, DataType::I64, domain)?;
        self.emit(
            Op::Sort {
                axis,
                descending,
                k,
            },
            &[x],
            &[values, indices],
        );
        Ok((values, indices))
    }

    /// `torch.sort(x, dim, descending, stable)`: `(values, indices)`. The sort is always
    /// stable (ties keep their order), so `stable` changes nothing.
    pub fn sort(
        &mut self,
        x: ValId,
        axis: i64,
        descending: bool,
        stable: bool,
    ) -> Result<(ValId, ValId)> {
        let _ = stable;
        self.sort_op(x, axis, descending, None)
    }

    /// `torch.argsort(x, dim, descending)`: the indices of [`sort`](Self::sort).
    pub fn argsort(&mut self, x: ValId, axis: i64, descending: bool) -> Result<ValId> {
        Ok(self.sort_op(x, axis, descending, None)?.1)
    }

    /// `torch.topk(x, k, dim, largest, sorted)`: the `k` largest (or smallest) elements
    /// along `axis` and their indices, in sorted order whatever `sorted` says (PyTorch
    /// leaves the order unspecified when it is false).
    pub fn topk(
        &mut self,
        x: ValId,
        k: i64,
        axis: i64,
        largest: bool,
        sorted: bool,
    ) -> Result<(ValId, ValId)> {
        let _ = sorted;
        self.sort_op(x, axis, largest, Some(k))
    }
}
