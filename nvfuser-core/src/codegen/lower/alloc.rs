//! Allocations: where each register tensor is declared, shared-memory buffers (with
//! their bank-conflict padding and the static size limit), the anchors of reductions
//! at their serial loops, and the barriers around shared-memory reads and writes.

use std::collections::HashSet;

use super::reductions::{grid_dims, is_reduction, is_welford, red_parallel};
use super::{Key, Lower, Node};
use crate::codegen::kir::{Requirement, Stmt};
use crate::dtype::DataType;
use crate::ir::{IterKind, ValId};
use crate::sched::{MemoryType, ParallelType, SchedResult, ScheduleError, STATIC_SHARED_LIMIT};

impl Lower<'_> {
    /// The scope (loop key) a register tensor is allocated in, and its size.
    fn alloc_scope(&self, tv: ValId) -> Option<Key> {
        let t = self.t(tv);
        let mut pos = t.compute_at.map_or(0, |c| c.pos);
        // A reduction's accumulators live outside its outermost serial reduction loop
        // (inside it only when that loop is its own, past the compute-at position).
        if is_reduction(&t.domain) {
            if let Some(a) = (0..t.domain.loop_dims.len()).find(|&i| {
                t.domain.loop_dom(i).kind == IterKind::Reduction && self.makes_loop(self.key(tv, i))
            }) {
                pos = pos.min(a);
            }
        }
        (0..pos)
            .map(|i| self.key(tv, i))
            .rfind(|&k| self.makes_loop(k))
    }

    pub(super) fn plan_allocs_and_anchors(&mut self) -> SchedResult<()> {
        for (ei, e) in self.s.exprs.iter().enumerate() {
            let tv = e.output;
            let t = self.t(tv);
            for o in e.outputs() {
                match self.t(o).memory {
                    MemoryType::Global => {}
                    MemoryType::Shared => {
                        let (_, exts) = self.padded_alloc_dims(o)?;
                        let n = exts.iter().product::<i64>().max(1);
                        self.shared
                            .push((format!("T{}", o.id()), self.t(o).dtype, n));
                    }
                    MemoryType::Local => {
                        let scope = self.alloc_scope(o);
                        self.allocs.entry(scope).or_default().push(o);
                    }
                }
            }
            if matches!(e.op, crate::ir::Op::Scan { .. }) {
                self.plan_scan_allocs(ei)?;
            }
            if is_reduction(&t.domain) {
                let anchor = (0..t.domain.loop_dims.len()).find(|&i| {
                    t.domain.loop_dom(i).kind == IterKind::Reduction
                        && self.makes_loop(self.key(tv, i))
                });
                if let Some(i) = anchor {
                    self.anchors.entry(self.key(tv, i)).or_default().push(ei);
                    self.anchored.insert(ei);
                }
                let welford = is_welford(&e.op);
                let tidx = red_parallel(&t.domain, ParallelType::TIDx);
                let slots = if tidx {
                    Some(32)
                } else if red_parallel(&t.domain, ParallelType::TIDy) {
                    // One slot per thread of the block (validation keeps the block
                    // dims constant for a reduction over threadIdx.y).
                    let mut n = 1i64;
                    for p in [ParallelType::TIDx, ParallelType::TIDy, ParallelType::TIDz] {
                        if let Some(x) = self.bound.get(&p) {
                            n *= x.as_const().ok_or_else(|| {
                                ScheduleError::Unsupported(format!(
                                    "block reduction of T{} over threadIdx.y needs constant block dims, {p} is {x}",
                                    tv.id()
                                ))
                            })?;
                        }
                    }
                    Some(n)
                } else {
                    None
                };
                if tidx {
                    let e = self.bound[&ParallelType::TIDx].clone();
                    if e.as_const().is_none() {
                        self.requirements.push(Requirement::Divisible {
                            extent: e,
                            by: 32,
                            why: format!("block reduction of T{} over threadIdx.x", tv.id()),
                        });
                    }
                }
                if let Some(slots) = slots {
                    if welford {
                        for (suffix, dt) in
                            [("avg", t.dtype), ("m2", t.dtype), ("n", DataType::I64)]
                        {
                            self.shared
                                .push((format!("T{}_smem_{suffix}", tv.id()), dt, slots));
                        }
                    } else {
                        self.shared
                            .push((format!("T{}_smem", tv.id()), t.dtype, slots));
                    }
                }
                if grid_dims(&t.domain).next().is_some() {
                    self.plan_grid_reduction(ei)?;
                }
            }
        }
        let total: i64 = self
            .shared
            .iter()
            .map(|(_, dt, n)| n * dt.size_bytes() as i64)
            .sum();
        if total > STATIC_SHARED_LIMIT {
            return Err(ScheduleError::SharedMemoryTooLarge {
                bytes: total,
                limit: STATIC_SHARED_LIMIT,
                detail: self
                    .shared
                    .iter()
                    .map(|(n, dt, c)| format!("{n}: {}", c * dt.size_bytes() as i64))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(())
    }

    /// Size of a register or shared tensor and the loop positions it spans.
    fn alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        self.t(tv).alloc_dims(tv)
    }

    pub(super) fn alloc_stmt(&self, tv: ValId) -> SchedResult<Stmt> {
        let (_, exts) = self.alloc_dims(tv)?;
        Ok(Stmt::Alloc {
            name: format!("T{}", tv.id()),
            dtype: self.t(tv).dtype,
            size: exts.iter().product::<i64>().max(1),
        })
    }

    /// [`Self::alloc_dims`], with the rows of a shared-memory tile padded by one
    /// element when they span a multiple of 32 banks: a tile read down its columns (a
    /// transpose) then hits 32 different banks instead of one. Not for tiles accessed
    /// with vectors (a padded row would break their alignment).
    pub(super) fn padded_alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        let (dims, mut exts) = self.alloc_dims(tv)?;
        let t = self.t(tv);
        let vectorized = t
            .domain
            .loop_dims
            .iter()
            .any(|&l| t.domain.dom(l).parallel == ParallelType::Vectorize);
        if t.memory == MemoryType::Shared && exts.len() >= 2 && !vectorized {
            if let Some(last) = exts.last_mut() {
                let bytes = *last * t.dtype.size_bytes() as i64;
                if bytes % 128 == 0 && t.dtype.size_bytes() == 4 {
                    *last += 1;
                }
            }
        }
        Ok((dims, exts))
    }

    /// Shared-memory tensors written and read by the expressions under `n`.
    pub(super) fn shared_access(&self, n: &Node, w: &mut HashSet<ValId>, r: &mut HashSet<ValId>) {
        match n {
            Node::Expr(ei) => {
                let e = &self.s.exprs[*ei];
                let shared = |v: &ValId| {
                    self.s
                        .tensors
                        .get(v)
                        .is_some_and(|t| t.memory == MemoryType::Shared)
                };
                w.extend(e.outputs().into_iter().filter(shared));
                r.extend(e.inputs.iter().copied().filter(shared));
            }
            Node::Loop { body, .. } => {
                for c in body {
                    self.shared_access(c, w, r);
                }
            }
        }
    }

    /// `__syncthreads()` before code that reads a shared tensor written since the last
    /// barrier (read-after-write across threads).
    pub(super) fn sync_before_reads(&mut self, n: &Node, out: &mut Vec<Stmt>) {
        let (mut w, mut r) = (HashSet::new(), HashSet::new());
        self.shared_access(n, &mut w, &mut r);
        if r.iter().any(|v| self.pending_sync.contains(v)) {
            let mut names: Vec<ValId> = r.intersection(&self.pending_sync).copied().collect();
            names.sort();
            out.push(Stmt::Sync(format!(
                "{} written by other threads",
                names
                    .iter()
                    .map(|v| format!("T{}", v.id()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
            self.pending_sync.clear();
        }
    }
}
