//! Indexing steps: `index_select`, `take_along_axis` and `gather` with the recipe's index
//! input, and `select` of one position. Each has its proposal and its builder call.

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
