//! Reductions: accumulator initialization before the serial reduction loops,
//! accumulation inside them, and the finish after them (block all-reduce, Welford
//! results, grid reduction through work buffers, the store of the result).

use std::ops::{Add, Mul};

use super::exprs::literal;
use super::{ext, unsupported, Lower};
use crate::codegen::abi::{cuda_type, Param, ParamKind, WorkKind};
use crate::codegen::index::Idx;
use crate::codegen::kir::Stmt;
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

    fn acc(&self, tv: ValId) -> SchedResult<String> {
        let t = self.t(tv);
        if t.memory == MemoryType::Global {
            return Ok(format!("T{}_acc", tv.id()));
        }
        let cidx = self.consumer_indices(tv);
        Ok(format!("T{}[{}]", tv.id(), self.store_offset(tv, &cidx)?))
    }

    pub(super) fn emit_reduction_init(
        &mut self,
        ei: usize,
        out: &mut Vec<Stmt>,
    ) -> SchedResult<()> {
        let tv = self.s.exprs[ei].output;
        let dt = self.t(tv).dtype;
        if is_welford(&self.s.exprs[ei].op) {
            let c = cuda_type(dt);
            let zero = literal(ScalarValue::Int(0), dt.compute_type());
            out.push(Stmt::Comment(format!(
                "Welford accumulator of T{}: running mean, sum of squared deviations, count",
                tv.id()
            )));
            out.push(Stmt::Assign {
                lhs: format!("{c} T{}_avg", tv.id()),
                rhs: zero.clone(),
            });
            out.push(Stmt::Assign {
                lhs: format!("{c} T{}_m2", tv.id()),
                rhs: zero,
            });
            out.push(Stmt::Assign {
                lhs: format!("long long T{}_n", tv.id()),
                rhs: "0".into(),
            });
            return Ok(());
        }
        let op = self.red_op(ei)?;
        let init = init_value(op, dt);
        if self.t(tv).memory == MemoryType::Global {
            out.push(Stmt::Comment(format!("accumulator of T{}", tv.id())));
            out.push(Stmt::Assign {
                lhs: format!("{} T{}_acc", cuda_type(dt), tv.id()),
                rhs: init,
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
        let x = self.operand(e, e.inputs[0], dt, &cidx)?;
        let st = if is_welford(&e.op) {
            Stmt::Call(format!(
                "nvf_welford_update(T{0}_avg, T{0}_m2, T{0}_n, {x})",
                tv.id()
            ))
        } else {
            let op = self.red_op(ei)?;
            let acc = self.acc(tv)?;
            let rhs = match op {
                ReductionOp::Sum | ReductionOp::Mean => format!("{acc} + {x}"),
                ReductionOp::Prod => format!("{acc} * {x}"),
                ReductionOp::Max => format!("nvf_maximum({acc}, {x})"),
                ReductionOp::Min => format!("nvf_minimum({acc}, {x})"),
            };
            Stmt::Assign {
                lhs: acc,
                rhs: format!("({})({rhs})", cuda_type(dt)),
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
        value: String,
        extra: &[String],
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
            lhs: format!("T{}[{}]", o.id(), self.store_offset(o, &cidx)?),
            rhs: format!("({})({value})", cuda_type(t.dtype)),
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
        if red_parallel(&t.domain, ParallelType::TIDx) {
            out.push(Stmt::Call(format!(
                "nvf_block_welford_x(T{n}_avg, T{n}_m2, T{n}_n, T{n}_smem_avg, T{n}_smem_m2, T{n}_smem_n)"
            )));
        }
        let c = cuda_type(t.dtype.compute_type());
        // As the reference: the variance divides by max(0, n - correction) (NaN or inf
        // when n <= correction) and the mean of no elements is NaN (0 / 0).
        let var = |corr: i64| {
            let count = if corr == 0 {
                format!("T{n}_n")
            } else {
                format!("(T{n}_n > {corr} ? T{n}_n - {corr} : 0)")
            };
            format!("T{n}_m2 / ({c})({count})")
        };
        let mean = format!("T{n}_avg / ({c})(T{n}_n != 0)");
        let values: Vec<String> = match &e.op {
            Op::Var { correction, .. } => vec![var(*correction)],
            Op::VarMean { correction, .. } => vec![var(*correction), mean],
            Op::Welford { .. } => vec![mean, format!("T{n}_m2"), format!("T{n}_n")],
            other => return unsupported(format!("{} is not a Welford reduction", other.name())),
        };
        for (o, v) in e.outputs().into_iter().zip(values) {
            self.store_result(o, v, &[], out)?;
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
        let t = self.t(tv);
        let dt = t.dtype;
        let acc = self.acc(tv)?;
        let tidx = red_parallel(&t.domain, ParallelType::TIDx);
        if tidx {
            out.push(Stmt::BlockReduce {
                acc: acc.clone(),
                dtype: dt,
                op,
                init: init_value(op, dt),
                smem: format!("T{}_smem", tv.id()),
            });
        }
        let mut last = Vec::new();
        if grid_dims(&t.domain).next().is_some() {
            last.push(self.emit_grid_reduce(tv, op, &acc, tidx, out));
        }
        if op == ReductionOp::Mean {
            let mut n = Idx::Const(1);
            for &r in &t.domain.root {
                if t.domain.dom(r).kind == IterKind::Reduction {
                    n = n.mul(ext(&t.domain.dom(r).extent));
                }
            }
            out.push(Stmt::Assign {
                lhs: acc.clone(),
                rhs: format!("{acc} / ({})({n})", cuda_type(dt)),
            });
        }
        if t.memory == MemoryType::Global {
            let cidx = self.consumer_indices(tv);
            let mut cond = self.predicates(tv, &cidx, false);
            cond.extend(self.thread_guards(tv));
            cond.extend(last);
            let st = Stmt::Assign {
                lhs: format!("T{}[{}]", tv.id(), self.store_offset(tv, &cidx)?),
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

    /// Checks a grid reduction and adds its work buffers to the ABI.
    pub(super) fn plan_grid_reduction(&mut self, ei: usize) -> SchedResult<()> {
        let e = &self.s.exprs[ei];
        let tv = e.output;
        let t = self.t(tv);
        if !matches!(e.op, Op::Reduction { .. }) {
            return unsupported(format!(
                "T{}: grid (cross-block) {} reductions; only sum/prod/max/min/mean reduce across blocks",
                tv.id(),
                e.op.name()
            ));
        }
        if t.memory != MemoryType::Global {
            return unsupported(format!(
                "T{}: the result of a grid reduction is only known to the last block to finish; make it a fusion output (consumers in the same kernel would need a grid-wide barrier)",
                tv.id()
            ));
        }
        let d = &t.domain;
        let reduced = |p: ParallelType| red_parallel(d, p);
        let mut partials = Extent::Const(1);
        let mut segments = Extent::Const(1);
        for (&p, x) in &self.bound {
            if p.is_bid() {
                partials = partials * x.clone();
                if !reduced(p) {
                    segments = segments * x.clone();
                }
            } else if !reduced(p) {
                partials = partials * x.clone();
            }
        }
        self.work.push(Param {
            name: format!("T{}_work", tv.id()),
            kind: ParamKind::WorkBuffer {
                tensor: tv,
                kind: WorkKind::Partials(t.dtype),
                elements: partials,
            },
        });
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

    /// Emits the grid reduction of `acc`; returns the name of the flag that is true in
    /// the one block that holds the final value.
    fn emit_grid_reduce(
        &self,
        tv: ValId,
        op: ReductionOp,
        acc: &str,
        tidx: bool,
        out: &mut Vec<Stmt>,
    ) -> String {
        let d = &self.t(tv).domain;
        let dt = self.t(tv).dtype;
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
        let f = reduction_functor(op);
        let reduced: Vec<String> = bids
            .iter()
            .filter(|&&p| red_parallel(d, p))
            .map(|p| p.to_string())
            .collect();
        out.push(Stmt::Comment(format!(
            "grid reduction of T{0} over {1}: each block stores its partial in T{0}_work and counts itself in T{0}_sem; the last block to arrive combines the partials",
            tv.id(),
            reduced.join(", ")
        )));
        let flag = format!("T{}_last", tv.id());
        out.push(Stmt::Assign {
            lhs: format!("const bool {flag}"),
            rhs: format!(
                "nvf_grid_reduce({acc}, {f}, {init}, T{n}_work, T{n}_sem, {seg}, {nblocks}, {rank}, {slot}, {nslots}, {tidx}, {smem})",
                init = init_value(op, dt),
                n = tv.id(),
                seg = lin(&bids, false, false),
                nblocks = lin(&bids, true, true),
                rank = lin(&bids, true, false),
                slot = lin(&tids, false, false),
                nslots = lin(&tids, false, true),
                smem = if tidx {
                    format!("T{}_smem", tv.id())
                } else {
                    format!("({}*)nullptr", cuda_type(dt))
                },
            ),
        });
        flag
    }
}

/// True for the Welford family (`var`, `var_mean`, `welford`).
pub(super) fn is_welford(op: &Op) -> bool {
    matches!(op, Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. })
}

/// True when a reduction loop dim of `d` is bound to `p`.
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

/// The preamble's functor of a reduction.
pub(in crate::codegen) fn reduction_functor(op: ReductionOp) -> &'static str {
    match op {
        ReductionOp::Sum | ReductionOp::Mean => "NvfSum()",
        ReductionOp::Prod => "NvfProd()",
        ReductionOp::Max => "NvfMax()",
        ReductionOp::Min => "NvfMin()",
    }
}

pub(super) fn is_reduction(d: &TensorDomain) -> bool {
    d.root.iter().any(|&r| d.dom(r).kind == IterKind::Reduction)
}

fn init_value(op: ReductionOp, dt: DataType) -> String {
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
    let lit = literal(v, dt.compute_type());
    format!("({})({lit})", cuda_type(dt))
}
