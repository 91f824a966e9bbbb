//! A tensor's iteration domains and the transforms between them.
//!
//! Dims ([`Dom`]) live in a per-tensor arena addressed by [`DomId`]. The root dims are
//! what the tensor's definition maps to its inputs' logical dims; the logical dims are
//! what its consumers map to (the same as the root except for a partial reduction made
//! by `rfactor`); the loop dims are the leaves after every split and merge, in loop
//! order. Transforms are kept in application order, so lowering can walk them forward
//! (logical index to loop index) and backward (loop index to root index).

use serde::{Deserialize, Serialize};

use super::{ParallelType, SchedResult, ScheduleError};
use crate::ir::{Extent, IterDomain, IterKind, ValId};

/// Index of a dim in its tensor's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DomId(pub u32);

/// One iteration dim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dom {
    /// Its extent.
    pub extent: Extent,
    /// Iteration, broadcast, expanded or reduction.
    pub kind: IterKind,
    /// What the loop over it is bound to (meaningful for loop dims).
    pub parallel: ParallelType,
}

/// One split or merge.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DomTransform {
    /// `input` becomes `outer × inner`; the factor is the inner extent when
    /// `inner_split`, else the outer extent. Non-divisible splits are predicated.
    Split {
        /// The dim split.
        input: DomId,
        /// The new outer dim.
        outer: DomId,
        /// The new inner dim.
        inner: DomId,
        /// The factor.
        factor: Extent,
        /// Whether `factor` is the inner extent.
        inner_split: bool,
    },
    /// `outer` and `inner` become one dim of extent `outer × inner`.
    Merge {
        /// The outer input.
        outer: DomId,
        /// The inner input.
        inner: DomId,
        /// The merged dim.
        out: DomId,
    },
}

/// Root, logical and loop dims of one tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorDomain {
    /// The arena.
    pub doms: Vec<Dom>,
    /// Dims its definition maps to its inputs (reduction dims included).
    pub root: Vec<DomId>,
    /// Dims its consumers map to (reduction dims included, skipped by consumers).
    pub logical: Vec<DomId>,
    /// The loop dims, outermost first.
    pub loop_dims: Vec<DomId>,
    /// Splits and merges, in application order.
    pub transforms: Vec<DomTransform>,
}

impl TensorDomain {
    /// A domain whose root, logical and loop dims are `dims`.
    pub fn from_logical(dims: &[IterDomain]) -> Self {
        let doms: Vec<Dom> = dims
            .iter()
            .map(|d| Dom {
                extent: d.extent.clone(),
                kind: d.kind,
                parallel: ParallelType::Serial,
            })
            .collect();
        let ids: Vec<DomId> = (0..doms.len() as u32).map(DomId).collect();
        TensorDomain {
            doms,
            root: ids.clone(),
            logical: ids.clone(),
            loop_dims: ids,
            transforms: Vec::new(),
        }
    }

    /// The dim behind an id.
    pub fn dom(&self, id: DomId) -> &Dom {
        &self.doms[id.0 as usize]
    }

    pub(crate) fn dom_mut(&mut self, id: DomId) -> &mut Dom {
        &mut self.doms[id.0 as usize]
    }

    /// The loop dim at `axis`.
    pub fn loop_dom(&self, axis: usize) -> &Dom {
        self.dom(self.loop_dims[axis])
    }

    fn push(&mut self, dom: Dom) -> DomId {
        self.doms.push(dom);
        DomId(self.doms.len() as u32 - 1)
    }

    /// Normalizes a possibly negative loop axis.
    pub(crate) fn axis(&self, op: &'static str, tensor: ValId, axis: i64) -> SchedResult<usize> {
        let rank = self.loop_dims.len();
        let a = if axis < 0 { axis + rank as i64 } else { axis };
        if a < 0 || a >= rank as i64 {
            return Err(ScheduleError::AxisOutOfRange {
                op,
                tensor,
                axis,
                rank,
            });
        }
        Ok(a as usize)
    }

    /// Splits loop `axis` by `factor`. Splitting a broadcast dim gives two broadcast
    /// dims; the inner one takes the factor as its extent so it can map to a consumer.
    pub(crate) fn split(
        &mut self,
        axis: usize,
        factor: Extent,
        inner_split: bool,
    ) -> (DomId, DomId) {
        let input = self.loop_dims[axis];
        let d = self.dom(input).clone();
        // A broadcast dim that took a resolving reference's extent (`transform_like`)
        // splits like that extent, as it merges like it: `split(b{N}, 4)` is
        // `b{ceildiv(N, 4)} × b{4}`, so the loops it spans stay the reference's (a
        // `[A, 1]` input beside `[A, B]` rows in a reduction over both, vector-split
        // innermost then merged, spanned `A` where the reference ran `A × B`: CPU fuzz
        // seed 12332149).
        let resolved = d.extent.as_const() != Some(1);
        let (outer_ext, inner_ext) = if d.kind == IterKind::Broadcast && !resolved {
            if inner_split {
                (Extent::Const(1), factor.clone())
            } else {
                (factor.clone(), Extent::Const(1))
            }
        } else if inner_split {
            (d.extent.clone().ceil_div(factor.clone()), factor.clone())
        } else {
            (factor.clone(), d.extent.clone().ceil_div(factor.clone()))
        };
        let outer = self.push(Dom {
            extent: outer_ext,
            kind: d.kind,
            parallel: ParallelType::Serial,
        });
        let inner = self.push(Dom {
            extent: inner_ext,
            kind: d.kind,
            parallel: ParallelType::Serial,
        });
        self.transforms.push(DomTransform::Split {
            input,
            outer,
            inner,
            factor,
            inner_split,
        });
        self.loop_dims.splice(axis..=axis, [outer, inner]);
        (outer, inner)
    }

    /// Merges loop `axis` with `axis + 1`.
    pub(crate) fn merge(&mut self, tensor: ValId, axis: usize) -> SchedResult<DomId> {
        if axis + 1 >= self.loop_dims.len() {
            return Err(ScheduleError::AxisOutOfRange {
                op: "merge",
                tensor,
                axis: axis as i64 + 1,
                rank: self.loop_dims.len(),
            });
        }
        let (outer, inner) = (self.loop_dims[axis], self.loop_dims[axis + 1]);
        let (a, b) = (self.dom(outer).clone(), self.dom(inner).clone());
        let red = |d: &Dom| d.kind == IterKind::Reduction;
        let bcast = |d: &Dom| d.kind == IterKind::Broadcast;
        if red(&a) != red(&b) && !bcast(&a) && !bcast(&b) {
            return Err(ScheduleError::InvalidArgument {
                op: "merge",
                tensor,
                reason: format!(
                    "loop axes {axis} and {} are a reduction and an iteration dim; expected two of one kind",
                    axis + 1
                ),
            });
        }
        let kind = if bcast(&a) && bcast(&b) {
            IterKind::Broadcast
        } else if red(&a) || red(&b) {
            IterKind::Reduction
        } else if a.kind == IterKind::Expanded && b.kind == IterKind::Expanded {
            IterKind::Expanded
        } else {
            IterKind::Iteration
        };
        let out = self.push(Dom {
            extent: a.extent * b.extent,
            kind,
            parallel: ParallelType::Serial,
        });
        self.transforms
            .push(DomTransform::Merge { outer, inner, out });
        self.loop_dims.splice(axis..=axis + 1, [out]);
        Ok(out)
    }

    /// Reorders loop dims: new dim `i` is old dim `order[i]`.
    pub(crate) fn reorder(&mut self, tensor: ValId, order: &[i64]) -> SchedResult<()> {
        let rank = self.loop_dims.len();
        let mut seen = vec![false; rank];
        let mut new = Vec::with_capacity(rank);
        for &o in order {
            let a = self.axis("reorder", tensor, o)?;
            if std::mem::replace(&mut seen[a], true) {
                return Err(ScheduleError::InvalidArgument {
                    op: "reorder",
                    tensor,
                    reason: format!(
                        "{order:?} lists axis {o} twice; expected a permutation of 0..{rank}"
                    ),
                });
            }
            new.push(self.loop_dims[a]);
        }
        if new.len() != rank {
            return Err(ScheduleError::InvalidArgument {
                op: "reorder",
                tensor,
                reason: format!(
                    "{order:?} has {} entries; expected a permutation of 0..{rank}",
                    new.len()
                ),
            });
        }
        self.loop_dims = new;
        Ok(())
    }

    /// The dims a chain of splits makes of `root`, in element order (outer parts first);
    /// `None` when a merge takes part of it.
    pub fn split_leaves(&self, root: DomId) -> Option<Vec<DomId>> {
        fn walk(d: &TensorDomain, root: DomId, out: &mut Vec<DomId>) -> Option<()> {
            for t in &d.transforms {
                match t {
                    DomTransform::Split {
                        input,
                        outer,
                        inner,
                        ..
                    } if *input == root => {
                        walk(d, *outer, out)?;
                        return walk(d, *inner, out);
                    }
                    DomTransform::Merge { outer, inner, .. }
                        if *outer == root || *inner == root =>
                    {
                        return None;
                    }
                    _ => {}
                }
            }
            out.push(root);
            Some(())
        }
        let mut out = Vec::new();
        walk(self, root, &mut out)?;
        Some(out)
    }

    /// True when `id` is the inner output of a split of the last logical dim, or is
    /// that logical dim itself.
    pub fn is_innermost_of_logical(&self, id: DomId) -> bool {
        let Some(&last) = self
            .logical
            .iter()
            .rfind(|&&l| self.dom(l).kind != IterKind::Reduction)
        else {
            return false;
        };
        let mut cur = id;
        loop {
            if cur == last {
                return true;
            }
            let parent = self.transforms.iter().find_map(|t| match t {
                DomTransform::Split { input, inner, .. } if *inner == cur => Some(*input),
                _ => None,
            });
            match parent {
                Some(p) => cur = p,
                None => return false,
            }
        }
    }
}
