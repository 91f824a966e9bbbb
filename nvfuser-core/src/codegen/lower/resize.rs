//! Resize and indexing ops (slice, pad, cat, reshape, select, index_select, gather,
//! take_along_axis): the input's indices computed from the output's, with bounds
//! conditions where an element may come from nowhere. `scatter`/`scatter_add`
//! ([`Lower::scatter_stmts`]): each output element searches the index along the axis.

use std::collections::HashMap;
use std::ops::{Add, Div, Mul, Rem};

use super::indexing::{forward_indices, shape_doms};
use super::{ext, unsupported, At, Lower};
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, CType, Expr, Func, Stmt};
use crate::dtype::DataType;
use crate::ir::{Extent, IterKind, Op, SizeArg, SliceRange, ValId};
use crate::sched::{DomId, MemoryType, SExpr, SchedResult, ScheduleError};

impl Lower<'_> {
    /// Reads tensor `p` (global or shared, or recomputed here) at the given indices of
    /// its shape dims.
    pub(super) fn read_at(&self, e: &SExpr, p: ValId, shape_idx: &[Idx]) -> SchedResult<Expr> {
        if let Some(r) = self.s.recomputed(p) {
            return self.recompute(r, shape_idx);
        }
        let pt = self.t(p);
        match pt.memory {
            MemoryType::Global => Ok(self.element(p, &self.global_offset(p, shape_idx))),
            MemoryType::Shared => {
                let pd = &pt.domain;
                let mut pidx: HashMap<DomId, Idx> = HashMap::new();
                for (j, &pdim) in shape_doms(pd).iter().enumerate() {
                    let i = if pd.dom(pdim).kind != IterKind::Broadcast {
                        shape_idx.get(j).cloned().unwrap_or(Idx::Const(0))
                    } else {
                        Idx::Const(0)
                    };
                    pidx.insert(pdim, i);
                }
                forward_indices(pd, &mut pidx);
                let off = self.local_offset(p, &|i| {
                    pidx.get(&pd.loop_dims[i]).cloned().unwrap_or(Idx::Const(0))
                })?;
                Ok(Expr::elem(format!("T{}", p.id()), off))
            }
            MemoryType::Local => Err(ScheduleError::ResizeInputInRegisters {
                op: e.op.name(),
                producer: p,
                consumer: e.output,
            }),
        }
    }

    /// The value of a resize or indexing op: its input's indices computed from the
    /// output's, with bounds conditions where an element may come from nowhere.
    pub(super) fn resize_value(&self, e: &SExpr, at: At) -> SchedResult<Expr> {
        let oi: Vec<Idx> = match at {
            At::Loop(cidx) => self.output_indices(e, cidx),
            At::Index(idx) => idx.to_vec(),
        };
        let oext: Vec<Idx> = self.shape_extents(e.output).iter().map(ext).collect();
        let xext = self.shape_extents(e.inputs[0]);
        match &e.op {
            Op::Slice { ranges } => self.slice_value(e, ranges, &xext, &oi),
            Op::Pad { widths } => self.pad_value(e, widths, &xext, &oi, at),
            Op::Cat { axis } => self.cat_value(e, *axis, &oi),
            Op::Reshape { .. } => self.reshape_value(e, &xext, &oi, &oext),
            Op::Select { axis, index } => self.select_value(e, *axis, *index, &xext, &oi, at),
            Op::IndexSelect { axis } | Op::Gather { axis } | Op::TakeAlongAxis { axis } => {
                self.indexed_value(e, *axis, &xext, &oi)
            }
            other => unsupported(format!("{} is not a resize op", other.name())),
        }
    }

    /// `slice`: in = start + out * step, start normalized like the builder's extents.
    fn slice_value(
        &self,
        e: &SExpr,
        ranges: &[SliceRange],
        xext: &[Extent],
        oi: &[Idx],
    ) -> SchedResult<Expr> {
        let size_arg = |a: SizeArg| -> Extent {
            match a {
                SizeArg::Const(c) => Extent::Const(c),
                SizeArg::Input(k) => Extent::Scalar(e.inputs[k as usize]),
            }
        };
        let xi: Vec<Idx> = ranges
            .iter()
            .zip(xext)
            .zip(oi)
            .map(|((r, size), o)| {
                let start = match r.start {
                    SizeArg::Const(c) if c < 0 => {
                        (size.clone() + Extent::Const(c)).max(Extent::Const(0))
                    }
                    // 0 <= start: min(0, size) is 0.
                    SizeArg::Const(0) => Extent::Const(0),
                    a => size_arg(a).min(size.clone()),
                };
                ext(&start).add(o.clone().mul(Idx::Const(r.step)))
            })
            .collect();
        self.read_at(e, e.inputs[0], &xi)
    }

    /// `pad`: in = out - before; outside 0 <= in < size, the pad value.
    fn pad_value(
        &self,
        e: &SExpr,
        widths: &[(SizeArg, SizeArg)],
        xext: &[Extent],
        oi: &[Idx],
        at: At,
    ) -> SchedResult<Expr> {
        let out_dt = self.val_dtype_any(e.output);
        // A width of 0 adds nothing; a scalar width (a kernel argument, checked
        // non-negative before the launch) may be 0 too, so it keeps its conditions.
        let width = |a: SizeArg| -> Option<Idx> {
            match a {
                SizeArg::Const(c) if c <= 0 => None,
                SizeArg::Const(c) => Some(Idx::Const(c)),
                SizeArg::Input(k) => Some(ext(&Extent::Scalar(e.inputs[k as usize]))),
            }
        };
        let mut conds = Vec::new();
        let mut xi = Vec::new();
        for ((&(lo, hi), size), o) in widths.iter().zip(xext).zip(oi) {
            let (lo, hi) = (width(lo), width(hi));
            if lo.is_none() && hi.is_none() {
                xi.push(o.clone());
                continue;
            }
            let i = match &lo {
                Some(l) => Idx::Sub(Box::new(o.clone()), Box::new(l.clone())),
                None => o.clone(),
            };
            if let Some(l) = &lo {
                conds.push(Expr::from(o.clone()).bin(BinOp::Ge, Expr::from(l.clone())));
            }
            if hi.is_some() {
                conds.push(Expr::from(i.clone()).bin(BinOp::Lt, ext(size).into()));
            }
            // The read index, clamped where the select does not use it.
            let at = match &lo {
                Some(l) => clamped_read(o.clone(), Some(l.clone()), None),
                None => i,
            };
            xi.push(clamped_read(at, None, hi.is_some().then(|| ext(size))));
        }
        let fill = self.operand(e, e.inputs[1], out_dt, at)?;
        let v = self.read_at(e, e.inputs[0], &xi)?;
        Ok(match Expr::all(conds) {
            None => v,
            Some(inside) => inside.paren().select(v, fill),
        })
    }

    /// The indices of `e`'s output dims at the loop indices `cidx` (0 in broadcast dims).
    fn output_indices(&self, e: &SExpr, cidx: &HashMap<DomId, Idx>) -> Vec<Idx> {
        let od = &self.t(e.output).domain;
        od.root
            .iter()
            .map(|r| {
                if od.dom(*r).kind != IterKind::Broadcast {
                    cidx.get(r).cloned().unwrap_or(Idx::Const(0))
                } else {
                    Idx::Const(0)
                }
            })
            .collect()
    }

    /// `cat`: the input whose range along `axis` holds the output index. Each input's
    /// index is clamped into its range ([`clamped_read`]).
    fn cat_value(&self, e: &SExpr, axis: usize, oi: &[Idx]) -> SchedResult<Expr> {
        self.cat_select(e, axis, oi, Ok)
    }

    /// The address a vector of cat `e` starts at: the element of the piece the
    /// output index `cidx` lies in (`cat_value` with addresses; the validation saw to
    /// it that a vector lies in one piece).
    pub(super) fn cat_address(
        &self,
        e: &SExpr,
        axis: usize,
        cidx: &HashMap<DomId, Idx>,
    ) -> SchedResult<Expr> {
        let oi = self.output_indices(e, cidx);
        self.cat_select(e, axis, &oi, |el| memory_address(el, "cat"))
    }

    /// `oi[axis] < end0 ? piece0 : (oi[axis] < end1 ? piece1 : ...)`, each piece read at
    /// its clamped index and passed through `each`.
    fn cat_select(
        &self,
        e: &SExpr,
        axis: usize,
        oi: &[Idx],
        each: impl Fn(Expr) -> SchedResult<Expr>,
    ) -> SchedResult<Expr> {
        let mut offset = Extent::Const(0);
        let mut pieces = Vec::new();
        let n = e.inputs.len();
        for (k, &p) in e.inputs.iter().enumerate() {
            let Some(len) = self.shape_extents(p).get(axis).cloned() else {
                return unsupported(format!("cat: T{} has no dim {axis}", p.id()));
            };
            let mut xi = oi.to_vec();
            let first = offset == Extent::Const(0);
            let start = (!first).then(|| ext(&offset));
            let end = (k + 1 < n).then(|| ext(&len));
            xi[axis] = clamped_read(oi[axis].clone(), start, end);
            offset = offset + len;
            pieces.push((ext(&offset), each(self.read_at(e, p, &xi)?)?));
        }
        let Some((_, mut v)) = pieces.pop() else {
            return unsupported("cat of no inputs".into());
        };
        while let Some((end, r)) = pieces.pop() {
            let here = Expr::from(oi[axis].clone()).bin(BinOp::Lt, end.into());
            v = here.select(r, v.paren());
        }
        Ok(v)
    }

    /// The address a vector of `index_select` `e` (along `axis`, not the innermost dim)
    /// starts at, with the condition that checks its index (reporting a bad one): the
    /// vector copies a contiguous run of the selected row.
    pub(super) fn index_select_address(
        &self,
        e: &SExpr,
        axis: usize,
        cidx: &HashMap<DomId, Idx>,
    ) -> SchedResult<(Expr, Expr)> {
        let oi = self.output_indices(e, cidx);
        let xext = self.shape_extents(e.inputs[0]);
        let (check, xi) = self.checked_indices(e, axis, &xext, &oi)?;
        let addr = memory_address(self.read_at(e, e.inputs[0], &xi)?, "index_select")?;
        Ok((check, addr))
    }

    /// `reshape`, row-major: the output index linearized, then split over the input dims.
    fn reshape_value(
        &self,
        e: &SExpr,
        xext: &[Extent],
        oi: &[Idx],
        oext: &[Idx],
    ) -> SchedResult<Expr> {
        let mut lin = Idx::Const(0);
        for (o, n) in oi.iter().zip(oext) {
            lin = lin.mul(n.clone()).add(o.clone());
        }
        let mut xi = vec![Idx::Const(0); xext.len()];
        let mut inner = Idx::Const(1);
        for j in (0..xext.len()).rev() {
            let n = ext(&xext[j]);
            xi[j] = lin.clone().div(inner.clone()).rem(n.clone());
            if j == 0 {
                xi[j] = lin.clone().div(inner.clone());
            }
            inner = inner.mul(n);
        }
        self.read_at(e, e.inputs[0], &xi)
    }

    /// `select`: the output's indices with the selected index inserted at `axis` (a
    /// negative constant counts from the end, a scalar index wraps).
    fn select_value(
        &self,
        e: &SExpr,
        axis: usize,
        index: SizeArg,
        xext: &[Extent],
        oi: &[Idx],
        at: At,
    ) -> SchedResult<Expr> {
        let size = ext(&xext[axis]);
        let i = match index {
            SizeArg::Const(c) if c < 0 => ext(&(xext[axis].clone() + Extent::Const(c))),
            SizeArg::Const(c) => Idx::Const(c),
            SizeArg::Input(k) => {
                let v = self.operand(e, e.inputs[k as usize], DataType::I64, at)?;
                Idx::Value(Box::new(Expr::call(Func::WrapIndex, vec![v, size.into()])))
            }
        };
        let mut xi = oi.to_vec();
        xi.insert(axis, i);
        self.read_at(e, e.inputs[0], &xi)
    }

    /// `index_select`, `gather` and `take_along_axis`: the input read at the index
    /// tensor's value along `axis`, zero (and the error flag set) where it is outside.
    /// The input indices an indexing op `e` reads at output indices `oi`, its index
    /// clamped into the input, and the condition that checks the index.
    fn checked_indices(
        &self,
        e: &SExpr,
        axis: usize,
        xext: &[Extent],
        oi: &[Idx],
    ) -> SchedResult<(Expr, Vec<Idx>)> {
        let idx_of = |v: Expr| Idx::Value(Box::new(v.cast(CType::Index)));
        let index = e.inputs[1];
        let raw = match &e.op {
            Op::IndexSelect { .. } => self.read_at(e, index, &[oi[axis].clone()])?,
            _ => self.read_at(e, index, oi)?,
        };
        let size = ext(&xext[axis]);
        let i = idx_of(raw.clone());
        let mut xi = oi.to_vec();
        // Clamped into the input, as a guarded read must be ([`clamped_read`]): a bad
        // index (which the check reports) never becomes a read out of bounds.
        xi[axis] = Idx::Min(
            Box::new(Idx::Max(Box::new(i.clone()), Box::new(Idx::Const(0)))),
            Box::new(Idx::Sub(Box::new(size.clone()), Box::new(Idx::Const(1)))),
        );
        // An index outside the input reads nothing (the element is zero) and sets the
        // error flag, checked in the index's own type (before the narrowing to the index
        // type); the CPU reference rejects such an index.
        let check = match self.check_code(e) {
            Some(code) => Expr::call(
                Func::CheckIndex,
                vec![
                    Expr::var("nvf_err"),
                    code,
                    raw.cast(DataType::I64),
                    Expr::from(size).cast(DataType::I64),
                ],
            ),
            None => Expr::call(Func::InRange, vec![i.into(), size.into()]),
        };
        Ok((check, xi))
    }

    fn indexed_value(
        &self,
        e: &SExpr,
        axis: usize,
        xext: &[Extent],
        oi: &[Idx],
    ) -> SchedResult<Expr> {
        let out_dt = self.val_dtype_any(e.output);
        let (check, xi) = self.checked_indices(e, axis, xext, oi)?;
        Ok(check.select(
            self.read_at(e, e.inputs[0], &xi)?,
            Expr::int(0).cast(out_dt),
        ))
    }
}

impl Lower<'_> {
    /// `scatter` / `scatter_add` at one output element `p` (stored into `lhs`): a serial
    /// loop over `k < index.size(axis)` reads `index` at `p` with `p[axis] = k` (when `p`
    /// lies inside the index in the other dims), checks it against `x.size(axis)` (the
    /// device-side check; a bad index matches nothing) and, where it equals `p[axis]`,
    /// keeps `src` at that position (the last match wins: the evaluator's row-major
    /// rule) or adds it to the running value, rounded to the dtype at each step as the
    /// evaluator does. Every read is in bounds; no atomics, no other thread's element.
    pub(super) fn scatter_stmts(
        &self,
        e: &SExpr,
        axis: usize,
        add: bool,
        cidx: &HashMap<DomId, Idx>,
        lhs: Expr,
    ) -> SchedResult<Vec<Stmt>> {
        let oi = self.output_indices(e, cidx);
        let out_dt = self.val_dtype_any(e.output);
        let (x, index, src) = (e.inputs[0], e.inputs[1], e.inputs[2]);
        let oext: Vec<Idx> = self.shape_extents(e.output).iter().map(ext).collect();
        let iext: Vec<Idx> = self.shape_extents(index).iter().map(ext).collect();
        let size = oext[axis].clone();
        let n = format!("T{}", e.output.id());
        let (k, si, found, val) = (
            format!("{n}_sk"),
            format!("{n}_si"),
            format!("{n}_sf"),
            format!("{n}_sv"),
        );
        let mut ji = oi.clone();
        ji[axis] = Idx::var(k.clone());
        let raw = self.read_at(e, index, &ji)?;
        let check = match self.check_code(e) {
            Some(code) => Expr::call(
                Func::CheckIndex,
                vec![
                    Expr::var("nvf_err"),
                    code,
                    Expr::var(si.clone()),
                    Expr::from(size.clone()).cast(DataType::I64),
                ],
            ),
            None => Expr::call(
                Func::InRange,
                vec![Expr::var(si.clone()), Expr::from(size.clone())],
            ),
        };
        let hit =
            Expr::var(si.clone()).bin(BinOp::Eq, Expr::from(oi[axis].clone()).cast(DataType::I64));
        let compute = out_dt.compute_type();
        let is_tensor_src = self.is_tensor(src);
        let src_val = if is_tensor_src {
            self.read_at(e, src, &ji)?
        } else {
            self.operand(e, src, out_dt, At::Loop(cidx))?
        };
        let x_val = self.read_at(e, x, &oi)?;
        let mut before = Vec::new();
        let on_hit = if add {
            before.push(Stmt::Decl {
                konst: false,
                ty: CType::Data(out_dt),
                name: val.clone(),
                init: x_val.clone().cast(out_dt),
            });
            let sum = Expr::var(val.clone())
                .cast(compute)
                .bin(BinOp::Add, src_val.cast(out_dt).cast(compute));
            vec![Stmt::Assign {
                lhs: Expr::var(val.clone()),
                rhs: sum.cast(out_dt),
            }]
        } else {
            before.push(Stmt::Decl {
                konst: false,
                ty: CType::Data(DataType::Bool),
                name: found.clone(),
                init: Expr::int(0).cast(DataType::Bool),
            });
            before.push(Stmt::Decl {
                konst: false,
                ty: CType::Data(out_dt),
                name: val.clone(),
                init: Expr::int(0).cast(out_dt),
            });
            vec![
                Stmt::Assign {
                    lhs: Expr::var(found.clone()),
                    rhs: Expr::int(1).cast(DataType::Bool),
                },
                Stmt::Assign {
                    lhs: Expr::var(val.clone()),
                    rhs: src_val.cast(out_dt),
                },
            ]
        };
        let body = vec![
            Stmt::Decl {
                konst: true,
                ty: CType::Data(DataType::I64),
                name: si,
                init: raw.cast(DataType::I64),
            },
            Stmt::If {
                cond: vec![check, hit],
                body: on_hit,
            },
        ];
        // Only output elements inside the index in the other dims have candidates.
        let inside: Vec<Expr> = (0..oi.len())
            .filter(|&d| d != axis)
            .map(|d| Expr::from(oi[d].clone()).bin(BinOp::Lt, Expr::from(iext[d].clone())))
            .collect();
        let lp = Stmt::For {
            var: k,
            extent: iext[axis].clone(),
            unroll: false,
            body,
        };
        let mut stmts = before;
        stmts.push(if inside.is_empty() {
            lp
        } else {
            Stmt::If {
                cond: inside,
                body: vec![lp],
            }
        });
        let result = if add {
            Expr::var(val)
        } else {
            Expr::var(found).select(Expr::var(val), x_val.cast(out_dt))
        };
        stmts.push(Stmt::Assign {
            lhs,
            rhs: result.cast(self.t(e.output).dtype),
        });
        Ok(stmts)
    }
}

/// The index of a read that a select guards (a pad's input inside the padding, a cat's
/// input outside the output range it covers): `i - start` (no less than 0) and no more
/// than `size - 1`. The select leaves the value unused outside the range, but the
/// compiler may load it anyway: NVRTC hoisted a pad's guarded load of `T1[i - 1]`, and
/// at `i = 0` the unsigned thread index wrapped to `T1[2^32 - 1]`, an illegal address
/// (GPU fuzz seed 11227029). So the subtraction is `max(i, start) - start`, never
/// below zero in unsigned arithmetic either.
/// The address of an element read from memory: a recomputed slice reads its input
/// converted to its own dtype, the same, so the conversion is dropped.
fn memory_address(mut el: Expr, op: &str) -> SchedResult<Expr> {
    while let Expr::Cast(_, inner) | Expr::Paren(inner) = el {
        el = *inner;
    }
    if !matches!(el, Expr::Elem(..)) {
        return unsupported(format!("{op}: a vector is not read from memory"));
    }
    Ok(el.addr_of())
}

fn clamped_read(i: Idx, start: Option<Idx>, size: Option<Idx>) -> Idx {
    let i = match start {
        Some(s) => Idx::Sub(
            Box::new(Idx::Max(Box::new(i), Box::new(s.clone()))),
            Box::new(s),
        ),
        None => i,
    };
    let last = |n: Idx| match n {
        Idx::Const(c) => Idx::Const(c - 1),
        n => Idx::Sub(Box::new(n), Box::new(Idx::Const(1))),
    };
    match size {
        Some(n) => Idx::Min(Box::new(i), Box::new(last(n))),
        None => i,
    }
}
