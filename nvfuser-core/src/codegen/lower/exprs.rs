//! Expressions: the value an expression computes at the current indices, its operands
//! converted to the math's type, and the statement that stores it (an assignment or a
//! vectorized copy, under its predicates).
//!
//! A value is computed *at* its loop nest (the indices of its output's domain) or at
//! given logical indices of its output: a tensor recomputed inside the resize op that
//! reads it (`sched::recompute`), whose operands are read at the indices the op maps
//! those to.

use std::ops::{Add, Mul};

use super::indexing::shape_doms;
use super::reductions::is_reduction;
use super::{logical_ext, scalar_name, unsupported, At, Lower};
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, CType, Expr, Func, Requirement, Stmt};
use crate::dtype::{promote, DataType, Operand};
use crate::ir::{BinaryRule, Distribution, IterKind, Op, TernaryOp, UnaryRule, ValId};
use crate::sched::{is_resize, MemoryType, ParallelType, SExpr, SchedResult};

impl Lower<'_> {
    pub(super) fn operand(&self, e: &SExpr, v: ValId, to: DataType, at: At) -> SchedResult<Expr> {
        let val = self.sf.fusion().get_val(v);
        let (x, from) = if self.is_tensor(v) {
            let x = match at {
                At::Loop(cidx) => self.read(e, v, cidx)?,
                At::Index(idx) => {
                    let vidx = self.operand_indices(e, v, idx);
                    self.read_at(e, v, &vidx)?
                }
            };
            (x, self.val_dtype_any(v))
        } else {
            match val {
                Some(x) => match x.constant() {
                    Some(c) => return Ok(Expr::Lit(c, to)),
                    None => (Expr::var(scalar_name(v.id())), x.dtype),
                },
                None => return unsupported(format!("unknown value {v}")),
            }
        };
        Ok(if from == to { x } else { x.cast(to) })
    }

    /// The indices of tensor operand `v` of `e` (not a resize op) read for the element of
    /// `e`'s output at `idx`: broadcast dims dropped, squeezed dims at 0, permuted dims
    /// moved; an operand's own broadcast dims read element 0.
    fn operand_indices(&self, e: &SExpr, v: ValId, idx: &[Idx]) -> Vec<Idx> {
        let rank = self.shape_kinds(v).len();
        let mapped: Vec<Idx> = match &e.op {
            Op::Broadcast { mask } => idx
                .iter()
                .zip(mask)
                .filter(|(_, m)| !**m)
                .map(|(i, _)| i.clone())
                .collect(),
            Op::Squeeze { axes } => {
                let mut it = idx.iter();
                (0..rank)
                    .map(|j| {
                        if axes.contains(&j) {
                            Idx::Const(0)
                        } else {
                            it.next().cloned().unwrap_or(Idx::Const(0))
                        }
                    })
                    .collect()
            }
            Op::Permute { perm } => {
                let mut m = vec![Idx::Const(0); rank];
                for (j, &pj) in perm.iter().enumerate() {
                    if let (Some(slot), Some(i)) = (m.get_mut(pj), idx.get(j)) {
                        *slot = i.clone();
                    }
                }
                m
            }
            _ => idx.to_vec(),
        };
        self.broadcast_at_zero(v, mapped)
    }

    /// `idx` (indices of `v`'s shape dims) with every broadcast dim of `v` at 0.
    fn broadcast_at_zero(&self, v: ValId, idx: Vec<Idx>) -> Vec<Idx> {
        idx.into_iter()
            .zip(self.shape_kinds(v))
            .map(|(i, k)| {
                if k == crate::ir::IterKind::Broadcast {
                    Idx::Const(0)
                } else {
                    i
                }
            })
            .collect()
    }

    /// The value of recomputed tensor `p` (see `sched::recompute`) at `idx` of its shape
    /// dims, rounded to its dtype as a stored tensor would be.
    pub(super) fn recompute(&self, r: &SExpr, idx: &[Idx]) -> SchedResult<Expr> {
        let idx = self.broadcast_at_zero(r.output, idx.to_vec());
        let v = self.value(r, At::Index(&idx))?;
        Ok(v.cast(self.val_dtype_any(r.output)).paren())
    }

    /// `v` as an operand of math whose type is `sem`, in `sem`'s computation type: a
    /// tensor of another type converts as a cast to `sem` would first (an `i32` meeting
    /// `f16` math rounds to `f16`), a scalar does not (PyTorch keeps scalars in its
    /// `f32` opmath type); see the evaluator's spec.
    fn operand_in(&self, e: &SExpr, v: ValId, sem: DataType, at: At) -> SchedResult<Expr> {
        let to = sem.compute_type();
        let half = matches!(sem, DataType::F16 | DataType::BF16);
        let from = self.val_dtype_any(v);
        if half && self.is_tensor(v) && from != sem && from != DataType::Bool {
            let inner = self.operand(e, v, from, at)?;
            return Ok(inner.cast(sem).cast(to));
        }
        self.operand(e, v, to, at)
    }

    fn value(&self, e: &SExpr, at: At) -> SchedResult<Expr> {
        let out_dt = self.val_dtype_any(e.output);
        let ins = &e.inputs;
        let promoted = |ids: &[ValId]| -> DataType {
            let ops: Vec<Operand> = ids
                .iter()
                .map(|&v| Operand {
                    dtype: self.val_dtype_any(v),
                    is_scalar: !self.is_tensor(v),
                })
                .collect();
            promote(&ops).unwrap_or(out_dt)
        };
        Ok(match &e.op {
            // Float to integer: the explicit rule for NaN and out-of-range values.
            Op::Cast
                if !out_dt.is_float()
                    && out_dt != DataType::Bool
                    && self.val_dtype_any(ins[0]).is_float() =>
            {
                let pd = self.val_dtype_any(ins[0]);
                let wide = pd == DataType::F64;
                let x = self.operand(
                    e,
                    ins[0],
                    if wide { DataType::F64 } else { DataType::F32 },
                    at,
                )?;
                let f = match (out_dt, wide) {
                    (DataType::I32, false) => Func::F2I32F32,
                    (DataType::I32, true) => Func::F2I32F64,
                    _ => Func::F2I64,
                };
                Expr::call(f, vec![x])
            }
            Op::Set
            | Op::SegmentSet
            | Op::Cast
            | Op::Broadcast { .. }
            | Op::Expand { .. }
            | Op::Permute { .. }
            | Op::Squeeze { .. } => {
                let p = ins[0];
                let pd = self.val_dtype_any(p);
                self.operand(e, p, pd, at)?
            }
            Op::Unary(u) => {
                let inp = self.val_dtype_any(ins[0]);
                let sem = match u.rule() {
                    UnaryRule::FloatMath | UnaryRule::FloatOnly => out_dt,
                    _ => inp,
                };
                Expr::call(Func::Unary(*u), vec![self.operand_in(e, ins[0], sem, at)?])
            }
            Op::Binary(b) => {
                let sem = match b.rule() {
                    BinaryRule::FloatMath => out_dt,
                    _ => promoted(&ins[..2]),
                };
                let (x, y) = (
                    self.operand_in(e, ins[0], sem, at)?,
                    self.operand_in(e, ins[1], sem, at)?,
                );
                match (self.int_division(e), self.check_code(e), BinOp::of(*b)) {
                    (Some(helper), Some(code), _) => {
                        Expr::call(helper, vec![Expr::var("nvf_err"), code, x, y])
                    }
                    (_, _, Some(op)) => x.bin(op, y),
                    _ => Expr::call(Func::Binary(*b), vec![x, y]),
                }
            }
            Op::Ternary(t) => self.ternary_value(e, *t, at)?,
            op if is_resize(op) => self.resize_value(e, at)?,
            Op::Full { .. } => self.operand(e, ins[0], out_dt.compute_type(), at)?,
            Op::Iota { .. } => {
                // The iota runs along its one dim that is not a broadcast (a broadcast
                // of an iota folded into it has others: `fold_creation_broadcasts`).
                let c = out_dt.compute_type();
                let i = match at {
                    At::Loop(cidx) => {
                        let d = &self.t(e.output).domain;
                        let r = d
                            .root
                            .iter()
                            .find(|&&r| d.dom(r).kind != IterKind::Broadcast)
                            .or(d.root.first());
                        r.and_then(|r| cidx.get(r).cloned())
                            .unwrap_or(Idx::Const(0))
                    }
                    At::Index(idx) => {
                        let along = self
                            .sf
                            .fusion()
                            .tensor_type(e.output)
                            .and_then(|t| t.shape().position(|d| d.kind != IterKind::Broadcast))
                            .unwrap_or(0);
                        idx.get(along).cloned().unwrap_or(Idx::Const(0))
                    }
                };
                let step = Expr::from(i)
                    .cast(c)
                    .bin(BinOp::Mul, self.operand(e, ins[1], c, at)?);
                self.operand(e, ins[0], c, at)?.bin(BinOp::Add, step)
            }
            Op::Rand { dist, .. } => self.rand_value(e, *dist, at)?,
            other => {
                return unsupported(format!(
                    "lowering of {} is not implemented yet",
                    other.name()
                ))
            }
        })
    }

    /// `where`, `lerp`, `clamp`, `threshold` and `addcmul`.
    fn ternary_value(&self, e: &SExpr, t: TernaryOp, at: At) -> SchedResult<Expr> {
        let out_dt = self.val_dtype_any(e.output);
        let ins = &e.inputs;
        Ok(match t {
            TernaryOp::Where => {
                let cond = self.operand(e, ins[0], DataType::Bool, at)?;
                cond.select(
                    self.operand_in(e, ins[1], out_dt, at)?,
                    self.operand_in(e, ins[2], out_dt, at)?,
                )
            }
            _ => {
                let a: Vec<Expr> = ins
                    .iter()
                    .map(|&v| self.operand_in(e, v, out_dt, at))
                    .collect::<SchedResult<_>>()?;
                let arg = |k: usize| a[k].clone();
                match t {
                    // a + w * (b - a)
                    TernaryOp::Lerp => arg(0).bin(
                        BinOp::Add,
                        arg(2).bin(BinOp::Mul, arg(1).bin(BinOp::Sub, arg(0))),
                    ),
                    TernaryOp::Clamp => Expr::call(Func::Clamp, a),
                    TernaryOp::Threshold => arg(0).bin(BinOp::Gt, arg(1)).select(arg(0), arg(2)),
                    // x + value * t1 * t2
                    TernaryOp::Addcmul => arg(0).bin(
                        BinOp::Add,
                        arg(3).bin(BinOp::Mul, arg(1)).bin(BinOp::Mul, arg(2)),
                    ),
                    TernaryOp::Where => unreachable!("handled above"),
                }
            }
        })
    }

    /// `rand` / `randn`: a counter-based generator keyed by seed, offset and the
    /// element's linear index.
    fn rand_value(&self, e: &SExpr, dist: Distribution, at: At) -> SchedResult<Expr> {
        let out_dt = self.val_dtype_any(e.output);
        let ins = &e.inputs;
        let mut lin = Idx::Const(0);
        match at {
            At::Loop(cidx) => {
                let d = &self.t(e.output).domain;
                for &r in &shape_doms(d) {
                    let x = cidx.get(&r).cloned().unwrap_or(Idx::Const(0));
                    lin = lin.mul(logical_ext(d.dom(r))).add(x);
                }
            }
            At::Index(idx) => {
                for (x, n) in idx.iter().zip(self.shape_extents(e.output)) {
                    lin = lin.mul(super::ext(&n)).add(x.clone());
                }
            }
        }
        let seed = self.operand(e, ins[2], DataType::I64, at)?;
        let off = self.operand(e, ins[3], DataType::I64, at)?;
        let wide = out_dt == DataType::F64;
        let (f, pt) = match (dist, wide) {
            (Distribution::Uniform, false) => (Func::Uniform(out_dt), DataType::F32),
            (Distribution::Uniform, true) => (Func::UniformF64, DataType::F64),
            (Distribution::Normal, false) => (Func::NormalF32, DataType::F64),
            (Distribution::Normal, true) => (Func::NormalF64, DataType::F64),
        };
        Ok(Expr::call(
            f,
            vec![
                seed.cast(CType::U64),
                off.cast(CType::U64),
                Expr::from(lin).cast(CType::U64),
                self.operand(e, ins[0], pt, at)?,
                self.operand(e, ins[1], pt, at)?,
            ],
        ))
    }

    /// Adds a launch requirement, once (two slices of one input need its alignment once).
    fn require(&mut self, r: Requirement) {
        if !self.requirements.contains(&r) {
            self.requirements.push(r);
        }
    }

    pub(super) fn emit_expr(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        if is_reduction(&t.domain) {
            self.emit_reduction_init(ei, out)?;
            self.emit_accumulate(ei, out)?;
            return self.emit_reduction_finish(ei, out);
        }
        let cidx = self.consumer_indices(tv);
        // Register math on register operands needs no bounds predicate: an element
        // outside the tensor is computed from values that are never read back (every
        // load into registers, every store and every reduction stays predicated), and
        // skipping the condition keeps index arithmetic out of the math loop. Checked
        // expressions (integer division) stay predicated: an element outside the tensor
        // must not report an error.
        let register_only = t.memory == MemoryType::Local
            && !self.check_site.contains_key(&tv)
            && !matches!(
                e.op,
                Op::Reshape { .. }
                    | Op::Permute { .. }
                    | Op::Slice { .. }
                    | Op::Pad { .. }
                    | Op::Cat { .. }
                    | Op::IndexSelect { .. }
                    | Op::Select { .. }
                    | Op::Gather { .. }
                    | Op::TakeAlongAxis { .. }
                    | Op::Scatter { .. }
            )
            && e.inputs.iter().all(|&i| match self.s.tensors.get(&i) {
                Some(it) => it.memory == MemoryType::Local,
                // A recomputed operand reads global memory at this element's position.
                None => self.s.recomputed(i).is_none(),
            });
        let mut cond = if register_only {
            Vec::new()
        } else {
            self.predicates(tv, &cidx, false)
        };
        if t.memory == MemoryType::Global {
            cond.extend(self.thread_guards(tv));
            cond.extend(self.grid_flags(tv));
        }
        let lhs = Expr::elem(format!("T{}", tv.id()), self.store_offset(tv, &cidx)?);
        let vec = t
            .domain
            .loop_dims
            .last()
            .map(|&l| t.domain.dom(l))
            .filter(|d| d.parallel == ParallelType::Vectorize);
        if let Op::Scatter { axis, add } = e.op {
            if vec.is_some() {
                return unsupported(format!("a vectorized scatter (T{})", tv.id()));
            }
            let body = self.scatter_stmts(e, axis, add, &cidx, lhs)?;
            // The block scopes the search's declarations.
            let cond = if cond.is_empty() {
                vec![Expr::int(1).cast(DataType::Bool)]
            } else {
                cond
            };
            out.push(Stmt::If { cond, body });
            return Ok(());
        }
        let stmt = if let Some(vd) = vec {
            let width = vd.extent.as_const().unwrap_or(1);
            let p = e.inputs[0];
            // A slice reads its input at its own offsets (a contiguous run: validation);
            // a cat reads the piece its vector lies in (one piece: validation).
            let (src, globals) = match &e.op {
                Op::Slice { .. } => (
                    self.resize_value(e, At::Loop(&cidx))?.addr_of(),
                    vec![p, tv],
                ),
                Op::Cat { axis } => {
                    let sources = e
                        .inputs
                        .iter()
                        .map(|&i| self.s.recomputed(i).map_or(i, |r| r.inputs[0]));
                    let globals = sources.chain(std::iter::once(tv)).collect();
                    (self.cat_address(e, *axis, &cidx)?, globals)
                }
                Op::IndexSelect { axis } => {
                    // A bad index reads nothing: the vector is copied only when the
                    // check (which reports the index) passes.
                    let (check, addr) = self.index_select_address(e, *axis, &cidx)?;
                    cond.push(check);
                    (addr, vec![p, tv])
                }
                _ => (self.read(e, p, &cidx)?.addr_of(), vec![p, tv]),
            };
            for g in globals {
                let gt = self.t(g);
                if gt.memory != MemoryType::Global {
                    continue;
                }
                if let Some(&last) = shape_doms(&gt.domain).last() {
                    let x = gt.domain.dom(last).extent.clone();
                    if x.as_const().is_none() {
                        self.require(Requirement::Divisible {
                            extent: x,
                            by: width,
                            why: format!("vectorized access of T{} by {width}", g.id()),
                        });
                    }
                }
                self.require(Requirement::Aligned {
                    tensor: g,
                    bytes: width as usize * gt.dtype.size_bytes(),
                });
            }
            Stmt::VecCopy {
                dtype: t.dtype,
                width,
                dst: lhs.addr_of(),
                src,
            }
        } else {
            let rhs = self.value(e, At::Loop(&cidx))?;
            Stmt::Assign {
                lhs,
                rhs: rhs.cast(t.dtype),
            }
        };
        out.push(if cond.is_empty() {
            stmt
        } else {
            Stmt::If {
                cond,
                body: vec![stmt],
            }
        });
        Ok(())
    }
}
