//! Op calls: binding arguments to an op's parameters and evaluating them (the builder
//! call itself is in `dispatch`).
//!
//! Arguments are matched positionally (the receiver of a method call first) and by
//! `name = value`, then evaluated in source order, so the expressions they compute are
//! appended in the order they are written. Each argument is read as its parameter's
//! [`Kind`]: axes and masks are literals (they are part of the fusion's structure),
//! sizes are literals or integer scalars, values are any expression.

use super::ast::{Arg, Expr, ExprKind, Lit, Name};
use super::build::{Interp, Value};
use super::error::{DslError, SpanRange};
use super::ops::{closest, lookup, suggest_op, Default, Family, Kind, OpSpec};
use crate::builder::{Size, Slice};
use crate::dtype::DataType;
use crate::ir::ValId;

/// An evaluated argument.
#[derive(Clone, Debug)]
pub(crate) enum ArgVal {
    Val(ValId),
    Ints(Vec<i64>),
    Int(i64),
    Bool(bool),
    Sizes(Vec<Size>),
    Size(Size),
    DType(DataType),
    /// A `dtype` left out: the input's.
    InputDType,
    Vals(Vec<ValId>),
    Mask(Vec<bool>),
    Widths(Vec<(Size, Size)>),
    Ranges(Vec<Slice>),
}

/// The integer of an integer literal expression.
fn int_lit(e: &Expr) -> Option<i64> {
    match e.kind {
        ExprKind::Lit(Lit::Int {
            value,
            dtype: None | Some(DataType::I32) | Some(DataType::I64),
        }) => i64::try_from(value).ok(),
        _ => None,
    }
}

/// PyTorch's `dim`/`dims` keyword, for an op whose parameter is `axis` or `axes`.
fn axis_keyword(name: &str, spec: &OpSpec) -> Option<&'static str> {
    if !matches!(name, "dim" | "dims") {
        return None;
    }
    spec.params
        .iter()
        .map(|p| p.name)
        .find(|&n| n == "axis" || n == "axes")
}

fn bool_lit(e: &Expr) -> Option<bool> {
    match e.kind {
        ExprKind::Lit(Lit::Bool(b)) => Some(b),
        _ => None,
    }
}

impl Interp<'_> {
    /// Evaluates `func(receiver, args...)`.
    pub(crate) fn call(
        &mut self,
        func: &Name,
        receiver: Option<&Expr>,
        args: &[Arg],
        span: SpanRange,
    ) -> Value {
        // Errors about the call point from the op's name to the closing parenthesis.
        let call_span = func.span.to(span);
        let Some(spec) = lookup(&func.text) else {
            let hint = suggest_op(&func.text);
            self.errors.push(
                DslError::new(func.span, format!("unknown op `{}`", func.text)).with_hint_opt(hint),
            );
            self.scan(receiver, args);
            return Value::Poison;
        };
        if spec.family == Family::Inplace {
            self.errors.push(
                DslError::new(call_span, "inplace(...) marks an in-place output and can only appear in the returned value")
                    .with_hint("return it: (y, inplace(z, x))"),
            );
            self.scan(receiver, args);
            return Value::Poison;
        }
        // Match arguments to parameters.
        let n = spec.params.len();
        let mut slots: Vec<Option<&Expr>> = vec![None; n];
        let mut order = Vec::new();
        let mut positional = 0;
        let mut ok = true;
        let all: Vec<(Option<&Name>, &Expr)> = receiver
            .into_iter()
            .map(|r| (None, r))
            .chain(args.iter().map(|a| (a.name.as_ref(), &a.value)))
            .collect();
        let given = all.len();
        let extra: Vec<SpanRange> = all
            .iter()
            .filter(|(k, _)| k.is_none())
            .skip(n)
            .map(|(_, e)| e.span)
            .collect();
        if let (Some(first), Some(last)) = (extra.first(), extra.last()) {
            self.errors.push(
                DslError::new(
                    first.to(*last),
                    format!("`{}` takes {}, found {given}", spec.name, spec.takes()),
                )
                .with_hint(format!("the signature is {}", spec.usage())),
            );
            ok = false;
        }
        for (name, value) in all {
            let slot = match name {
                None => {
                    positional += 1;
                    if positional > n {
                        continue;
                    }
                    positional - 1
                }
                Some(k) => match spec.params.iter().position(|p| p.name == k.text) {
                    Some(i) => i,
                    None => {
                        let hint = closest(&k.text, spec.params.iter().map(|p| p.name))
                            .or_else(|| axis_keyword(&k.text, spec))
                            .map(|s| format!("did you mean `{s}`?"))
                            .unwrap_or_else(|| format!("the signature is {}", spec.usage()));
                        self.errors.push(
                            DslError::new(
                                k.span,
                                format!("`{}` has no argument `{}`", spec.name, k.text),
                            )
                            .with_hint(hint),
                        );
                        ok = false;
                        continue;
                    }
                },
            };
            if slots[slot].is_some() {
                self.errors.push(DslError::new(
                    value.span,
                    format!(
                        "argument `{}` of `{}` is given twice",
                        spec.params[slot].name, spec.name
                    ),
                ));
                ok = false;
                continue;
            }
            slots[slot] = Some(value);
            order.push(slot);
        }
        for (i, p) in spec.params.iter().enumerate() {
            if slots[i].is_none() && p.default.is_none() && ok {
                self.errors.push(
                    DslError::new(
                        call_span,
                        format!(
                            "`{}` takes {}, found {given}: `{}` is missing",
                            spec.name,
                            spec.takes(),
                            p.name
                        ),
                    )
                    .with_hint(format!("the signature is {}", spec.usage())),
                );
                ok = false;
            }
        }
        if !ok {
            self.scan(receiver, args);
            return Value::Poison;
        }
        // Evaluate in source order.
        let mut vals: Vec<Option<ArgVal>> = vec![None; n];
        let mut spans: Vec<SpanRange> = vec![call_span; n];
        let mut failed = false;
        for slot in order {
            let e = slots[slot].expect("filled above");
            spans[slot] = e.span;
            match self.arg(spec, slot, e) {
                Some(v) => vals[slot] = Some(v),
                None => failed = true,
            }
        }
        if failed {
            return Value::Poison;
        }
        let vals: Vec<ArgVal> = vals
            .into_iter()
            .zip(spec.params)
            .map(|(v, p)| match (v, p.default) {
                (Some(v), _) => v,
                (None, Some(Default::Bool(b))) => ArgVal::Bool(b),
                (None, Some(Default::Int(i))) => ArgVal::Int(i),
                (None, Some(Default::InputDType)) => ArgVal::InputDType,
                (None, None) => unreachable!("missing arguments are reported above"),
            })
            .collect();
        self.dispatch(spec, &vals, &spans, call_span)
    }

    /// Reports unknown variables inside the arguments of a call that is not evaluated.
    fn scan(&mut self, receiver: Option<&Expr>, args: &[Arg]) {
        let mut stack: Vec<&Expr> = receiver
            .into_iter()
            .chain(args.iter().map(|a| &a.value))
            .collect();
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Var(_) => {
                    self.eval(e);
                }
                ExprKind::Unary { expr, .. }
                | ExprKind::Cast { expr, .. }
                | ExprKind::Field { expr, .. } => stack.push(expr),
                ExprKind::Binary { lhs, rhs, .. } => stack.extend([&**lhs, &**rhs]),
                ExprKind::Call { receiver, args, .. } => {
                    stack.extend(receiver.as_deref());
                    stack.extend(args.iter().map(|a| &a.value));
                }
                ExprKind::Array(v) | ExprKind::Tuple(v) => stack.extend(v.iter()),
                ExprKind::Range { start, end } => {
                    stack.extend(start.as_deref().into_iter().chain(end.as_deref()))
                }
                ExprKind::Lit(_) | ExprKind::DType(_) | ExprKind::Invalid => {}
            }
        }
    }

    fn kind_error(
        &mut self,
        spec: &OpSpec,
        slot: usize,
        e: &Expr,
        expected: &str,
    ) -> Option<ArgVal> {
        if !matches!(e.kind, ExprKind::Invalid) {
            let name = spec.params[slot].name;
            let hint = if spec.name == "topk" && name == "k" {
                format!(
                    "k is a constant: it is the size of the outputs' sorted dim, which the fusion's shapes hold (a scalar k is not supported); the signature is {}",
                    spec.usage()
                )
            } else {
                format!("the signature is {}", spec.usage())
            };
            self.errors.push(
                DslError::new(
                    e.span,
                    format!("argument `{name}` of `{}` must be {expected}", spec.name),
                )
                .with_hint(hint),
            );
        }
        None
    }

    fn elems<'e>(
        &mut self,
        spec: &OpSpec,
        slot: usize,
        e: &'e Expr,
        expected: &str,
    ) -> Option<&'e [Expr]> {
        match &e.kind {
            ExprKind::Array(v) => Some(v),
            _ => {
                self.kind_error(spec, slot, e, expected);
                None
            }
        }
    }

    /// A size: an integer literal, or an expression giving an integer scalar.
    fn size(&mut self, e: &Expr) -> Option<Size> {
        if let Some(c) = int_lit(e) {
            return Some(Size::Const(c));
        }
        let v = self.eval(e);
        match v {
            Value::Scalar(v) => Some(Size::Val(v)),
            Value::Poison => None,
            _ => {
                self.errors.push(
                    DslError::new(
                        e.span,
                        "a size must be an integer literal or an integer scalar",
                    )
                    .with_hint("e.g. 4096, n (an i64 parameter) or x.size(0)"),
                );
                None
            }
        }
    }

    /// Evaluates argument `slot` of `spec` from `e`.
    fn arg(&mut self, spec: &OpSpec, slot: usize, e: &Expr) -> Option<ArgVal> {
        let kind = spec.params[slot].kind;
        match kind {
            Kind::Value => {
                let v = self.eval(e);
                self.expect_val(v, e.span).map(ArgVal::Val)
            }
            Kind::Int => match int_lit(e) {
                Some(i) => Some(ArgVal::Int(i)),
                None => self.kind_error(spec, slot, e, "an integer literal"),
            },
            Kind::Bool => match bool_lit(e) {
                Some(b) => Some(ArgVal::Bool(b)),
                None => self.kind_error(spec, slot, e, "`true` or `false`"),
            },
            Kind::Axes | Kind::Dims => {
                let what = if kind == Kind::Axes {
                    "integer literals, e.g. [1] or [0, -1]"
                } else {
                    "non-negative integer literals, e.g. [0, 2]"
                };
                if let (Kind::Axes, Some(i)) = (kind, int_lit(e)) {
                    return Some(ArgVal::Ints(vec![i]));
                }
                let elems = self.elems(spec, slot, e, what)?;
                let ints: Option<Vec<i64>> = elems
                    .iter()
                    .map(|x| int_lit(x).filter(|&i| kind == Kind::Axes || i >= 0))
                    .collect();
                match ints {
                    Some(v) => Some(ArgVal::Ints(v)),
                    None => self.kind_error(spec, slot, e, what),
                }
            }
            Kind::Mask => {
                let elems = self.elems(spec, slot, e, "bool literals, e.g. [false, true]")?;
                match elems.iter().map(bool_lit).collect::<Option<Vec<bool>>>() {
                    Some(m) => Some(ArgVal::Mask(m)),
                    None => self.kind_error(spec, slot, e, "bool literals, e.g. [false, true]"),
                }
            }
            Kind::Size => self.size(e).map(ArgVal::Size),
            Kind::Sizes => {
                let elems = self.elems(
                    spec,
                    slot,
                    e,
                    "a list of sizes, e.g. [n, 4096] or [x.size(0), -1]",
                )?;
                let mut out = Vec::with_capacity(elems.len());
                for x in elems {
                    out.push(self.size(x));
                }
                out.into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(ArgVal::Sizes)
            }
            Kind::DType => match e.kind {
                ExprKind::DType(d) => Some(ArgVal::DType(d)),
                _ => self.kind_error(
                    spec,
                    slot,
                    e,
                    "a dtype (bool, i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2)",
                ),
            },
            Kind::Values => {
                let elems = self.elems(spec, slot, e, "a list of tensors, e.g. [a, b]")?;
                let mut out = Vec::with_capacity(elems.len());
                for x in elems {
                    let v = self.eval(x);
                    out.push(self.expect_val(v, x.span));
                }
                out.into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(ArgVal::Vals)
            }
            Kind::Widths => {
                let what = "(before, after) pairs of integer literals or integer scalars, e.g. [(0, 0), (1, n)]";
                let elems = self.elems(spec, slot, e, what)?;
                if !elems
                    .iter()
                    .all(|x| matches!(&x.kind, ExprKind::Tuple(p) if p.len() == 2))
                {
                    return self.kind_error(spec, slot, e, what);
                }
                let mut pairs = Vec::with_capacity(elems.len());
                for x in elems {
                    let ExprKind::Tuple(p) = &x.kind else {
                        return self.kind_error(spec, slot, e, what);
                    };
                    let lo = self.size(&p[0]);
                    let hi = self.size(&p[1]);
                    pairs.push(lo.zip(hi));
                }
                pairs
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(ArgVal::Widths)
            }
            Kind::Ranges => {
                let what = "one range per dim: `..`, `a..b`, `a..`, `..b` or `(start, stop, step)`";
                let elems = self.elems(spec, slot, e, what)?;
                let mut out = Vec::with_capacity(elems.len());
                for x in elems {
                    let r = match &x.kind {
                        ExprKind::Range { start, end } => {
                            let start = match start {
                                Some(s) => self.size(s),
                                None => Some(Size::Const(0)),
                            };
                            let stop = match end {
                                Some(s) => self.size(s),
                                None => Some(Size::Const(i64::MAX)),
                            };
                            start.zip(stop).map(|(start, stop)| Slice {
                                start,
                                stop,
                                step: 1,
                            })
                        }
                        ExprKind::Tuple(p) if p.len() == 2 || p.len() == 3 => {
                            let start = self.size(&p[0]);
                            let stop = self.size(&p[1]);
                            let step = match p.get(2) {
                                None => Some(1),
                                Some(s) => int_lit(s).or_else(|| {
                                    self.errors.push(DslError::new(
                                        s.span,
                                        "a slice step must be an integer literal",
                                    ));
                                    None
                                }),
                            };
                            match (start, stop, step) {
                                (Some(start), Some(stop), Some(step)) => {
                                    Some(Slice { start, stop, step })
                                }
                                _ => None,
                            }
                        }
                        _ => self.kind_error(spec, slot, x, what).map(|_| Slice::all()),
                    };
                    out.push(r);
                }
                out.into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(ArgVal::Ranges)
            }
        }
    }
}
