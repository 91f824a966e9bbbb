//! The interpreter: walks a fusion fn's AST and calls the real [`FusionDefinition`].
//!
//! The proc macro (at compile time) and the run-time parser use this same walk, so both
//! accept exactly the programs the builder accepts, with the same shapes and dtypes. On
//! top of the builder's checks it tracks named dims, checks the declared return type, and
//! reports errors with spans. After an error the value concerned is *poisoned*: it
//! evaluates silently to nothing, so one mistake is reported once and checking goes on.
//!
//! This file holds the walk over statements and expressions; parameters are declared in
//! `params`, op calls are `call` (arguments) and `dispatch`, the tail is `outputs`.

use std::collections::HashMap;

use super::ast::{Expr, ExprKind, FusionFn, Lit, Name, Pat, Stmt, UnOp};
use super::error::{DslError, SpanRange};
use super::ops::{closest, lookup};
use super::signature::Signature;
use crate::builder::FusionDefinition;
use crate::dtype::DataType;
use crate::error::Error;
use crate::ir::ValId;

/// A value of the language.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A tensor of the fusion.
    Tensor(ValId),
    /// A scalar of the fusion (an input, a constant, or computed).
    Scalar(ValId),
    /// Several values (`var_mean`, `welford`, a tuple expression).
    Tuple(Vec<Value>),
    /// The result of something that failed; already reported.
    Poison,
}

pub(crate) struct Binding {
    pub(crate) value: Value,
    /// The parameter this name is bound to, if it is one (for unused-input warnings).
    pub(crate) param: Option<usize>,
}

/// The interpreter's state while building one fusion fn.
pub(crate) struct Interp<'a> {
    pub(crate) f: &'a FusionFn,
    pub(crate) fd: FusionDefinition,
    pub(crate) env: HashMap<String, Binding>,
    pub(crate) errors: Vec<DslError>,
    pub(crate) warnings: Vec<DslError>,
    /// Input tensor dims declared with a name: `(input, axis) -> name`.
    pub(crate) dim_names: HashMap<(ValId, u32), String>,
    pub(crate) param_vals: Vec<Option<ValId>>,
    pub(crate) param_used: Vec<bool>,
    /// Whether something reported while parsing was met (then no follow-on errors).
    pub(crate) invalid_seen: bool,
    /// How many [`Interp::eval`] calls are open (limited by [`super::MAX_NESTING`]).
    pub(crate) depth: usize,
}

/// What [`build_fn`] produces: the result and the warnings.
pub(crate) type Built = (super::BuildResult, Vec<DslError>);

/// Builds one fusion fn.
pub(crate) fn build_fn(f: &FusionFn) -> Built {
    let mut it = Interp {
        f,
        fd: FusionDefinition::new(),
        env: HashMap::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
        dim_names: HashMap::new(),
        param_vals: Vec::new(),
        param_used: Vec::new(),
        invalid_seen: false,
        depth: 0,
    };
    let params = it.declare_params();
    for stmt in &f.body {
        match stmt {
            Stmt::Let { pat, init, .. } => {
                let v = it.eval(init);
                it.bind(pat, v);
            }
            Stmt::Expr(e) => {
                it.eval(e);
            }
        }
    }
    let outputs = it.outputs();
    for (i, p) in f.params.iter().enumerate() {
        if !it.param_used[i] && !p.name.text.starts_with('_') {
            it.warnings.push(
                DslError::warning(p.name.span, format!("unused input `{}`", p.name.text))
                    .with_hint(format!("it stays a fusion input; prefix it with an underscore (`_{}`) if that is intended", p.name.text)),
            );
        }
    }
    let Interp {
        fd,
        errors,
        warnings,
        invalid_seen,
        ..
    } = it;
    if invalid_seen {
        // Constructs reported by the parser poisoned values; anything more (a missing
        // output, an unused input) would be a consequence, not news.
        return (Err(errors), Vec::new());
    }
    if !errors.is_empty() {
        return (Err(errors), warnings);
    }
    let result = match fd.finish() {
        Ok(fusion) => Ok((
            fusion,
            Signature {
                name: f.name.text.clone(),
                docs: f.docs.clone(),
                params,
                outputs,
                returns_tuple: f.ret.tuple,
            },
        )),
        Err(e) => Err(vec![DslError::new(f.span, e.to_string())]),
    };
    (result, warnings)
}

impl Interp<'_> {
    /// Reports names that cannot name a value.
    pub(crate) fn check_binding_name(&mut self, name: &Name) {
        if DataType::from_name(&name.text).is_some() {
            self.errors.push(
                DslError::new(
                    name.span,
                    format!("`{}` is a dtype name and cannot name a value", name.text),
                )
                .with_hint("choose another name"),
            );
        }
    }

    fn bind(&mut self, pat: &Pat, value: Value) {
        match pat {
            Pat::Name(n) => {
                self.check_binding_name(n);
                self.env
                    .insert(n.text.clone(), Binding { value, param: None });
            }
            Pat::Wild(_) => {}
            Pat::Tuple(pats, span) => match value {
                Value::Tuple(vs) if vs.len() == pats.len() => {
                    for (p, v) in pats.iter().zip(vs) {
                        self.bind(p, v);
                    }
                }
                Value::Poison => {
                    for p in pats {
                        self.bind(p, Value::Poison);
                    }
                }
                other => {
                    let found = match &other {
                        Value::Tuple(vs) => format!("a tuple of {} values", vs.len()),
                        Value::Tensor(_) => "a tensor".to_string(),
                        _ => "a scalar".to_string(),
                    };
                    self.errors.push(
                        DslError::new(*span, format!("this pattern takes a tuple of {} values, found {found}", pats.len()))
                            .with_hint("var_mean returns (var, mean) and welford returns (mean, var_sum, count)"),
                    );
                    for p in pats {
                        self.bind(p, Value::Poison);
                    }
                }
            },
        }
    }

    /// Wraps a fusion value as a language value.
    pub(crate) fn wrap(&self, v: ValId) -> Value {
        match self.fd.fusion().get_val(v) {
            Some(val) if val.is_tensor() => Value::Tensor(v),
            Some(_) => Value::Scalar(v),
            None => Value::Poison,
        }
    }

    /// The fusion value of a language value; reports tuples, passes poison silently.
    pub(crate) fn expect_val(&mut self, v: Value, span: SpanRange) -> Option<ValId> {
        match v {
            Value::Tensor(v) | Value::Scalar(v) => Some(v),
            Value::Poison => None,
            Value::Tuple(vs) => {
                self.errors.push(
                    DslError::new(span, format!("expected a tensor or scalar, found a tuple of {} values", vs.len()))
                        .with_hint("destructure it first: let (var, mean) = x.var_mean([1]); or take one element with `.0`"),
                );
                None
            }
        }
    }

    /// Reports a builder error at `span`, with a hint for the common cases.
    pub(crate) fn builder_error(&mut self, e: Error, span: SpanRange) -> Value {
        let hint = match &e {
            Error::DType { expected, .. } => {
                let to = if expected.contains("floating") {
                    "f32"
                } else if expected.contains("integer") {
                    "i64"
                } else if expected.contains("bool") {
                    "bool"
                } else {
                    "f32"
                };
                Some(format!("convert with a cast, e.g. `x as {to}`"))
            }
            Error::AxisOutOfRange { .. } => Some("axes count from 0; negative axes count from the end (-1 is the last dim)".into()),
            Error::Shape { .. } => Some("broadcasting aligns dims from the right; insert size-1 dims with unsqueeze or broadcast".into()),
            _ => None,
        };
        self.errors
            .push(DslError::new(span, e.to_string()).with_hint_opt(hint));
        Value::Poison
    }

    /// Makes a constant from a literal.
    fn constant(&mut self, lit: &Lit, span: SpanRange) -> Value {
        let v = match *lit {
            Lit::Bool(b) => self.fd.constant(b),
            Lit::Float { value, dtype: None } => self.fd.constant(value),
            Lit::Float {
                value,
                dtype: Some(d),
            } => self.fd.constant_of(value, d),
            Lit::Int { value, dtype } => {
                let d = dtype.unwrap_or(DataType::I64);
                let fits = match d {
                    DataType::I32 => i32::try_from(value).is_ok(),
                    _ => i64::try_from(value).is_ok(),
                };
                if !fits {
                    self.errors.push(DslError::new(
                        span,
                        format!("integer literal {value} is out of range for {d}"),
                    ));
                    return Value::Poison;
                }
                match dtype {
                    None => self.fd.constant(value as i64),
                    Some(d) => self.fd.constant_of(value as i64, d),
                }
            }
        };
        Value::Scalar(v)
    }

    /// Evaluates an expression, appending the expressions it computes.
    pub(crate) fn eval(&mut self, e: &Expr) -> Value {
        if let Err(err) = super::depth::check_eval(self.depth, e.span) {
            self.errors.push(err);
            return Value::Poison;
        }
        self.depth += 1;
        let v = self.eval_kind(e);
        self.depth -= 1;
        v
    }

    fn eval_kind(&mut self, e: &Expr) -> Value {
        match &e.kind {
            ExprKind::Invalid => {
                self.invalid_seen = true;
                Value::Poison
            }
            ExprKind::Var(name) => self.lookup_var(name, e.span),
            ExprKind::Lit(lit) => self.constant(lit, e.span),
            ExprKind::DType(d) => {
                self.errors.push(
                    DslError::new(e.span, format!("`{d}` is a dtype, not a value")).with_hint(
                        "dtypes appear after `as` or as an op argument, e.g. full([4], 0.0, f32)",
                    ),
                );
                Value::Poison
            }
            ExprKind::Unary { op, expr } => {
                let v = self.eval(expr);
                let Some(x) = self.expect_val(v, expr.span) else {
                    return Value::Poison;
                };
                let d = self.fd.fusion().val(x).dtype;
                let r = match op {
                    UnOp::Neg => self.fd.neg(x),
                    UnOp::Not if d == DataType::Bool => self.fd.logical_not(x),
                    UnOp::Not if d.is_int() => self.fd.bitwise_not(x),
                    UnOp::Not => {
                        self.errors.push(
                            DslError::new(
                                e.span,
                                format!("`!` needs a bool or integer operand, found {d}"),
                            )
                            .with_hint("compare instead (`x == 0.0`) or call logical_not(x)"),
                        );
                        return Value::Poison;
                    }
                };
                self.result(r, e.span)
            }
            ExprKind::Binary {
                op,
                op_span,
                lhs,
                rhs,
            } => {
                let (a, b) = (self.eval(lhs), self.eval(rhs));
                let (Some(a), Some(b)) =
                    (self.expect_val(a, lhs.span), self.expect_val(b, rhs.span))
                else {
                    return Value::Poison;
                };
                if !self.check_named(&[a, b], *op_span, op.builder_op().name()) {
                    return Value::Poison;
                }
                let r = self.fd.binary(op.builder_op(), a, b);
                self.result(r, *op_span)
            }
            ExprKind::Cast { expr, dtype, .. } => {
                let v = self.eval(expr);
                let Some(x) = self.expect_val(v, expr.span) else {
                    return Value::Poison;
                };
                let r = self.fd.cast(x, *dtype);
                self.result(r, e.span)
            }
            ExprKind::Call {
                func,
                receiver,
                args,
            } => self.call(func, receiver.as_deref(), args, e.span),
            ExprKind::Tuple(elems) => Value::Tuple(elems.iter().map(|x| self.eval(x)).collect()),
            ExprKind::Field { expr, index } => match self.eval(expr) {
                Value::Tuple(vs) => match vs.get(*index) {
                    Some(v) => v.clone(),
                    None => {
                        self.errors.push(DslError::new(
                            e.span,
                            format!(
                                "index {index} is out of range for a tuple of {} values",
                                vs.len()
                            ),
                        ));
                        Value::Poison
                    }
                },
                Value::Poison => Value::Poison,
                _ => {
                    self.errors.push(DslError::new(e.span, format!("`.{index}` applies to tuples (from var_mean or welford), found a single value")));
                    Value::Poison
                }
            },
            ExprKind::Array(_) => {
                self.errors.push(
                    DslError::new(e.span, "an array is not a value")
                        .with_hint("arrays are op arguments: axes ([1, -1]), sizes, masks or a list of tensors for cat"),
                );
                Value::Poison
            }
            ExprKind::Range { .. } => {
                self.errors.push(
                    DslError::new(e.span, "a range is not a value")
                        .with_hint("ranges are the arguments of slice: x.slice([.., 1..n])"),
                );
                Value::Poison
            }
        }
    }

    /// Wraps a builder result, reporting an error at `span`.
    pub(crate) fn result(&mut self, r: crate::error::Result<ValId>, span: SpanRange) -> Value {
        match r {
            Ok(v) => self.wrap(v),
            Err(e) => self.builder_error(e, span),
        }
    }

    fn lookup_var(&mut self, name: &str, span: SpanRange) -> Value {
        if let Some(b) = self.env.get(name) {
            if let Some(p) = b.param {
                self.param_used[p] = true;
            }
            return b.value.clone();
        }
        let hint = if lookup(name).is_some() {
            Some(format!(
                "`{name}` is an op: call it, e.g. `{name}(x)` or `x.{name}()`"
            ))
        } else {
            closest(name, self.env.keys().map(String::as_str))
                .map(|s| format!("did you mean `{s}`?"))
        };
        self.errors
            .push(DslError::new(span, format!("unknown variable `{name}`")).with_hint_opt(hint));
        Value::Poison
    }
}
