//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`): a running value along the loops of
//! the scanned dim.
//!
//! The loops a split of the scanned dim makes must keep its element order (outer split
//! parts first, nothing between them) and be serial, except at most one bound to
//! `threadIdx.x`:
//! - **serial scan** (no thread dim): the running value `T#_acc` is declared before the
//!   outermost scan loop; every element combines into it and stores it. A consumer may
//!   share every loop, since each element is final when it is stored.
//! - **block scan** (`[tiles?, threadIdx.x, chunk..]`): each thread runs the scan over
//!   its chunk (the loops inside the thread dim) into a register array, then
//!   `nvf_block_scan_x` gives it the combination of the chunks of the threads before it
//!   and of the whole tile; a second loop over the chunk combines that prefix (and the
//!   carry of the earlier tiles, `T#_carry`, declared before the tile loop) into each
//!   element. Consumers read the scan after that, outside the thread dim's loops: the
//!   scan is computed at a position before its thread dim (checked here).
//!
//! Elements past the end (a tile or chunk the extent does not fill) combine nothing.

use super::reductions::init_value;
use super::{ext, unsupported, At, Key, Lower};
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, Expr, Func, Stmt};
use crate::ir::{Op, ReductionOp, ValId};
use crate::sched::{MemoryType, ParallelType, SchedResult};

/// Where a scan's running values live, found once per kernel.
#[derive(Clone, Debug)]
pub(super) struct ScanLoops {
    /// The serial loop outside the thread dim whose iterations carry the running value
    /// (block scans with more than one tile).
    pub(super) carry: Option<Key>,
    /// The outermost loop the per-thread running value is declared before: the
    /// outermost scan loop (serial scans) or the outermost one inside the thread dim.
    pub(super) acc: Option<Key>,
    /// A block scan over `threadIdx.x`.
    pub(super) block: bool,
    /// The loops inside the thread dim, outermost first (the second pass mirrors them).
    pub(super) inner: Vec<Key>,
}

impl Lower<'_> {
    fn scan_op(&self, ei: usize) -> SchedResult<(ReductionOp, usize)> {
        match &self.s.exprs[ei].op {
            Op::Scan { op, axis } => Ok((op.reduction(), *axis)),
            other => unsupported(format!("{} is not a scan", other.name())),
        }
    }

    /// Checks the loops of the scan `ei` and finds where its values live.
    pub(super) fn plan_scan(&self, ei: usize) -> SchedResult<ScanLoops> {
        let tv = self.s.exprs[ei].output;
        let (_, axis) = self.scan_op(ei)?;
        let t = self.t(tv);
        let d = &t.domain;
        let Some(&root) = d.logical.get(axis) else {
            return unsupported(format!("T{}: scan axis {axis} out of range", tv.id()));
        };
        if d.dom(root).kind == crate::ir::IterKind::Broadcast {
            // A scan of one element: the element itself, whatever its loops.
            return Ok(ScanLoops {
                carry: None,
                acc: None,
                block: false,
                inner: Vec::new(),
            });
        }
        let Some(leaves) = d.split_leaves(root) else {
            return unsupported(format!(
                "T{}: the scanned dim is merged with another dim; a scan keeps it apart",
                tv.id()
            ));
        };
        let mut pos = Vec::with_capacity(leaves.len());
        for l in &leaves {
            match d.loop_dims.iter().position(|x| x == l) {
                Some(p) => pos.push(p),
                None => return unsupported(format!("T{}: a scan loop is missing", tv.id())),
            }
        }
        if pos.windows(2).any(|w| w[1] != w[0] + 1) {
            return unsupported(format!(
                "T{}: the loops of the scanned dim must be adjacent, outer parts first (loops {pos:?})",
                tv.id()
            ));
        }
        let mut tidx = None;
        for &p in &pos {
            match d.loop_dom(p).parallel {
                ParallelType::Serial | ParallelType::Unroll => {}
                ParallelType::TIDx if tidx.is_none() => tidx = Some(p),
                other => {
                    return unsupported(format!(
                    "T{}: a scan loop bound to {other:?} (scans run serially or over threadIdx.x)",
                    tv.id()
                ))
                }
            }
        }
        let loops = |ps: &[usize]| -> Vec<Key> {
            ps.iter()
                .map(|&p| self.key(tv, p))
                .filter(|&k| self.makes_loop(k))
                .collect()
        };
        let Some(tp) = tidx else {
            return Ok(ScanLoops {
                carry: None,
                acc: loops(&pos).first().copied(),
                block: false,
                inner: Vec::new(),
            });
        };
        let ca = t.compute_at.map_or(0, |c| c.pos);
        if ca > tp {
            return unsupported(format!(
                "T{}: a block scan is final only after its thread dim (loop {tp}); it is computed at position {ca}",
                tv.id()
            ));
        }
        if t.memory != MemoryType::Local {
            return unsupported(format!(
                "T{}: a block scan runs in registers (cache its output)",
                tv.id()
            ));
        }
        let outer: Vec<usize> = pos.iter().copied().filter(|&p| p < tp).collect();
        let inside: Vec<usize> = pos.iter().copied().filter(|&p| p > tp).collect();
        let inner = loops(&inside);
        Ok(ScanLoops {
            carry: loops(&outer).first().copied(),
            acc: inner.first().copied(),
            block: true,
            inner,
        })
    }

    /// Plans the scan `ei`: its loops, where its running values are declared, and the
    /// shared slots of a block scan.
    pub(super) fn plan_scan_allocs(&mut self, ei: usize) -> SchedResult<()> {
        let plan = self.plan_scan(ei)?;
        let tv = self.s.exprs[ei].output;
        if let Some(k) = plan.carry {
            self.scan_at.entry(k).or_default().push((ei, true));
        }
        if let Some(k) = plan.acc {
            self.scan_at.entry(k).or_default().push((ei, false));
        }
        if plan.block {
            self.shared
                .push((format!("T{}_smem", tv.id()), self.t(tv).dtype, 32));
            let x = self.bound[&ParallelType::TIDx].clone();
            if x.as_const().is_none_or(|c| c % 32 != 0) {
                return unsupported(format!(
                    "T{}: a block scan needs a constant multiple of 32 threads on threadIdx.x, found {x}",
                    tv.id()
                ));
            }
        }
        self.scans.insert(ei, plan);
        Ok(())
    }

    fn scan_names(tv: ValId) -> [String; 3] {
        let n = tv.id();
        [
            format!("T{n}_acc"),
            format!("T{n}_carry"),
            format!("T{n}_smem"),
        ]
    }

    /// The declaration of the running value (`carry` for the tile carry).
    pub(super) fn emit_scan_init(
        &self,
        ei: usize,
        carry: bool,
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let (op, _) = self.scan_op(ei)?;
        let dt = self.t(tv).dtype;
        let [acc, car, _] = Self::scan_names(tv);
        out.push(Stmt::Decl {
            konst: false,
            ty: dt.into(),
            name: if carry { car } else { acc },
            init: scan_init(op, dt),
        });
        Ok(())
    }

    /// One element: combined into the running value (in bounds only) and stored.
    pub(super) fn emit_scan_step(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let plan = self.scans[&ei].clone();
        if plan.acc.is_none() {
            self.emit_scan_init(ei, false, out)?;
        }
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let (op, _) = self.scan_op(ei)?;
        let t = self.t(tv);
        let dt = t.dtype;
        let cidx = self.consumer_indices(tv);
        let cond = self.predicates(tv, &cidx, false);
        let x = self.operand(e, e.inputs[0], dt, At::Loop(&cidx))?;
        let [acc, _, _] = Self::scan_names(tv);
        let step = Stmt::Assign {
            lhs: Expr::var(acc.clone()),
            rhs: combine(op, Expr::var(acc.clone()), x).cast(dt),
        };
        out.push(if cond.is_empty() {
            step
        } else {
            Stmt::If {
                cond: cond.clone(),
                body: vec![step],
            }
        });
        let store = Stmt::Assign {
            lhs: Expr::elem(format!("T{}", tv.id()), self.store_offset(tv, &cidx)?),
            rhs: Expr::var(acc),
        };
        let mut guard = Vec::new();
        if t.memory == MemoryType::Global {
            guard = cond;
            guard.extend(self.thread_guards(tv));
        }
        out.push(if guard.is_empty() {
            store
        } else {
            Stmt::If {
                cond: guard,
                body: vec![store],
            }
        });
        if plan.block && plan.acc.is_none() {
            self.emit_scan_finish(ei, out)?;
        }
        Ok(())
    }

    /// A block scan's second part, after the chunk loops: the prefix of the threads
    /// before (and the carry of earlier tiles) combined into every element of the chunk.
    pub(super) fn emit_scan_finish(&mut self, ei: usize, out: &mut Vec<Stmt>) -> SchedResult<()> {
        let plan = self.scans[&ei].clone();
        let tv = self.s.exprs[ei].output;
        let (op, _) = self.scan_op(ei)?;
        let dt = self.t(tv).dtype;
        let [acc, car, smem] = Self::scan_names(tv);
        let n = tv.id();
        let (total, base) = (format!("T{n}_total"), format!("T{n}_base"));
        out.push(Stmt::Decl {
            konst: false,
            ty: dt.into(),
            name: total.clone(),
            init: scan_init(op, dt),
        });
        let before = Expr::call(
            Func::BlockScanX,
            vec![
                Expr::var(acc),
                Expr::Functor(op),
                scan_init(op, dt),
                Expr::var(smem),
                Expr::var(total.clone()),
            ],
        );
        let before = match plan.carry {
            Some(_) => combine(op, Expr::var(car.clone()), before).cast(dt),
            None => before,
        };
        out.push(Stmt::Decl {
            konst: true,
            ty: dt.into(),
            name: base.clone(),
            init: before,
        });
        // The chunk again, each element combined with the prefix.
        let mut vars = Vec::new();
        for &k in &plan.inner {
            let v = format!("i{}", self.next_var);
            self.next_var += 1;
            self.env.insert(k, Idx::var(v.clone()));
            vars.push((k, v));
        }
        let cidx = self.consumer_indices(tv);
        let elem = Expr::elem(format!("T{n}"), self.store_offset(tv, &cidx)?);
        let mut body = vec![Stmt::Assign {
            lhs: elem.clone(),
            rhs: combine(op, Expr::var(base), elem).cast(dt),
        }];
        for (k, v) in vars.into_iter().rev() {
            self.env.remove(&k);
            let d = self.key_dom(k);
            body = vec![Stmt::For {
                var: v,
                extent: ext(&d.extent),
                unroll: d.parallel == ParallelType::Unroll,
                body,
            }];
        }
        out.extend(body);
        if plan.carry.is_some() {
            out.push(Stmt::Assign {
                lhs: Expr::var(car.clone()),
                rhs: combine(op, Expr::var(car), Expr::var(total)).cast(dt),
            });
        }
        Ok(())
    }
}

/// `a op b`, the combine of a scan.
fn combine(op: ReductionOp, a: Expr, b: Expr) -> Expr {
    match op {
        ReductionOp::Sum | ReductionOp::Mean => a.bin(BinOp::Add, b),
        ReductionOp::Prod => a.bin(BinOp::Mul, b),
        ReductionOp::Max => Expr::call(Func::Maximum, vec![a, b]),
        ReductionOp::Min => Expr::call(Func::Minimum, vec![a, b]),
    }
}

/// The identity a scan starts from: a float sum starts at -0 (so that a first element
/// of -0 stays -0, as in the reference, which starts from the first element).
fn scan_init(op: ReductionOp, dt: crate::dtype::DataType) -> Expr {
    if op == ReductionOp::Sum && dt.is_float() {
        return Expr::Lit(crate::dtype::ScalarValue::Float(-0.0), dt.compute_type()).cast(dt);
    }
    init_value(op, dt)
}
