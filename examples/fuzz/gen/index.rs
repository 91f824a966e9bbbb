//! Indexing steps: `index_select`, `take_along_axis`, `gather`, `scatter` and
//! `scatter_add` with the recipe's index input, and `select` of one position. Each has
//! its proposal and its builder call.

use nvfuser::prelude::*;

use super::pool::combined;
use super::{Ax, Gen, InputSpec, Meta, Step};

impl Gen {
    /// An indexing of a tensor along the universe dim that the index input points
    /// into: `index_select` with a 1-D index, `take_along_axis` or `gather` with a
    /// full-rank one.
    pub(super) fn propose_indexing(&mut self, inputs: &[InputSpec]) -> Option<Step> {
        let (ix, spec) = inputs
            .iter()
            .enumerate()
            .find(|(_, s)| matches!(s, InputSpec::Index { .. }))?;
        let InputSpec::Index {
            dims: idims,
            target,
            ..
        } = spec
        else {
            return None;
        };
        let target = *target;
        let idims = idims.clone();
        let scatter_into = if self.rng.chance(60) {
            self.pick_tensor(|m| m.dims == idims)
        } else {
            None
        };
        if let Some(x) = scatter_into {
            // A scatter into a value of the index's dims: its values (in range of the
            // target dim, drawn at random, so duplicates are common) name the targets.
            let dx = self.metas[x].dims.clone();
            let axis = dx.iter().position(|&d| d == Ax::U(target))?;
            let add = self.rng.chance(50);
            let src = if !add && self.rng.chance(25) {
                None
            } else {
                Some(self.pick_tensor(|m| m.dims == dx)?)
            };
            return Some(Step::Scatter {
                x,
                index: ix,
                src,
                axis,
                add,
            });
        }
        let x = self.pick_tensor(|m| m.dims.contains(&Ax::U(target)))?;
        let dx = self.metas[x].dims.clone();
        let axis = dx.iter().position(|&d| d == Ax::U(target))?;
        if idims.len() == 1 {
            Some(Step::IndexSelect(x, axis, ix))
        } else if dx.len() == idims.len() {
            if self.rng.chance(50) {
                Some(Step::TakeAlongAxis(x, ix, axis))
            } else {
                Some(Step::Gather(x, ix, axis))
            }
        } else {
            None
        }
    }

    /// A select of position 0 along one axis.
    pub(super) fn propose_select(&mut self) -> Option<Step> {
        let a = self.pick_tensor(|m| !m.dims.is_empty())?;
        let axis = self.rng.below(self.metas[a].dims.len());
        Some(Step::Select(a, axis, 0))
    }

    pub(super) fn make_index_select(
        &mut self,
        x: usize,
        axis: usize,
        ix: usize,
    ) -> Option<(ValId, Meta)> {
        let (xv, m) = self.operand(x)?;
        let (iv, mi) = self.operand(ix)?;
        let v = self.fd.index_select(xv, axis as i64, iv).ok()?;
        let mut dims = m.dims.clone();
        dims[axis] = mi.dims[0];
        Some((v, Meta { dims, ..m }))
    }

    /// `gather` when `gather` is set, `take_along_axis` otherwise.
    pub(super) fn make_take(
        &mut self,
        x: usize,
        ix: usize,
        axis: usize,
        gather: bool,
    ) -> Option<(ValId, Meta)> {
        let (xv, m) = self.operand(x)?;
        let (iv, mi) = self.operand(ix)?;
        let v = if gather {
            self.fd.gather(xv, axis as i64, iv).ok()?
        } else {
            self.fd.take_along_axis(xv, iv, axis as i64).ok()?
        };
        Some((
            v,
            Meta {
                dims: combined(&mi.dims, &m.dims),
                ..m
            },
        ))
    }

    /// `scatter` / `scatter_add`: the source cast to x's dtype, or the constant 3.
    pub(super) fn make_scatter(
        &mut self,
        x: usize,
        ix: usize,
        src: Option<usize>,
        axis: usize,
        add: bool,
    ) -> Option<(ValId, Meta)> {
        let (xv, m) = self.operand(x)?;
        let (iv, _) = self.operand(ix)?;
        if add && (m.dtype == DataType::Bool || m.dtype.is_fp8()) {
            return None;
        }
        let (sv, ms) = match src {
            Some(s) => {
                let (sv, ms) = self.operand(s)?;
                if ms.dims != m.dims {
                    return None;
                }
                // A cast of a rounded float to an integer is discontinuous: a value
                // within tolerance on both devices can truncate to neighbouring
                // integers (seed 12508015: a `cumprod` near 1, cast to f16 then to i64
                // by the scatter, was 1 on the GPU and 2 in the reference). As in
                // `pointwise`'s casts, only exact sources are cast to integers.
                if ms.dtype != m.dtype && ms.dtype.is_float() && !m.dtype.is_float() && !ms.exact {
                    return None;
                }
                let sv = if ms.dtype == m.dtype {
                    sv
                } else {
                    self.fd.cast(sv, m.dtype).ok()?
                };
                // A cast may round (an inexact float source stays inexact).
                let exact = ms.exact && (ms.dtype == m.dtype || !m.dtype.is_float());
                (sv, Some((ms.bound, exact)))
            }
            None => (self.fd.constant(3i64), None),
        };
        let (sb, se) = ms.unwrap_or((3.0, true));
        let v = if add {
            self.fd.scatter_add(xv, axis as i64, iv, sv).ok()?
        } else {
            self.fd.scatter(xv, axis as i64, iv, sv).ok()?
        };
        // Adds of floats round (in the same order on both devices, but values computed
        // upstream within tolerance accumulate); up to a whole axis of duplicates.
        let (exact, bound) = if add {
            (
                m.exact && se && !m.dtype.is_float(),
                m.bound + sb * super::MAX_DIM as f64,
            )
        } else {
            (m.exact && se, m.bound.max(sb))
        };
        Some((v, Meta { exact, bound, ..m }))
    }

    pub(super) fn make_select(
        &mut self,
        x: usize,
        axis: usize,
        index: i64,
    ) -> Option<(ValId, Meta)> {
        let (xv, m) = self.operand(x)?;
        let v = self.fd.select(xv, axis as i64, Size::Const(index)).ok()?;
        let mut dims = m.dims.clone();
        dims.remove(axis);
        Some((v, Meta { dims, ..m }))
    }
}
