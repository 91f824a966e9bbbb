//! The scheduling primitives, as methods of [`ScheduledFusion`].
//!
//! Each public method checks its arguments, records itself as a [`Primitive`] and
//! changes the schedule. Checks that depend on several tensors (parallel extents,
//! vectorization, compute-at compatibility) run again in [`super::validate`], since
//! later primitives can invalidate them.

use super::domain::{DomId, DomTransform, TensorDomain};
use super::{
    ComputeAt, Factor, MemoryType, ParallelType, Primitive, SExpr, SchedResult, ScheduleError,
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
            Primitive::TransformLike { reference, targets } => {
                self.transform_like(reference, &targets)
            }
            Primitive::ParallelizeLike { reference, targets } => {
                self.parallelize_like(reference, &targets)
            }
        }
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

    fn new_tensor(
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
                contiguity: like.contiguity.clone(),
                stride_order: like.stride_order.clone(),
            },
        );
        id
    }

    /// `targets` and the siblings of each, without repeats.
    fn with_siblings(&self, targets: &[ValId]) -> Vec<ValId> {
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

    /// Inserts `c = set(tv)` and makes every consumer of `tv` read `c`; returns `c`
    /// (in registers). Typically applied to inputs, so that they are loaded once.
    pub fn cache_after(&mut self, tv: ValId) -> SchedResult<ValId> {
        let t = self.schedule.tensor("cache_after", tv)?.clone();
        let uses = self.schedule.uses(tv);
        if uses.is_empty() {
            return Err(ScheduleError::InvalidArgument {
                op: "cache_after",
                tensor: tv,
                reason: "the tensor has no consumer to read the cache".into(),
            });
        }
        let dims = logical_shape(&t.domain);
        let c = self.new_tensor(t.dtype, TensorDomain::from_logical(&dims), &t);
        for &u in &uses {
            for i in self.schedule.exprs[u].inputs.iter_mut() {
                if *i == tv {
                    *i = c;
                }
            }
        }
        // A cache of a fusion input depends on nothing computed: it goes ahead of every
        // computation (after earlier input caches), so loads that get their own loops
        // never split a loop nest of the math in two.
        let at = if self.schedule.is_input(tv) {
            self.schedule
                .exprs
                .iter()
                .take_while(|e| {
                    e.op == Op::Set && e.inputs.len() == 1 && self.schedule.is_input(e.inputs[0])
                })
                .count()
                .min(uses[0])
        } else {
            uses[0]
        };
        self.schedule.exprs.insert(
            at,
            SExpr {
                op: Op::Set,
                inputs: vec![tv],
                output: c,
                siblings: Vec::new(),
            },
        );
        for t in self.schedule.tensors.values_mut() {
            if let Some(ca) = &mut t.compute_at {
                if ca.consumer == tv {
                    t.compute_at = None;
                }
            }
        }
        self.schedule
            .history
            .push(Primitive::CacheAfter { tensor: tv });
        Ok(c)
    }

    /// Makes the definition of `tv` write a new tensor `c` (in registers) and defines
    /// `tv = set(c)`; returns `c`. `c` takes over `tv`'s domain and transforms, and `tv`
    /// gets a fresh loop domain over its shape. Typically applied to outputs.
    pub fn cache_before(&mut self, tv: ValId) -> SchedResult<ValId> {
        let c = self.cache_before_impl(tv)?;
        self.schedule
            .history
            .push(Primitive::CacheBefore { tensor: tv });
        Ok(c)
    }

    fn cache_before_impl(&mut self, tv: ValId) -> SchedResult<ValId> {
        let t = self.schedule.tensor("cache_before", tv)?.clone();
        let Some(def) = self.schedule.definition(tv) else {
            return Err(ScheduleError::InvalidArgument {
                op: "cache_before",
                tensor: tv,
                reason: "a fusion input has no definition to cache".into(),
            });
        };
        let c = self.new_tensor(t.dtype, t.domain.clone(), &t);
        if let Some(ca) = t.compute_at {
            self.schedule.tensor_mut("cache_before", c)?.compute_at = Some(ca);
        }
        let dims = logical_shape(&t.domain);
        let tt = self.schedule.tensor_mut("cache_before", tv)?;
        tt.domain = TensorDomain::from_logical(&dims);
        tt.compute_at = None;
        self.schedule.exprs[def].replace_output(tv, c);
        self.schedule.exprs.insert(
            def + 1,
            SExpr {
                op: Op::Set,
                inputs: vec![c],
                output: tv,
                siblings: Vec::new(),
            },
        );
        Ok(c)
    }

    /// For a fusion output that other expressions of the kernel also read: its
    /// definition writes a new register tensor `c` (which takes over `tv`'s domain and
    /// transforms), every other consumer reads `c`, and `tv = set(c)` only stores the
    /// result. Returns `c`. Without it, a consumer would read back from global memory a
    /// value another thread may not have written yet.
    pub fn cache_fork(&mut self, tv: ValId) -> SchedResult<ValId> {
        let op = "cache_fork";
        self.schedule.tensor(op, tv)?;
        if !self.schedule.is_output(tv) || self.schedule.uses(tv).is_empty() {
            return Err(ScheduleError::InvalidArgument {
                op,
                tensor: tv,
                reason: "expected a fusion output that other expressions read".into(),
            });
        }
        let uses = self.schedule.uses(tv);
        let c = self.cache_before_impl(tv)?;
        for u in uses {
            // `uses` were computed before the copy was inserted at `def + 1`.
            let u = if u > self.schedule.definition(c).unwrap_or(0) {
                u + 1
            } else {
                u
            };
            for i in self.schedule.exprs[u].inputs.iter_mut() {
                if *i == tv {
                    *i = c;
                }
            }
        }
        for t in self.schedule.tensors.values_mut() {
            if let Some(ca) = &mut t.compute_at {
                if ca.consumer == tv {
                    t.compute_at = None;
                }
            }
        }
        self.schedule
            .history
            .push(Primitive::CacheFork { tensor: tv });
        Ok(c)
    }

    /// [`cache_fork`](Self::cache_fork) of every fusion output that another expression
    /// reads, is not an input and for which `wanted` holds, in output order; returns
    /// `(output, copy)` pairs. Schedulers call it first for the outputs that some thread
    /// other than the reader stores (lowering refuses those read-backs).
    pub fn fork_read_outputs(
        &mut self,
        wanted: impl Fn(ValId) -> bool,
    ) -> SchedResult<Vec<(ValId, ValId)>> {
        let mut forked = Vec::new();
        let outputs = self.schedule.outputs.clone();
        for o in outputs {
            if self.schedule.is_input(o)
                || forked.iter().any(|&(f, _)| f == o)
                || self.schedule.uses(o).is_empty()
                || !wanted(o)
            {
                continue;
            }
            let c = self.cache_fork(o)?;
            forked.push((o, c));
        }
        Ok(forked)
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

    /// Computes `producer` inside the first `pos` loops of `consumer`.
    pub fn compute_at(&mut self, producer: ValId, consumer: ValId, pos: usize) -> SchedResult<()> {
        let op = "compute_at";
        self.schedule.tensor(op, consumer)?;
        self.schedule.tensor(op, producer)?;
        if self.schedule.is_input(producer) {
            return Err(ScheduleError::InvalidArgument {
                op,
                tensor: producer,
                reason: "fusion inputs are read from global memory, not computed".into(),
            });
        }
        let reads = self
            .schedule
            .uses(producer)
            .iter()
            .any(|&u| self.schedule.exprs[u].defines(consumer));
        if !reads {
            return Err(ScheduleError::InvalidArgument {
                op,
                tensor: producer,
                reason: format!("T{} does not read it", consumer.id()),
            });
        }
        let ca = ComputeAt { consumer, pos };
        super::validate::check_compute_at(&self.schedule, producer, ca)?;
        for g in self.schedule.sibling_group(producer) {
            self.schedule.tensor_mut(op, g)?.compute_at = (pos > 0).then_some(ca);
        }
        self.schedule.history.push(Primitive::ComputeAt {
            producer,
            consumer,
            pos,
        });
        Ok(())
    }

    /// Inlines every computed tensor as deep as all of its consumers allow: loop dims
    /// are shared while extents and parallel types match, never past a reduction dim of
    /// the producer, and only where all consumers agree.
    pub fn inline_most(&mut self) -> SchedResult<()> {
        // Consumers first, so that the loops a consumer shares with its own consumers
        // are known when its producers are placed.
        let ids: Vec<ValId> = self.schedule.exprs.iter().rev().map(|e| e.output).collect();
        for tv in ids {
            if self.schedule.is_input(tv) {
                continue;
            }
            // Siblings of a multi-output expression are placed together, by the first.
            let group = self.schedule.sibling_group(tv);
            if group.iter().any(|&g| g < tv) {
                continue;
            }
            let mut pairs: Vec<(ValId, ValId)> = Vec::new();
            for &g in &group {
                for u in self.schedule.uses(g) {
                    pairs.push((g, self.schedule.exprs[u].output));
                }
            }
            let Some(&(_, first_consumer)) = pairs.first() else {
                continue;
            };
            let mut pos = 0;
            let max = self.schedule.tensors[&tv].domain.loop_dims.len();
            'grow: while pos < max {
                let cand = pos + 1;
                for &(g, c) in &pairs {
                    let ca = ComputeAt {
                        consumer: c,
                        pos: cand,
                    };
                    if super::validate::check_compute_at(&self.schedule, g, ca).is_err() {
                        break 'grow;
                    }
                }
                // All consumers must agree on the loop they share: the same dim, and
                // the same actual loop once their own compute-at positions are followed.
                let c0 = &self.schedule.tensors[&first_consumer].domain;
                for &(_, c) in &pairs[1..] {
                    let ci = &self.schedule.tensors[&c].domain;
                    let (a, b) = (c0.loop_dom(pos), ci.loop_dom(pos));
                    if a.extent != b.extent || a.kind != b.kind || a.parallel != b.parallel {
                        break 'grow;
                    }
                    // A serial loop must be the same loop. A consumer's size-1 dim is
                    // a loop of its own only if no consumer it is computed at owns a
                    // real one there (fuzz seed 1117748: a broadcast computed inside
                    // an output's unrolled loop was read by another output outside it).
                    let (o0, oc) = (
                        self.loop_owner(first_consumer, pos),
                        self.loop_owner(c, pos),
                    );
                    let serial = |d: &super::domain::Dom| {
                        !d.parallel.is_thread() && d.extent != crate::ir::Extent::Const(1)
                    };
                    let owned = |o: ValId| serial(self.schedule.tensors[&o].domain.loop_dom(pos));
                    if o0 != oc && (serial(a) || owned(o0) || owned(oc)) {
                        break 'grow;
                    }
                }
                pos = cand;
            }
            for &g in &group {
                self.schedule.tensor_mut("inline_most", g)?.compute_at =
                    (pos > 0).then_some(ComputeAt {
                        consumer: first_consumer,
                        pos,
                    });
            }
        }
        self.schedule.history.push(Primitive::InlineMost);
        Ok(())
    }

    /// After compute-at changes made once tensors were inlined (a scheduler moving its
    /// load and store caches into loops of their own): lowers the position of every
    /// tensor read by several consumers to the loops all of them still share, so no
    /// consumer reads a register tensor declared inside another consumer's loop.
    pub fn settle_shared_producers(&mut self) -> SchedResult<()> {
        let ids: Vec<ValId> = self.schedule.exprs.iter().rev().map(|e| e.output).collect();
        for tv in ids {
            if self.schedule.is_input(tv) {
                continue;
            }
            let Some(ca) = self.schedule.tensors[&tv].compute_at else {
                continue;
            };
            let group = self.schedule.sibling_group(tv);
            let consumers: Vec<ValId> = group
                .iter()
                .flat_map(|&g| self.schedule.uses(g))
                .map(|u| self.schedule.exprs[u].output)
                .collect();
            if consumers.len() < 2 {
                continue;
            }
            let first = ca.consumer;
            let mut pos = 0;
            'grow: while pos < ca.pos {
                let a = self.schedule.tensors[&first].domain.loop_dom(pos);
                for &c in &consumers {
                    let d = &self.schedule.tensors[&c].domain;
                    if pos >= d.loop_dims.len() {
                        break 'grow;
                    }
                    let b = d.loop_dom(pos);
                    if a.extent != b.extent || a.kind != b.kind || a.parallel != b.parallel {
                        break 'grow;
                    }
                    // The same loop, thread-bound and size-1 ones included: the lowering
                    // scopes a register tensor by the loops it is computed in.
                    if self.loop_owner(first, pos) != self.loop_owner(c, pos) {
                        break 'grow;
                    }
                }
                pos += 1;
            }
            if pos < ca.pos {
                for &g in &group {
                    self.schedule
                        .tensor_mut("settle_shared_producers", g)?
                        .compute_at = (pos > 0).then_some(ComputeAt {
                        consumer: first,
                        pos,
                    });
                }
            }
        }
        Ok(())
    }

    /// The tensor whose loop `pos` of `tv` really is, following compute-at positions.
    fn loop_owner(&self, tv: ValId, pos: usize) -> ValId {
        match self.schedule.tensors.get(&tv).and_then(|t| t.compute_at) {
            Some(ca) if pos < ca.pos => self.loop_owner(ca.consumer, pos),
            _ => tv,
        }
    }

    /// Replays `reference`'s transforms (from its root) on each target's logical dims,
    /// which must match the reference's root dims in number. The target's own loop
    /// transforms are replaced; parallel types are not copied (see
    /// [`ScheduledFusion::parallelize_like`]).
    pub fn transform_like(&mut self, reference: ValId, targets: &[ValId]) -> SchedResult<()> {
        let op = "transform_like";
        let r = self.schedule.tensor(op, reference)?.domain.clone();
        for tv in self.with_siblings(targets) {
            let t = self.schedule.tensor_mut(op, tv)?;
            if t.domain.root != t.domain.logical {
                return Err(ScheduleError::Unsupported(format!(
                    "transform_like onto T{}, the result of an rfactor",
                    tv.id()
                )));
            }
            if t.domain.logical.len() != r.root.len() {
                return Err(ScheduleError::InvalidArgument {
                    op,
                    tensor: tv,
                    reason: format!(
                        "{} logical dims; expected {} to match the root dims of T{}",
                        t.domain.logical.len(),
                        r.root.len(),
                        reference.id()
                    ),
                });
            }
            // The fusion guarantees that positionally mapped iteration dims have equal
            // sizes (the builder checked broadcasting), so targets take the reference's
            // extent expressions: equal extents are then also structurally equal.
            // A broadcast dim the reference resolves takes the reference's extent too
            // and stays a broadcast (index 0, no loop of its own): merged with other
            // dims, it spans the loop the reference runs (merge(i{2}, b{1}) would
            // count 2 elements where the reference's loop counts 2N, and the loop's
            // index would be split back by the wrong extent).
            let logical: Vec<_> = t
                .domain
                .logical
                .iter()
                .zip(&r.root)
                .map(|(&l, &rr)| {
                    let mut d = t.domain.dom(l).clone();
                    let rd = r.dom(rr);
                    if rd.kind != IterKind::Broadcast {
                        d.extent = rd.extent.clone();
                    }
                    d
                })
                .collect();
            let mut nd = TensorDomain::from_logical(&[]);
            nd.doms = logical;
            nd.root = (0..nd.doms.len() as u32).map(DomId).collect();
            nd.logical = nd.root.clone();
            nd.loop_dims = nd.root.clone();
            let mut map = std::collections::HashMap::new();
            for (i, &rr) in r.root.iter().enumerate() {
                map.insert(rr, nd.root[i]);
            }
            for tr in &r.transforms {
                match tr {
                    DomTransform::Split {
                        input,
                        outer,
                        inner,
                        factor,
                        inner_split,
                    } => {
                        let Some(&m) = map.get(input) else { continue };
                        let axis = nd.loop_dims.iter().position(|&l| l == m).unwrap_or(0);
                        let (o, i) = nd.split(axis, factor.clone(), *inner_split);
                        map.insert(*outer, o);
                        map.insert(*inner, i);
                    }
                    DomTransform::Merge { outer, inner, out } => {
                        let (Some(&a), Some(&b)) = (map.get(outer), map.get(inner)) else {
                            continue;
                        };
                        let pa = nd.loop_dims.iter().position(|&l| l == a);
                        let pb = nd.loop_dims.iter().position(|&l| l == b);
                        let (Some(pa), Some(pb)) = (pa, pb) else {
                            continue;
                        };
                        // Bring b right after a, then merge.
                        let mut order: Vec<i64> = (0..nd.loop_dims.len() as i64)
                            .filter(|&x| x != pb as i64)
                            .collect();
                        let at = order.iter().position(|&x| x == pa as i64).unwrap_or(0);
                        order.insert(at + 1, pb as i64);
                        nd.reorder(tv, &order)?;
                        let axis = nd.loop_dims.iter().position(|&l| l == a).unwrap_or(0);
                        let m = nd.merge(tv, axis)?;
                        map.insert(*out, m);
                    }
                }
            }
            let mut order = Vec::new();
            for l in &r.loop_dims {
                if let Some(&m) = map.get(l) {
                    if let Some(p) = nd.loop_dims.iter().position(|&x| x == m) {
                        order.push(p as i64);
                    }
                }
            }
            if order.len() == nd.loop_dims.len() {
                nd.reorder(tv, &order)?;
            }
            t.domain = nd;
        }
        self.schedule.history.push(Primitive::TransformLike {
            reference,
            targets: targets.to_vec(),
        });
        Ok(())
    }

    /// Copies `reference`'s parallel types (except vectorize) to each target's loop dims,
    /// position by position, where the extents agree (broadcast dims of a target take
    /// any extent).
    pub fn parallelize_like(&mut self, reference: ValId, targets: &[ValId]) -> SchedResult<()> {
        let op = "parallelize_like";
        let r = self.schedule.tensor(op, reference)?.domain.clone();
        for tv in self.with_siblings(targets) {
            let t = &mut self.schedule.tensor_mut(op, tv)?.domain;
            for (i, &rl) in r.loop_dims.iter().enumerate() {
                let Some(&tl) = t.loop_dims.get(i) else { break };
                let rd = r.dom(rl);
                if rd.parallel == ParallelType::Vectorize {
                    continue;
                }
                let td = t.dom(tl).clone();
                if td.extent == rd.extent || td.kind == IterKind::Broadcast {
                    t.dom_mut(tl).parallel = rd.parallel;
                }
            }
        }
        self.schedule.history.push(Primitive::ParallelizeLike {
            reference,
            targets: targets.to_vec(),
        });
        Ok(())
    }
}

/// The logical dims of a domain without reduction dims, as fusion-level dims.
fn logical_shape(d: &TensorDomain) -> Vec<crate::ir::IterDomain> {
    d.logical
        .iter()
        .map(|&l| d.dom(l))
        .filter(|x| x.kind != IterKind::Reduction)
        .map(|x| crate::ir::IterDomain {
            extent: x.extent.clone(),
            kind: x.kind,
        })
        .collect()
}
