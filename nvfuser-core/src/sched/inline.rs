//! The placement primitives, as methods of [`ScheduledFusion`]: `compute_at` (one
//! producer inside a consumer's loops), `inline_most` (every tensor as deep as its
//! consumers allow) and `settle_shared_producers` (positions lowered to the loops all
//! consumers of a tensor share).

use super::{ComputeAt, Primitive, SchedResult, ScheduleError, ScheduledFusion};
use crate::ir::ValId;

impl ScheduledFusion {
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
                    // A serial loop must be the same loop. A consumer's size-1 dim is
                    // a loop of its own only if no consumer it is computed at owns a
                    // real one there (fuzz seed 1117748: a broadcast computed inside
                    // an output's unrolled loop was read by another output outside it).
                    let (o0, oc) = (
                        self.loop_owner(first_consumer, pos),
                        self.loop_owner(c, pos),
                    );
                    // The dims may differ in kind only when they are one loop (a value
                    // summed over the rows and stored by an output computed with the
                    // sum, `compute_with`: the row loop is the sum's reduction loop).
                    if a.extent != b.extent
                        || a.parallel != b.parallel
                        || (a.kind != b.kind && o0 != oc)
                    {
                        break 'grow;
                    }
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

    /// Runs the first `pos` loops of `tensor` in those of `with`, a tensor that does not
    /// read it (nvFuser's `computeWith`): the two loop nests become one from the
    /// outermost loop to `pos`. The dims may differ in kind (a column sum's reduction
    /// dim runs in the row loop of the row's math) but not in extent or parallel type;
    /// `with` must not be computed from `tensor`. Kept by `inline_most`.
    pub fn compute_with(&mut self, tensor: ValId, with: ValId, pos: usize) -> SchedResult<()> {
        let op = "compute_with";
        self.schedule.tensor(op, tensor)?;
        self.schedule.tensor(op, with)?;
        let cw = ComputeAt {
            consumer: with,
            pos,
        };
        super::validate::check_compute_with(&self.schedule, tensor, cw)?;
        for g in self.schedule.sibling_group(tensor) {
            self.schedule.tensor_mut(op, g)?.compute_with = (pos > 0).then_some(cw);
        }
        self.schedule
            .history
            .push(Primitive::ComputeWith { tensor, with, pos });
        Ok(())
    }

    /// The tensor whose loop `pos` of `tv` really is, following compute-at (and
    /// compute-with) positions.
    fn loop_owner(&self, mut tv: ValId, pos: usize) -> ValId {
        // Iterative, and bounded: a compute-with cycle would otherwise never end
        // (validation refuses one).
        for _ in 0..=self.schedule.tensors.len() {
            let t = self.schedule.tensors.get(&tv);
            tv = match (t.and_then(|t| t.compute_at), t.and_then(|t| t.compute_with)) {
                (Some(ca), _) if pos < ca.pos => ca.consumer,
                (_, Some(cw)) if pos < cw.pos => cw.consumer,
                _ => return tv,
            };
        }
        tv
    }
}
