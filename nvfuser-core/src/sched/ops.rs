//! The scheduling primitives, as methods of [`ScheduledFusion`].
//!
//! Each public method checks its arguments, records itself as a [`Primitive`] and
//! changes the schedule. Checks that depend on several tensors (parallel extents,
//! vectorization, compute-at compatibility) run again in [`super::validate`], since
//! later primitives can invalidate them.
//!
//! This file holds the loop transforms (split, merge, reorder), parallel and memory
//! types, and `rfactor`; the cache primitives are in `cache`, compute-at and inlining
//! in `inline`, and propagation from a reference tensor in `propagate`.

use super::domain::{DomId, TensorDomain};
use super::{
    Factor, MemoryType, ParallelType, Primitive, SExpr, SchedResult, ScheduleError,
    ScheduledFusion, TensorSchedule,
};
use crate::dtype::DataType;
use crate::ir::{IterKind, Op, ReductionOp, ValId};

impl ScheduledFusion {
    /// Applies one recorded primitive.
    pub fn apply(&mut self, p: &Primitive) -> SchedResult<()> {
        match p.clone() {
            Primitive::Split {
                tensor,
                axis,
                factor,
                inner,
            } => self.split_impl(tensor, axis, factor, inner),
            Primitive::Merge { tensor, axis } => self.merge(tensor, axis),
            Primitive::Reorder { tensor, order } => self.reorder(tensor, &order),
            Primitive::Parallelize {
                tensor,
                axis,
                ptype,
            } => self.parallelize(tensor, axis, ptype),
            Primitive::SetMemoryType { tensor, memory } => self.set_memory_type(tensor, memory),
            Primitive::CacheAfter { tensor } => self.cache_after(tensor).map(|_| ()),
            Primitive::CacheBefore { tensor } => self.cache_before(tensor).map(|_| ()),
            Primitive::CacheFork { tensor } => self.cache_fork(tensor).map(|_| ()),
            Primitive::Rfactor { tensor, axes } => self.rfactor(tensor, &axes).map(|_| ()),
            Primitive::ComputeAt {
                producer,
                consumer,
                pos,
            } => self.compute_at(producer, consumer, pos),
            Primitive::InlineMost => self.inline_most(),
            Primitive::ComputeWith { tensor, with, pos } => self.compute_with(tensor, with, pos),
            Primitive::TransformLike { reference, targets } => {
                self.transform_like(reference, &targets)
            }
            Primitive::ParallelizeLike { reference, targets } => {
                self.parallelize_like(reference, &targets)
            }
            Primitive::RecomputeAtUse { tensor } => self.recompute_at_use(tensor),
            Primitive::Hoist { tensor } => self.hoist(tensor),
            Primitive::HoistInNest { tensor } => self.hoist_in_nest(tensor),
            Primitive::SortLayout { layout } => self.sort_layout(layout),
        }
    }

    /// Makes the fusion's one sort a block sort of `layout` (the sort scheduler's
    /// schedule): `pad` a power of two, at least one row and 32 to 1024 threads.
    pub fn sort_layout(&mut self, layout: super::SortLayout) -> SchedResult<()> {
        let sorts = self
            .schedule
            .exprs
            .iter()
            .filter(|e| matches!(e.op, Op::Sort { .. }))
            .count();
        if sorts != 1 || self.schedule.exprs.len() != 1 {
            return Err(ScheduleError::Unsupported(format!(
                "a sort layout needs a fusion of exactly one sort, found {} expressions ({sorts} sorts)",
                self.schedule.exprs.len()
            )));
        }
        let ok = layout.pad >= 1
            && (layout.pad as u64).is_power_of_two()
            && layout.rows_per_block >= 1
            && (32..=1024).contains(&layout.threads)
            && layout.select >= 0
            && (layout.select == 0
                || ((layout.select as u64).is_power_of_two()
                    && layout.select <= 4096
                    && layout.rows_per_block == 1));
        if !ok {
            return Err(ScheduleError::Unsupported(format!(
                "sort layout {layout:?}: expected a power-of-two pad, at least one row per block, 32 to 1024 threads, and a select of 0 or a power of two up to 4096 with one row per block"
            )));
        }
        self.schedule.sort = Some(layout);
        self.schedule.history.push(Primitive::SortLayout { layout });
        Ok(())
    }

    /// Splits loop `axis` so that the inner dim has extent `factor`.
    pub fn split(&mut self, tv: ValId, axis: i64, factor: impl Into<Factor>) -> SchedResult<()> {
        self.split_impl(tv, axis, factor.into(), true)
    }

    /// Splits loop `axis` so that the outer dim has extent `factor`.
    pub fn split_outer(
        &mut self,
        tv: ValId,
        axis: i64,
        factor: impl Into<Factor>,
    ) -> SchedResult<()> {
        self.split_impl(tv, axis, factor.into(), false)
    }

    fn split_impl(&mut self, tv: ValId, axis: i64, factor: Factor, inner: bool) -> SchedResult<()> {
        match factor {
            Factor::Const(c) if c < 1 => {
                return Err(ScheduleError::InvalidArgument {
                    op: "split",
                    tensor: tv,
                    reason: format!("factor {c}: expected at least 1"),
                })
            }
            Factor::Scalar(v) => {
                let ok = self
                    .fusion
                    .get_val(v)
                    .is_some_and(|x| !x.is_tensor() && x.dtype.is_int())
                    && self.fusion.input_position(v).is_some();
                if !ok {
                    return Err(ScheduleError::InvalidArgument {
                        op: "split",
                        tensor: tv,
                        reason: format!(
                            "factor {v}: expected an integer scalar input of the fusion"
                        ),
                    });
                }
            }
            Factor::Const(_) => {}
        }
        for g in self.schedule.sibling_group(tv) {
            let t = self.schedule.tensor_mut("split", g)?;
            let a = t.domain.axis("split", g, axis)?;
            t.domain.split(a, factor.extent(), inner);
        }
        self.schedule.history.push(Primitive::Split {
            tensor: tv,
            axis,
            factor,
            inner,
        });
        Ok(())
    }

    /// Merges loop `axis` with `axis + 1`.
    pub fn merge(&mut self, tv: ValId, axis: i64) -> SchedResult<()> {
        for g in self.schedule.sibling_group(tv) {
            let t = self.schedule.tensor_mut("merge", g)?;
            let a = t.domain.axis("merge", g, axis)?;
            t.domain.merge(g, a)?;
        }
        self.schedule
            .history
            .push(Primitive::Merge { tensor: tv, axis });
        Ok(())
    }

    /// Reorders loop dims: new dim `i` is old dim `order[i]`.
    pub fn reorder(&mut self, tv: ValId, order: &[i64]) -> SchedResult<()> {
        for g in self.schedule.sibling_group(tv) {
            self.schedule
                .tensor_mut("reorder", g)?
                .domain
                .reorder(g, order)?;
        }
        self.schedule.history.push(Primitive::Reorder {
            tensor: tv,
            order: order.to_vec(),
        });
        Ok(())
    }

    /// Binds loop `axis` to a parallel type.
    pub fn parallelize(&mut self, tv: ValId, axis: i64, ptype: ParallelType) -> SchedResult<()> {
        for g in self.schedule.sibling_group(tv) {
            let t = self.schedule.tensor_mut("parallelize", g)?;
            let a = t.domain.axis("parallelize", g, axis)?;
            let id = t.domain.loop_dims[a];
            t.domain.dom_mut(id).parallel = ptype;
        }
        self.schedule.history.push(Primitive::Parallelize {
            tensor: tv,
            axis,
            ptype,
        });
        Ok(())
    }

    /// Places a tensor in registers, shared or global memory. Fusion inputs and outputs
    /// stay global.
    pub fn set_memory_type(&mut self, tv: ValId, memory: MemoryType) -> SchedResult<()> {
        let io = self.schedule.is_input(tv) || self.schedule.is_output(tv);
        let t = self.schedule.tensor_mut("set_memory_type", tv)?;
        if io && memory != MemoryType::Global {
            return Err(ScheduleError::MemoryType {
                tensor: tv,
                found: memory,
                reason: "fusion inputs and outputs live in global memory",
            });
        }
        t.memory = memory;
        self.schedule
            .history
            .push(Primitive::SetMemoryType { tensor: tv, memory });
        Ok(())
    }

    pub(super) fn new_tensor(
        &mut self,
        dtype: DataType,
        domain: TensorDomain,
        like: &TensorSchedule,
    ) -> ValId {
        let id = ValId::new(self.schedule.next_id);
        self.schedule.next_id += 1;
        self.schedule.tensors.insert(
            id,
            TensorSchedule {
                dtype,
                domain,
                memory: MemoryType::Local,
                compute_at: None,
                compute_with: None,
                contiguity: like.contiguity.clone(),
                stride_order: like.stride_order.clone(),
            },
        );
        id
    }

    /// `targets` and the siblings of each, without repeats.
    pub(super) fn with_siblings(&self, targets: &[ValId]) -> Vec<ValId> {
        let mut out = Vec::new();
        for &t in targets {
            for g in self.schedule.sibling_group(t) {
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
        out
    }

    /// Splits the reduction defining `tv` in two: a new tensor `r` reduces over the
    /// loop `axes` (which must be reduction dims), and `tv` then reduces `r` over the
    /// remaining reduction dims. Returns `r`, which keeps `tv`'s loop domain.
    ///
    /// The iteration dims of `tv` must not be transformed yet (schedule them after the
    /// rfactor, e.g. with [`ScheduledFusion::transform_like`]).
    pub fn rfactor(&mut self, tv: ValId, axes: &[i64]) -> SchedResult<ValId> {
        let op = "rfactor";
        let t = self.schedule.tensor(op, tv)?.clone();
        let invalid = |reason: String| ScheduleError::InvalidArgument {
            op,
            tensor: tv,
            reason,
        };
        let def = self
            .schedule
            .definition(tv)
            .ok_or_else(|| invalid("not defined by a reduction".into()))?;
        let red_op = match &self.schedule.exprs[def].op {
            Op::Reduction { op: r, .. } if *r != ReductionOp::Mean => *r,
            other => {
                return Err(invalid(format!(
                    "expected a sum, prod, max or min reduction, found {}",
                    other.name()
                )))
            }
        };
        let d = &t.domain;
        if d.root != d.logical {
            return Err(invalid(
                "the tensor is already the result of an rfactor".into(),
            ));
        }
        let mut rf = Vec::new();
        for &a in axes {
            let a = d.axis(op, tv, a)?;
            if d.loop_dom(a).kind != IterKind::Reduction {
                return Err(invalid(format!("loop axis {a} is not a reduction dim")));
            }
            if !rf.contains(&a) {
                rf.push(a);
            }
        }
        let n_red = d
            .loop_dims
            .iter()
            .filter(|&&l| d.dom(l).kind == IterKind::Reduction)
            .count();
        if rf.is_empty() || rf.len() == n_red {
            return Err(invalid(format!(
                "{} of {n_red} reduction loop axes given: expected some but not all",
                rf.len()
            )));
        }
        // The iteration loop dims must be the untransformed root iteration dims, in order.
        let iter_loop: Vec<DomId> = d
            .loop_dims
            .iter()
            .copied()
            .filter(|&l| d.dom(l).kind != IterKind::Reduction)
            .collect();
        let iter_root: Vec<DomId> = d
            .root
            .iter()
            .copied()
            .filter(|&l| d.dom(l).kind != IterKind::Reduction)
            .collect();
        if iter_loop != iter_root {
            return Err(invalid(
                "its iteration dims are transformed; rfactor first, then transform them".into(),
            ));
        }
        // r: the same domain; non-rfactored reduction loop dims become iteration dims.
        let mut rd = d.clone();
        for (i, &l) in d.loop_dims.iter().enumerate() {
            if d.dom(l).kind == IterKind::Reduction && !rf.contains(&i) {
                rd.dom_mut(l).kind = IterKind::Iteration;
            }
        }
        rd.logical = rd.loop_dims.clone();
        // tv: one root dim per loop dim of r that is not rfactored.
        let mut nd = TensorDomain {
            doms: Vec::new(),
            root: Vec::new(),
            logical: Vec::new(),
            loop_dims: Vec::new(),
            transforms: Vec::new(),
        };
        for (i, &l) in d.loop_dims.iter().enumerate() {
            if rf.contains(&i) {
                continue;
            }
            nd.doms.push(d.dom(l).clone());
            nd.root.push(DomId(nd.doms.len() as u32 - 1));
        }
        nd.logical = nd.root.clone();
        nd.loop_dims = nd.root.clone();
        let r = self.new_tensor(t.dtype, rd, &t);
        let in_ = self.schedule.exprs[def].inputs.clone();
        let red_axes: Vec<usize> = nd
            .root
            .iter()
            .enumerate()
            .filter(|(_, &l)| nd.dom(l).kind == IterKind::Reduction)
            .map(|(i, _)| i)
            .collect();
        self.schedule.exprs[def].inputs = vec![r];
        self.schedule.exprs[def].op = Op::Reduction {
            op: red_op,
            axes: red_axes,
        };
        // The reduced axes of the logical domain, read from the schedule: `tv` may be a
        // tensor the schedule added (a cache), which the fusion does not hold.
        let orig_axes: Vec<usize> = d
            .logical
            .iter()
            .enumerate()
            .filter(|(_, &l)| d.dom(l).kind == IterKind::Reduction)
            .map(|(i, _)| i)
            .collect();
        self.schedule.exprs.insert(
            def,
            SExpr {
                op: Op::Reduction {
                    op: red_op,
                    axes: orig_axes,
                },
                inputs: in_,
                output: r,
                siblings: Vec::new(),
            },
        );
        self.schedule.tensor_mut(op, tv)?.domain = nd;
        self.schedule.history.push(Primitive::Rfactor {
            tensor: tv,
            axes: axes.to_vec(),
        });
        Ok(r)
    }
}
