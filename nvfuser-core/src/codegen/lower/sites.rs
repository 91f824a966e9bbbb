//! Device-side check sites of a kernel: which expressions report errors through the
//! error buffer (data-dependent reads, integer division), planned before anything is
//! emitted, and the text that names each site in an error message.

use super::Lower;
use crate::codegen::checks::{self, CheckKind, DeviceCheck};
use crate::codegen::kir::{Expr, Func};
use crate::dtype::{promote, DataType, Operand};
use crate::ir::{BinaryOp, Op, ValId};
use crate::sched::SExpr;

impl Lower<'_> {
    /// Assigns a check site to every data-dependent read (gather, take_along_axis,
    /// index_select) and integer division (div, fmod, remainder) before anything is
    /// emitted, so the table's fingerprint is known to every site.
    pub(super) fn plan_checks(&mut self) {
        for e in self.s.exprs.iter().chain(&self.s.recomputed) {
            let kind = match &e.op {
                Op::Gather { axis } | Op::TakeAlongAxis { axis } | Op::IndexSelect { axis } => {
                    CheckKind::Index { axis: *axis }
                }
                Op::Scatter { axis, .. } => CheckKind::Index { axis: *axis },
                Op::Binary(_) if self.int_division(e).is_some() => CheckKind::DivisionByZero,
                _ => continue,
            };
            if self.check_site.contains_key(&e.output) {
                continue;
            }
            self.check_site.insert(e.output, self.checks.len());
            self.checks.push(DeviceCheck {
                op: e.op.name().to_string(),
                kind,
                expr: self.expr_text(e),
            });
        }
        self.check_fingerprint = checks::fingerprint(&self.checks);
    }

    /// The error code of the check site of `e`'s output.
    pub(super) fn check_code(&self, e: &SExpr) -> Option<Expr> {
        let site = *self.check_site.get(&e.output)?;
        Some(Expr::Code(checks::code(self.check_fingerprint, site)))
    }

    /// `div`, `fmod` or `remainder` computed on integers: the checked helper.
    pub(super) fn int_division(&self, e: &SExpr) -> Option<Func> {
        let Op::Binary(b) = &e.op else { return None };
        let helper = match b {
            BinaryOp::Div => Func::DivChecked,
            BinaryOp::Fmod => Func::FmodChecked,
            BinaryOp::Remainder => Func::RemainderChecked,
            _ => return None,
        };
        let ops: Vec<Operand> = e
            .inputs
            .iter()
            .take(2)
            .map(|&v| Operand {
                dtype: self.val_dtype_any(v),
                is_scalar: !self.is_tensor(v),
            })
            .collect();
        let out_dt = self.val_dtype_any(e.output);
        let c = promote(&ops).unwrap_or(out_dt).compute_type();
        matches!(c, DataType::I32 | DataType::I64).then_some(helper)
    }

    /// The fusion value a scheduled value stands for: a cache made by `cache_after` /
    /// `cache_before` is named after the fusion tensor it copies.
    fn origin(&self, v: ValId) -> ValId {
        let f = self.sf.fusion();
        let mut v = v;
        for _ in 0..8 {
            if f.get_val(v).is_some() {
                return v;
            }
            let producer = self
                .s
                .exprs
                .iter()
                .find(|x| x.output == v && matches!(x.op, Op::Set))
                .map(|x| x.inputs[0]);
            let consumer = self
                .s
                .exprs
                .iter()
                .find(|x| matches!(x.op, Op::Set) && x.inputs.first() == Some(&v))
                .map(|x| x.output);
            match producer.or(consumer) {
                Some(next) => v = next,
                None => return v,
            }
        }
        v
    }

    /// An expression as the math printer writes it (`T3 = T1 / T2`), for error messages.
    fn expr_text(&self, e: &SExpr) -> String {
        let f = self.sf.fusion();
        let name = |v: ValId| -> String {
            let o = self.origin(v);
            match f.get_val(o) {
                Some(x) if !self.is_tensor(v) => match x.constant() {
                    Some(c) => format!("{c}"),
                    None => format!("S{}", o.id()),
                },
                _ => format!("T{}", o.id()),
            }
        };
        let out = name(e.output);
        let ins: Vec<String> = e.inputs.iter().map(|&v| name(v)).collect();
        let arg = |i: usize| ins.get(i).cloned().unwrap_or_default();
        match &e.op {
            Op::Binary(BinaryOp::Div) => format!("{out} = {} / {}", arg(0), arg(1)),
            Op::Gather { axis } | Op::TakeAlongAxis { axis } | Op::IndexSelect { axis } => {
                format!(
                    "{out} = {}({}, {}, axis={axis})",
                    e.op.name(),
                    arg(0),
                    arg(1)
                )
            }
            Op::Scatter { axis, .. } => format!(
                "{out} = {}({}, {}, {}, axis={axis})",
                e.op.name(),
                arg(0),
                arg(1),
                arg(2)
            ),
            op => format!("{out} = {}({})", op.name(), ins.join(", ")),
        }
    }
}
