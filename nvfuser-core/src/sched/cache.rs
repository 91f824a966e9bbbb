//! The cache primitives, as methods of [`ScheduledFusion`]: `cache_after`,
//! `cache_before` and `cache_fork` insert copies of a tensor (in registers) between
//! it and its producer or consumers, without changing the fusion's meaning.

use super::domain::TensorDomain;
use super::{Primitive, SExpr, SchedResult, Schedule, ScheduleError, ScheduledFusion};
use crate::ir::{IterKind, Op, ValId};

impl ScheduledFusion {
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

    /// Moves the definition of `tv`, a load (a copy, slice, squeeze, broadcast or
    /// permute of fusion inputs, or a cat of inputs and slices of them, loaded with
    /// vectors), ahead of every computation, after the loads
    /// already there: like an input cache, a load that gets its own loops then never
    /// splits a loop nest of the math in two.
    pub fn hoist(&mut self, tv: ValId) -> SchedResult<()> {
        let def = self.load_definition(tv, "hoist")?;
        let s = &self.schedule;
        let at = s.exprs[..def].iter().take_while(|e| is_load(s, e)).count();
        let e = self.schedule.exprs.remove(def);
        self.schedule.exprs.insert(at, e);
        self.schedule.history.push(Primitive::Hoist { tensor: tv });
        Ok(())
    }

    /// Moves the definition of `tv`, a load as for [`hoist`](Self::hoist) computed at a
    /// consumer, ahead of every other computation of its loop nest (the expressions
    /// whose chain of compute-at consumers ends at the same tensor), after the loads of
    /// that nest already there. With several loop nests in one kernel (an output stored
    /// beside a reduction, or two reductions), each nest's loads then open it and come
    /// before its math, where hoisting them all to the kernel's start would open one
    /// nest's loop before another nest's math had closed its own.
    pub fn hoist_in_nest(&mut self, tv: ValId) -> SchedResult<()> {
        let def = self.load_definition(tv, "hoist_in_nest")?;
        let s = &self.schedule;
        let root = |t: ValId| s.nest_root(t);
        let nest = root(tv);
        if nest == tv {
            return Err(ScheduleError::InvalidArgument {
                op: "hoist_in_nest",
                tensor: tv,
                reason: "it is not computed at a consumer (no loop nest to hoist in)".into(),
            });
        }
        let first = s
            .exprs
            .iter()
            .position(|e| root(e.output) == nest)
            .unwrap_or(def);
        let at = first
            + s.exprs[first..def]
                .iter()
                .take_while(|e| is_load(s, e) && root(e.output) == nest)
                .count();
        let e = self.schedule.exprs.remove(def);
        self.schedule.exprs.insert(at.min(def), e);
        self.schedule
            .history
            .push(Primitive::HoistInNest { tensor: tv });
        Ok(())
    }

    /// The index of `tv`'s definition when it is a load (see [`hoist`](Self::hoist)).
    fn load_definition(&self, tv: ValId, op: &'static str) -> SchedResult<usize> {
        let s = &self.schedule;
        let def = s.definition(tv).ok_or(ScheduleError::InvalidArgument {
            op,
            tensor: tv,
            reason: "a fusion input has no definition".into(),
        })?;
        if !is_load(s, &s.exprs[def]) {
            return Err(ScheduleError::InvalidArgument {
                op,
                tensor: tv,
                reason: format!(
                    "{} is not a copy, slice, squeeze, broadcast or permute of fusion inputs",
                    s.exprs[def].op.name()
                ),
            });
        }
        Ok(def)
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

/// A load: a copy, slice, squeeze or broadcast of fusion inputs.
fn is_load(s: &Schedule, e: &SExpr) -> bool {
    let in_memory = |i: ValId| s.tensors.contains_key(&i) && s.definition(i).is_none();
    // A cat of fusion inputs and of slices of them (recomputed where the cat reads).
    if matches!(e.op, Op::Cat { .. }) {
        return e.inputs.iter().all(|&i| {
            in_memory(i)
                || s.recomputed(i).is_some_and(|r| {
                    matches!(r.op, Op::Slice { .. })
                        && r.inputs.first().is_some_and(|&x| in_memory(x))
                })
        });
    }
    matches!(
        e.op,
        Op::Set
            | Op::Slice { .. }
            | Op::Squeeze { .. }
            | Op::Broadcast { .. }
            | Op::Permute { .. }
            | Op::IndexSelect { .. }
    ) && e.inputs.iter().any(|&i| s.tensors.contains_key(&i))
        && e.inputs.iter().all(|&i| s.definition(i).is_none())
}
