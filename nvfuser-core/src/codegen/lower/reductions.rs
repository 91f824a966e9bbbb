//! Reductions: accumulator initialization before the serial reduction loops,
//! accumulation inside them, and the finish after them (block all-reduce, Welford
//! results, grid reduction through work buffers, the store of the result).

use std::collections::HashMap;
use std::ops::{Add, Mul};

use super::{ext, unsupported, Lower};
use crate::codegen::abi::{Param, ParamKind, WorkKind};
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, CType, Expr, Func, Stmt};
use crate::dtype::{DataType, ScalarValue};
use crate::ir::{Extent, IterKind, Op, ReductionOp, ValId};
use crate::sched::{MemoryType, ParallelType, SchedResult, TensorDomain};

impl Lower<'_> {
    fn red_op(&self, ei: usize) -> SchedResult<ReductionOp> {
        match &self.s.exprs[ei].op {
            Op::Reduction { op, .. } => Ok(*op),
            other => unsupported(format!(
                "lowering of {} is not implemented yet",
                other.name()
            )),
        }
    }

    fn acc(&self, tv: ValId) -> SchedResult<Expr> {
        let t = self.t(tv);
        if t.memory == MemoryType::Global {
            return Ok(Expr::var(format!("T{}_acc", tv.id())));
        }
        let cidx = self.consumer_indices(tv);
        Ok(Expr::elem(
            format!("T{}", tv.id()),
            self.store_offset(tv, &cidx)?,
        ))
    }

    pub(super) fn emit_reduction_init(
        &mut self,
        ei: usize,
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let dt = self.t(tv).dtype;
        if is_welford(&self.s.exprs[ei].op) {
            let zero = Expr::Lit(ScalarValue::Int(0), dt.compute_type());
            out.push(Stmt::Comment(format!(
                "Welford accumulator of T{}: running mean, sum of squared deviations, count",
                tv.id()
            )));
            for (suffix, ty, init) in [
                ("avg", dt, zero.clone()),
                ("m2", dt, zero),
                ("n", DataType::I64, Expr::int(0)),
            ] {
                out.push(Stmt::Decl {
                    konst: false,
                    ty: ty.into(),
                    name: format!("T{}_{suffix}", tv.id()),
                    init,
                });
            }
            return Ok(());
        }
        let op = self.red_op(ei)?;
        let init = init_value(op, dt);
        if let Some(n) = self.grouped(tv)? {
            out.push(Stmt::Comment(format!(
                "accumulators of T{}: one per element of its loops inside the reduction loop",
                tv.id()
            )));
            let lhs = |k: Idx| Expr::elem(format!("T{}", tv.id()), k);
            out.push(self.flat_loop(n, |k| Stmt::Assign {
                lhs: lhs(k),
                rhs: init.clone(),
            }));
            return Ok(());
        }
        if self.t(tv).memory == MemoryType::Global {
            out.push(Stmt::Comment(format!("accumulator of T{}", tv.id())));
            out.push(Stmt::Decl {
                konst: false,
                ty: dt.into(),
                name: format!("T{}_acc", tv.id()),
                init,
            });
        } else {
            out.push(Stmt::Assign {
                lhs: self.acc(tv)?,
                rhs: init,
            });
        }
        Ok(())
    }

    pub(super) fn emit_accumulate(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let dt = self.t(tv).dtype;
        let cidx = self.consumer_indices(tv);
        let cond = self.predicates(tv, &cidx, true);
        let x = self.operand(e, e.inputs[0], dt, super::At::Loop(&cidx))?;
        let st = if is_welford(&e.op) {
            let n = tv.id();
            let mut args: Vec<Expr> = ["avg", "m2", "n"]
                .iter()
                .map(|s| Expr::var(format!("T{n}_{s}")))
                .collect();
            args.push(x);
            Stmt::Call {
                func: Func::WelfordUpdate,
                args,
            }
        } else {
            let op = self.red_op(ei)?;
            let acc = self.acc(tv)?;
            let a = acc.clone();
            let rhs = match op {
                ReductionOp::Sum | ReductionOp::Mean => a.bin(BinOp::Add, x),
                ReductionOp::Prod => a.bin(BinOp::Mul, x),
                ReductionOp::Max => Expr::call(Func::Maximum, vec![a, x]),
                ReductionOp::Min => Expr::call(Func::Minimum, vec![a, x]),
            };
            Stmt::Assign {
                lhs: acc,
                rhs: rhs.cast(dt),
            }
        };
        out.push(if cond.is_empty() {
            st
        } else {
            Stmt::If {
                cond,
                body: vec![st],
            }
        });
        Ok(())
    }

    /// Stores `value` into output `o` of a reduction at the current indices (guarded
    /// for global outputs; `extra` conditions are and-ed in).
    fn store_result(
        &self,
        o: ValId,
        value: Expr,
        extra: &[Expr],
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let t = self.t(o);
        let cidx = self.consumer_indices(o);
        let mut cond = Vec::new();
        if t.memory == MemoryType::Global {
            cond = self.predicates(o, &cidx, false);
            cond.extend(self.thread_guards(o));
            cond.extend(extra.iter().cloned());
        }
        let st = Stmt::Assign {
            lhs: Expr::elem(format!("T{}", o.id()), self.store_offset(o, &cidx)?),
            rhs: value.cast(t.dtype),
        };
        out.push(if cond.is_empty() {
            st
        } else {
            Stmt::If {
                cond,
                body: vec![st],
            }
        });
        Ok(())
    }

    fn emit_welford_finish(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        let n = tv.id();
        let named = |s: &str| Expr::var(format!("T{n}_{s}"));
        let block = match reduced_tid(&t.domain) {
            1 => Some(Func::BlockWelfordX),
            2 => Some(Func::BlockWelfordY),
            _ => None,
        };
        if let Some(func) = block {
            out.push(Stmt::Call {
                func,
                args: ["avg", "m2", "n", "smem_avg", "smem_m2", "smem_n"]
                    .iter()
                    .map(|s| named(s))
                    .collect(),
            });
        }
        let mut last = Vec::new();
        if grid_dims(&t.domain).next().is_some() {
            last.push(self.emit_grid_welford(tv, out));
        }
        let c = t.dtype.compute_type();
        // As the reference: the variance divides by max(0, n - correction) (NaN or inf
        // when n <= correction) and the mean of no elements is NaN (0 / 0).
        let var = |corr: i64| {
            let count = if corr == 0 {
                named("n")
            } else {
                let over = named("n").bin(BinOp::Gt, Expr::int(corr));
                let less = named("n").bin(BinOp::Sub, Expr::int(corr));
                over.select(less, Expr::int(0)).paren()
            };
            named("m2").bin(BinOp::Div, count.cast(c))
        };
        let nonempty = named("n").bin(BinOp::Ne, Expr::int(0));
        let mean = named("avg").bin(BinOp::Div, nonempty.cast(c));
        let values: Vec<Expr> = match &e.op {
            Op::Var { correction, .. } => vec![var(*correction)],
            Op::VarMean { correction, .. } => vec![var(*correction), mean],
            Op::Welford { .. } => vec![mean, named("m2"), named("n")],
            other => return unsupported(format!("{} is not a Welford reduction", other.name())),
        };
        for (o, v) in e.outputs().into_iter().zip(values) {
            self.store_result(o, v, &last, out)?;
        }
        Ok(())
    }

    pub(super) fn emit_reduction_finish(
        &mut self,
        ei: usize,
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        if is_welford(&self.s.exprs[ei].op) {
            return self.emit_welford_finish(ei, out);
        }
        let tv = self.s.exprs[ei].output;
        let op = self.red_op(ei)?;
        if let Some(n) = self.grouped(tv)? {
            return self.emit_grouped_finish(tv, op, n, out);
        }
        let t = self.t(tv);
        let dt = t.dtype;
        let acc = self.acc(tv)?;
        let tid = reduced_tid(&t.domain);
        if tid != 0 {
            out.push(Stmt::BlockReduce {
                acc: acc.clone(),
                dtype: dt,
                op,
                init: init_value(op, dt),
                smem: format!("T{}_smem", tv.id()),
                over_y: tid == 2,
            });
        }
        let mut last = Vec::new();
        if grid_dims(&t.domain).next().is_some() {
            last.push(self.emit_grid_reduce(tv, op, &acc, tid, out));
        }
        if op == ReductionOp::Mean {
            out.push(Stmt::Assign {
                lhs: acc.clone(),
                rhs: acc
                    .clone()
                    .bin(BinOp::Div, Expr::from(reduced_count(&t.domain)).cast(dt)),
            });
        }
        if t.memory == MemoryType::Global {
            let cidx = self.consumer_indices(tv);
            let mut cond = self.predicates(tv, &cidx, false);
            cond.extend(self.thread_guards(tv));
            cond.extend(last);
            let st = Stmt::Assign {
                lhs: Expr::elem(format!("T{}", tv.id()), self.store_offset(tv, &cidx)?),
                rhs: acc,
            };
            out.push(if cond.is_empty() {
                st
            } else {
                Stmt::If {
                    cond,
                    body: vec![st],
                }
            });
        }
        Ok(())
    }

    /// The number of accumulators of a grouped reduction (`sched::is_grouped`: a
    /// register reduction, not of the Welford family, with iteration loops inside its
    /// reduction loop, its own or another tensor's through `compute_with`): one per
    /// element of its register array (`None` for every other reduction).
    pub(super) fn grouped(&self, tv: ValId) -> SchedResult<Option<i64>> {
        let t = self.t(tv);
        if !is_reduction(&t.domain) || !crate::sched::is_grouped(self.s, tv, t) {
            return Ok(None);
        }
        let (_, exts) = t.alloc_dims(tv)?;
        Ok(Some(exts.iter().product::<i64>().max(1)))
    }

    /// Whether a grouped reduction's result is read by every block (its loops run in
    /// another tensor's: a grid all-reduce with a grid barrier), rather than by the last
    /// block only (a grid reduction).
    fn all_reduced(&self, tv: ValId) -> bool {
        self.t(tv).compute_with.is_some()
    }

    /// `for (k = 0; k < n; ++k) body(k)`, unrolled.
    fn flat_loop(&mut self, n: i64, body: impl Fn(Idx) -> Stmt) -> Stmt {
        let var = format!("i{}", self.next_var);
        self.next_var += 1;
        Stmt::For {
            var: var.clone(),
            extent: Idx::Const(n),
            unroll: true,
            body: vec![body(Idx::var(var))],
        }
    }

    /// The finish of a grouped reduction (see [`Self::grouped`]) after its outermost
    /// reduction loop: each accumulator reduced over the block's reduced thread dim, then
    /// all of them at once over the grid, then a mean's division. The results stay in
    /// the register array for the tensor's readers. Over the grid: in every block when
    /// the loops run in another tensor's (`nvf_grid_allreduce_group`, which synchronizes
    /// the grid: the kernel is launched cooperatively), else in the last block to
    /// arrive (`nvf_grid_reduce_group`; readers' stores are guarded by its flag).
    fn emit_grouped_finish(
        &mut self,
        tv: ValId,
        op: ReductionOp,
        n: i64,
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let t = self.t(tv);
        let dt = t.dtype;
        let name = format!("T{}", tv.id());
        let elem = |k: Idx| Expr::elem(name.clone(), k);
        let tid = reduced_tid(&t.domain);
        if tid != 0 {
            let smem = format!("T{}_smem", tv.id());
            out.push(self.flat_loop(n, |k| Stmt::BlockReduce {
                acc: elem(k),
                dtype: dt,
                op,
                init: init_value(op, dt),
                smem: smem.clone(),
                over_y: tid == 2,
            }));
        }
        if grid_dims(&t.domain).next().is_some() {
            let all = self.all_reduced(tv);
            let what = if all { "all-reduce" } else { "reduction" };
            self.grid_comment(tv, what, &format!("T{}_work", tv.id()), out);
            let id = tv.id();
            let mut args = vec![
                Expr::var(name.clone()),
                Expr::int(n),
                Expr::Functor(op),
                init_value(op, dt),
                Expr::var(format!("T{id}_work")),
                Expr::var(format!("T{id}_sem")),
            ];
            args.extend(self.grid_place(tv, tid));
            let func = if all {
                Func::GridAllreduceGroup
            } else {
                args.push(if tid != 0 {
                    Expr::var(format!("T{id}_smem"))
                } else {
                    Expr::NullPtr(dt)
                });
                Func::GridReduceGroup
            };
            out.push(Stmt::Decl {
                konst: true,
                ty: CType::Data(DataType::Bool),
                name: format!("T{id}_last"),
                init: Expr::call(func, args),
            });
        }
        if op == ReductionOp::Mean {
            let div = Expr::from(reduced_count(&t.domain)).cast(dt);
            out.push(self.flat_loop(n, |k| Stmt::Assign {
                lhs: elem(k.clone()),
                rhs: elem(k).bin(BinOp::Div, div.clone()),
            }));
        }
        Ok(())
    }

    /// Finds, once per kernel, the grid reductions each tensor is computed from, not
    /// counting itself: only the last block of each holds their final values, so a store
    /// of the tensor to global memory is made there only (`grid_flags`, and no
    /// `blockIdx == 0` guard for the block dims they reduce: `thread_guards`).
    pub(super) fn plan_grid_deps(&mut self) {
        let mut deps: HashMap<ValId, Vec<ValId>> = HashMap::new();
        // The grid reduction each grid-reduced output belongs to (named by its first
        // output, as its flag is).
        let mut root: HashMap<ValId, ValId> = HashMap::new();
        for e in &self.s.exprs {
            let mut d: Vec<ValId> = Vec::new();
            for i in &e.inputs {
                match root.get(i) {
                    Some(&r) => d.push(r),
                    None => d.extend(deps.get(i).into_iter().flatten().copied()),
                }
            }
            d.sort();
            d.dedup();
            let grid = self
                .s
                .tensors
                .get(&e.output)
                .is_some_and(|t| grid_dims(&t.domain).next().is_some());
            for o in e.outputs() {
                if grid {
                    root.insert(o, e.output);
                }
                deps.insert(o, d.clone());
            }
        }
        self.grid_deps = deps;
    }

    /// The grid reductions `tv` is computed from (see `plan_grid_deps`).
    pub(super) fn grid_sources(&self, tv: ValId) -> &[ValId] {
        self.grid_deps.get(&tv).map_or(&[], Vec::as_slice)
    }

    /// The flags (`T5_last`) of [`grid_sources`](Self::grid_sources).
    pub(super) fn grid_flags(&self, tv: ValId) -> Vec<Expr> {
        self.grid_sources(tv)
            .iter()
            .map(|r| Expr::var(format!("T{}_last", r.id())))
            .collect()
    }

    /// Checks a grid reduction and adds its work buffers to the ABI.
    pub(super) fn plan_grid_reduction(&mut self, ei: usize) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        let welford = is_welford(&e.op);
        // A register result is read by per-column math in the same kernel: every block
        // computes it, and only the last block's stores land (`grid_flags`).
        let d = &t.domain;
        let reduced = |p: ParallelType| red_parallel(d, p);
        let mut partials = Extent::Const(1);
        let mut segments = Extent::Const(1);
        let mut slots = Extent::Const(1);
        for (&p, x) in &self.bound {
            if p.is_bid() {
                partials = partials * x.clone();
                if !reduced(p) {
                    segments = segments * x.clone();
                }
            } else if !reduced(p) {
                partials = partials * x.clone();
                slots = slots * x.clone();
            }
        }
        if let Some(n) = self.grouped(tv)? {
            if self.all_reduced(tv) {
                // One row of partials per block and one of results per segment (see
                // `nvf_grid_allreduce_group`), `n` values per slot.
                partials = (partials + segments.clone() * slots) * Extent::Const(n);
                self.grid_sync = true;
            } else {
                // `n` partials per slot of each block (`nvf_grid_reduce_group`).
                partials = partials * Extent::Const(n);
            }
        }
        let buffers: Vec<(String, DataType)> = if welford {
            vec![
                (format!("T{}_work_avg", tv.id()), t.dtype),
                (format!("T{}_work_m2", tv.id()), t.dtype),
                (format!("T{}_work_n", tv.id()), DataType::I64),
            ]
        } else {
            vec![(format!("T{}_work", tv.id()), t.dtype)]
        };
        for (name, dt) in buffers {
            self.work.push(Param {
                name,
                kind: ParamKind::WorkBuffer {
                    tensor: tv,
                    kind: WorkKind::Partials(dt),
                    elements: partials.clone(),
                },
            });
        }
        self.work.push(Param {
            name: format!("T{}_sem", tv.id()),
            kind: ParamKind::WorkBuffer {
                tensor: tv,
                kind: WorkKind::Semaphore,
                elements: segments,
            },
        });
        Ok(())
    }

    /// The arguments that place a grid reduction of `tv`: `(segment, blocks, rank, slot,
    /// slots, reduced thread dim)`, as `nvf_grid_reduce` and `nvf_grid_welford` take them
    /// (the thread dim as `reduced_tid` codes it: 0 none, 1 x, 2 y).
    fn grid_place(&self, tv: ValId, tid: i64) -> Vec<Expr> {
        let d = &self.t(tv).domain;
        let lin = |pts: &[ParallelType], want_reduced: bool, size: bool| -> Idx {
            let mut v = Idx::Const(if size { 1 } else { 0 });
            for &p in pts {
                if !self.bound.contains_key(&p) || red_parallel(d, p) != want_reduced {
                    continue;
                }
                let name = p.cuda_index().unwrap_or("0");
                let dim = if p.is_bid() {
                    name.replace("blockIdx", "gridDim")
                } else {
                    name.replace("threadIdx", "blockDim")
                };
                v = if size {
                    v.mul(Idx::var(dim))
                } else {
                    v.mul(Idx::var(dim)).add(Idx::var(name))
                };
            }
            v
        };
        use ParallelType::*;
        let bids = [BIDz, BIDy, BIDx];
        let tids = [TIDz, TIDy, TIDx];
        vec![
            lin(&bids, false, false).into(),
            lin(&bids, true, true).into(),
            lin(&bids, true, false).into(),
            lin(&tids, false, false).into(),
            lin(&tids, false, true).into(),
            Expr::int(tid),
        ]
    }

    /// A comment naming the block indices a grid reduction of `tv` reduces over and
    /// where its partials go.
    fn grid_comment(&self, tv: ValId, what: &str, work: &str, out: &mut Vec<Stmt>) {
        use ParallelType::*;
        let d = &self.t(tv).domain;
        let reduced: Vec<String> = [BIDz, BIDy, BIDx]
            .iter()
            .filter(|&&p| red_parallel(d, p))
            .map(|p| p.to_string())
            .collect();
        let id = tv.id();
        let finish = if what == "all-reduce" {
            format!("the blocks wait for each other (T{id}_sem), each combines a share of the columns, they wait again and every block reads the results")
        } else {
            format!("counts itself in T{id}_sem; the last block to arrive combines the partials")
        };
        let and = if what == "all-reduce" { ";" } else { " and" };
        out.push(Stmt::Comment(format!(
            "grid {what} of T{id} over {}: each block stores its partial in {work}{and} {finish}",
            reduced.join(", "),
        )));
    }

    /// Emits the grid reduction of `acc`; returns the name of the flag that is true in
    /// the one block that holds the final value.
    fn emit_grid_reduce(
        &self,
        tv: ValId,
        op: ReductionOp,
        acc: &Expr,
        tid: i64,
        out: &mut Vec<Stmt>,
    ) -> Expr {
        let dt = self.t(tv).dtype;
        self.grid_comment(tv, "reduction", &format!("T{}_work", tv.id()), out);
        let flag = format!("T{}_last", tv.id());
        let n = tv.id();
        let smem = if tid != 0 {
            Expr::var(format!("T{n}_smem"))
        } else {
            Expr::NullPtr(dt)
        };
        let mut args = vec![
            acc.clone(),
            Expr::Functor(op),
            init_value(op, dt),
            Expr::var(format!("T{n}_work")),
            Expr::var(format!("T{n}_sem")),
        ];
        args.extend(self.grid_place(tv, tid));
        args.push(smem);
        out.push(Stmt::Decl {
            konst: true,
            ty: CType::Data(DataType::Bool),
            name: flag.clone(),
            init: Expr::call(Func::GridReduce, args),
        });
        Expr::var(flag)
    }

    /// Emits the grid Welford of `tv`'s running triple (after its block Welford, if
    /// any); returns the flag that is true in the one block holding the final triple.
    fn emit_grid_welford(&self, tv: ValId, out: &mut Vec<Stmt>) -> Expr {
        let t = self.t(tv);
        let n = tv.id();
        let named = |s: &str| Expr::var(format!("T{n}_{s}"));
        let tid = reduced_tid(&t.domain);
        self.grid_comment(tv, "Welford", &format!("T{n}_work_avg/m2/n"), out);
        let mut args: Vec<Expr> = ["avg", "m2", "n", "work_avg", "work_m2", "work_n", "sem"]
            .iter()
            .map(|s| named(s))
            .collect();
        args.extend(self.grid_place(tv, tid));
        if tid != 0 {
            args.extend(["smem_avg", "smem_m2", "smem_n"].iter().map(|s| named(s)));
        } else {
            args.extend([
                Expr::NullPtr(t.dtype),
                Expr::NullPtr(t.dtype),
                Expr::NullPtr(DataType::I64),
            ]);
        }
        let flag = format!("T{n}_last");
        out.push(Stmt::Decl {
            konst: true,
            ty: CType::Data(DataType::Bool),
            name: flag.clone(),
            init: Expr::call(Func::GridWelford, args),
        });
        Expr::var(flag)
    }
}

/// True for the Welford family (`var`, `var_mean`, `welford`).
pub(super) fn is_welford(op: &Op) -> bool {
    matches!(op, Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. })
}

/// True when a reduction loop dim of `d` is bound to `p`.
/// The thread dim a reduction of `d` is block-reduced over: 1 for `threadIdx.x`, 2 for
/// `threadIdx.y`, 0 for none (the code the grid reduction helpers take).
pub(super) fn reduced_tid(d: &TensorDomain) -> i64 {
    if red_parallel(d, ParallelType::TIDx) {
        1
    } else if red_parallel(d, ParallelType::TIDy) {
        2
    } else {
        0
    }
}

pub(super) fn red_parallel(d: &TensorDomain, p: ParallelType) -> bool {
    d.loop_dims.iter().any(|&l| {
        let x = d.dom(l);
        x.kind == IterKind::Reduction && x.parallel == p
    })
}

/// The block indices a reduction of `d` runs over (a grid reduction).
pub(super) fn grid_dims(d: &TensorDomain) -> impl Iterator<Item = ParallelType> + '_ {
    d.loop_dims
        .iter()
        .map(|&l| d.dom(l))
        .filter(|x| x.kind == IterKind::Reduction && x.parallel.is_bid())
        .map(|x| x.parallel)
}

/// The number of elements a reduction of `d` combines (a mean's divisor).
fn reduced_count(d: &TensorDomain) -> Idx {
    let mut n = Idx::Const(1);
    for &r in &d.root {
        if d.dom(r).kind == IterKind::Reduction {
            n = n.mul(ext(&d.dom(r).extent));
        }
    }
    n
}

pub(super) fn is_reduction(d: &TensorDomain) -> bool {
    d.root.iter().any(|&r| d.dom(r).kind == IterKind::Reduction)
}

pub(super) fn init_value(op: ReductionOp, dt: DataType) -> Expr {
    let v = match op {
        ReductionOp::Sum | ReductionOp::Mean => ScalarValue::Int(0),
        ReductionOp::Prod => ScalarValue::Int(1),
        ReductionOp::Max => match dt {
            DataType::Bool => ScalarValue::Bool(false),
            DataType::I32 => ScalarValue::Int(i32::MIN as i64),
            DataType::I64 => ScalarValue::Int(i64::MIN),
            _ => ScalarValue::Float(f64::NEG_INFINITY),
        },
        ReductionOp::Min => match dt {
            DataType::Bool => ScalarValue::Bool(true),
            DataType::I32 => ScalarValue::Int(i32::MAX as i64),
            DataType::I64 => ScalarValue::Int(i64::MAX),
            _ => ScalarValue::Float(f64::INFINITY),
        },
    };
    // The init is passed next to the accumulator to the templated block/grid reduce
    // helpers (`T init`): cast it to the accumulator's own C++ type so that template
    // deduction sees one type for every dtype.
    Expr::Lit(v, dt.compute_type()).cast(dt)
}
