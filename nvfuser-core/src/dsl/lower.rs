//! Lowering a syn block into the language's AST, rejecting what the language lacks.
//!
//! syn parses the body as ordinary Rust; this pass keeps the subset the language has and
//! reports everything else with a message that says what to write instead. A rejected
//! construct becomes [`ExprKind::Invalid`] so checking continues past it. Negation of a
//! literal folds into the literal here (`-1.0` is a constant, not a `neg` expression).

use super::ast::{Arg, BinOp, Expr, ExprKind, Lit, Name, Pat, Stmt, UnOp};
use super::error::{DslError, SpanRange};
use super::ops::closest;
use crate::dtype::DataType;

/// The statements and the tail expression of a body.
pub(crate) fn lower_block(
    block: &syn::Block,
    errors: &mut Vec<DslError>,
) -> (Vec<Stmt>, Option<Expr>) {
    let mut stmts = Vec::new();
    let mut tail = None;
    let n = block.stmts.len();
    for (i, stmt) in block.stmts.iter().enumerate() {
        match stmt {
            syn::Stmt::Local(local) => {
                if let Some(s) = lower_local(local, errors) {
                    stmts.push(s);
                }
            }
            syn::Stmt::Expr(e, semi) => {
                let e = lower_expr(e, errors);
                if semi.is_none() && i + 1 == n {
                    tail = Some(e);
                } else {
                    stmts.push(Stmt::Expr(e));
                }
            }
            syn::Stmt::Item(item) => errors.push(
                DslError::new(SpanRange::of(item), "items (fn, use, const, ...) are not allowed in a fusion body")
                    .with_hint("define each fusion as its own fn in the fusion! block; use `let` for intermediate values"),
            ),
            syn::Stmt::Macro(m) => errors.push(macro_error(SpanRange::of(m))),
        }
    }
    (stmts, tail)
}

fn macro_error(span: SpanRange) -> DslError {
    DslError::new(span, "macros are not supported in a fusion body").with_hint(
        "write the tensor expression directly; a fusion body is `let` statements over ops",
    )
}

fn lower_local(local: &syn::Local, errors: &mut Vec<DslError>) -> Option<Stmt> {
    let span = SpanRange::of(local);
    let pat = lower_pat(&local.pat, errors);
    let Some(init) = &local.init else {
        errors.push(
            DslError::new(span, "`let` without a value is not supported")
                .with_hint("bind the value where it is computed: let y = ...;"),
        );
        return None;
    };
    if let Some((_, diverge)) = &init.diverge {
        errors.push(DslError::new(
            SpanRange::of(diverge),
            "`let ... else` is not supported",
        ));
    }
    let init = lower_expr(&init.expr, errors);
    Some(Stmt::Let { pat, init, span })
}

fn lower_pat(pat: &syn::Pat, errors: &mut Vec<DslError>) -> Pat {
    let span = SpanRange::of(pat);
    match pat {
        syn::Pat::Ident(p) => {
            if let Some(m) = &p.mutability {
                errors.push(
                    DslError::new(
                        SpanRange::of(m),
                        "`mut` is not supported: values in a fusion are immutable",
                    )
                    .with_hint("remove `mut` and shadow instead: let x = x + 1.0;"),
                );
            }
            if let Some(r) = &p.by_ref {
                errors.push(
                    DslError::new(SpanRange::of(r), "`ref` bindings are not supported")
                        .with_hint("remove `ref`"),
                );
            }
            if let Some((at, _)) = &p.subpat {
                errors.push(DslError::new(
                    SpanRange::of(at),
                    "`@` patterns are not supported",
                ));
            }
            Pat::Name(Name {
                text: p.ident.to_string(),
                span: SpanRange::of(&p.ident),
            })
        }
        syn::Pat::Wild(_) => Pat::Wild(span),
        syn::Pat::Tuple(t) => {
            Pat::Tuple(t.elems.iter().map(|p| lower_pat(p, errors)).collect(), span)
        }
        syn::Pat::Paren(p) => lower_pat(&p.pat, errors),
        syn::Pat::Type(t) => {
            errors.push(
                DslError::new(SpanRange::of(&t.ty), "type annotations on `let` are not supported")
                    .with_hint("remove the annotation: dtypes and shapes are inferred (cast with `as` to change a dtype)"),
            );
            lower_pat(&t.pat, errors)
        }
        _ => {
            errors.push(DslError::new(span, "unsupported pattern").with_hint(
                "bind a name (`let y = ...`) or a tuple of names (`let (var, mean) = ...`)",
            ));
            Pat::Wild(span)
        }
    }
}

fn invalid(span: SpanRange) -> Expr {
    Expr {
        kind: ExprKind::Invalid,
        span,
    }
}

fn unsupported(span: SpanRange, message: &str, hint: &str, errors: &mut Vec<DslError>) -> Expr {
    errors.push(DslError::new(span, message).with_hint(hint));
    invalid(span)
}

fn boxed(e: &syn::Expr, errors: &mut Vec<DslError>) -> Box<Expr> {
    Box::new(lower_expr(e, errors))
}

/// Lowers one expression.
pub(crate) fn lower_expr(e: &syn::Expr, errors: &mut Vec<DslError>) -> Expr {
    let span = SpanRange::of(e);
    let _level = match super::depth::enter_lower(span) {
        Ok(level) => level,
        Err(err) => {
            errors.push(err);
            return invalid(span);
        }
    };
    let kind = match e {
        syn::Expr::Lit(l) => match lower_lit(&l.lit, errors) {
            Some(lit) => ExprKind::Lit(lit),
            None => ExprKind::Invalid,
        },
        syn::Expr::Path(p) => return lower_path(p, span, errors),
        syn::Expr::Paren(p) => return lower_expr(&p.expr, errors),
        syn::Expr::Group(g) => return lower_expr(&g.expr, errors),
        syn::Expr::Unary(u) => return lower_unary(u, span, errors),
        syn::Expr::Binary(b) => {
            let op_span = SpanRange::of(&b.op);
            let Some(op) = bin_op(&b.op) else {
                return unsupported(
                    span,
                    "compound assignment is not supported: values in a fusion are immutable",
                    "shadow instead: let x = x + y;",
                    errors,
                );
            };
            ExprKind::Binary {
                op,
                op_span,
                lhs: boxed(&b.left, errors),
                rhs: boxed(&b.right, errors),
            }
        }
        syn::Expr::Cast(c) => return lower_cast(c, span, errors),
        syn::Expr::Call(c) => {
            let func = match &*c.func {
                syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                    let ident = p.path.get_ident().expect("checked");
                    Name {
                        text: ident.to_string(),
                        span: SpanRange::of(ident),
                    }
                }
                other => {
                    return unsupported(
                        SpanRange::of(other),
                        "only ops can be called, by their plain name",
                        "write `exp(x)` or `x.exp()`; paths like `nvfuser::exp` are not needed",
                        errors,
                    )
                }
            };
            ExprKind::Call {
                func,
                receiver: None,
                args: c.args.iter().map(|a| lower_arg(a, errors)).collect(),
            }
        }
        syn::Expr::MethodCall(m) => {
            if let Some(t) = &m.turbofish {
                errors.push(DslError::new(SpanRange::of(t), "turbofish (`::<...>`) is not supported on ops").with_hint("pass a dtype as an argument instead, e.g. full([4], 0.0, f32)"));
            }
            ExprKind::Call {
                func: Name {
                    text: m.method.to_string(),
                    span: SpanRange::of(&m.method),
                },
                receiver: Some(boxed(&m.receiver, errors)),
                args: m.args.iter().map(|a| lower_arg(a, errors)).collect(),
            }
        }
        syn::Expr::Array(a) => ExprKind::Array(a.elems.iter().map(|e| lower_expr(e, errors)).collect()),
        syn::Expr::Tuple(t) => {
            if t.elems.is_empty() {
                return unsupported(span, "`()` is not a value in a fusion", "return one tensor or a tuple of tensors", errors);
            }
            ExprKind::Tuple(t.elems.iter().map(|e| lower_expr(e, errors)).collect())
        }
        syn::Expr::Range(r) => {
            if let syn::RangeLimits::Closed(c) = &r.limits {
                errors.push(DslError::new(SpanRange::of(c), "inclusive ranges (`..=`) are not supported").with_hint("use a half-open range `a..b` (b excluded)"));
            }
            ExprKind::Range {
                start: r.start.as_ref().map(|s| boxed(s, errors)),
                end: r.end.as_ref().map(|s| boxed(s, errors)),
            }
        }
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Unnamed(i) => ExprKind::Field {
                expr: boxed(&f.base, errors),
                index: i.index as usize,
            },
            syn::Member::Named(n) => {
                return unsupported(
                    SpanRange::of(n),
                    "field access is not supported",
                    "ops are called as methods with parentheses, e.g. `x.size(0)`; tuples are indexed `.0`",
                    errors,
                )
            }
        },
        _ => return lower_unsupported(e, span, errors),
    };
    Expr { kind, span }
}

/// Lowers `-x` and `!x`; the negation of a literal folds into the literal.
fn lower_unary(u: &syn::ExprUnary, span: SpanRange, errors: &mut Vec<DslError>) -> Expr {
    let op = match u.op {
        syn::UnOp::Neg(_) => UnOp::Neg,
        syn::UnOp::Not(_) => UnOp::Not,
        _ => {
            return unsupported(
                span,
                "dereferencing is not supported",
                "tensors are values: write `x`, not `*x`",
                errors,
            );
        }
    };
    let inner = lower_expr(&u.expr, errors);
    if let (UnOp::Neg, ExprKind::Lit(lit)) = (op, &inner.kind) {
        match lit {
            Lit::Int { value, dtype } => {
                return Expr {
                    kind: ExprKind::Lit(Lit::Int {
                        value: -value,
                        dtype: *dtype,
                    }),
                    span,
                }
            }
            Lit::Float { value, dtype } => {
                return Expr {
                    kind: ExprKind::Lit(Lit::Float {
                        value: -value,
                        dtype: *dtype,
                    }),
                    span,
                }
            }
            Lit::Bool(_) => {}
        }
    }
    Expr {
        kind: ExprKind::Unary {
            op,
            expr: Box::new(inner),
        },
        span,
    }
}

/// Lowers `x as dtype`; the target must be a plain dtype name.
fn lower_cast(c: &syn::ExprCast, span: SpanRange, errors: &mut Vec<DslError>) -> Expr {
    let expr = boxed(&c.expr, errors);
    let dtype_span = SpanRange::of(&c.ty);
    let dtype = match &*c.ty {
        syn::Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            dtype_of(p.path.get_ident().expect("checked"), errors)
        }
        _ => {
            errors.push(
                DslError::new(dtype_span, "`as` casts to a dtype").with_hint(
                    "write `x as f32` (bool, i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2)",
                ),
            );
            None
        }
    };
    let kind = match dtype {
        Some(dtype) => ExprKind::Cast {
            expr,
            dtype,
            dtype_span,
        },
        None => ExprKind::Invalid,
    };
    Expr { kind, span }
}

/// Lowers the Rust expressions the language lacks: each is reported with what to write
/// instead (after `?` and `&`, which are reported, the operand is still lowered).
fn lower_unsupported(e: &syn::Expr, span: SpanRange, errors: &mut Vec<DslError>) -> Expr {
    match e {
        syn::Expr::Assign(_) => {
            unsupported(
                span,
                "assignment is not supported: values in a fusion are immutable",
                "bind a new value instead: let x = ...; (shadowing is allowed)",
                errors,
            )
        }
        syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) | syn::Expr::Break(_) | syn::Expr::Continue(_) => {
            unsupported(
                span,
                "loops are not supported: a fusion body is straight-line dataflow",
                "express iteration with tensor ops: reductions (x.sum([1])), broadcasts, elementwise ops",
                errors,
            )
        }
        syn::Expr::If(_) => {
            unsupported(
                span,
                "`if` is not supported: a fusion body has no control flow",
                "select elementwise with where_(cond, a, b)",
                errors,
            )
        }
        syn::Expr::Match(_) => {
            unsupported(
                span,
                "`match` is not supported: a fusion body has no control flow",
                "select elementwise with where_(cond, a, b)",
                errors,
            )
        }
        syn::Expr::Closure(_) => {
            unsupported(
                span,
                "closures are not supported in a fusion body",
                "write the expression inline, or define another fn in the fusion! block",
                errors,
            )
        }
        syn::Expr::Try(t) => {
            errors.push(
                DslError::new(SpanRange::of(&t.question_token), "`?` is not supported: ops are checked when the fusion is built")
                    .with_hint("remove the `?`"),
            );
            lower_expr(&t.expr, errors)
        }
        syn::Expr::Macro(m) => {
            errors.push(macro_error(SpanRange::of(m)));
            invalid(span)
        }
        syn::Expr::Return(_) => {
            unsupported(
                span,
                "`return` is not supported",
                "the last expression of the body (without a semicolon) is the fusion's output",
                errors,
            )
        }
        syn::Expr::Reference(r) => {
            errors.push(
                DslError::new(SpanRange::of(&r.and_token), "references are not supported: tensors are values in a fusion")
                    .with_hint("write `x` instead of `&x`"),
            );
            lower_expr(&r.expr, errors)
        }
        syn::Expr::Index(_) => {
            unsupported(
                span,
                "indexing is not supported",
                "use x.select(axis, i), x.slice([..]) or x.index_select(axis, indices)",
                errors,
            )
        }
        syn::Expr::Block(_) | syn::Expr::Unsafe(_) | syn::Expr::Async(_) | syn::Expr::Const(_) | syn::Expr::TryBlock(_) => {
            unsupported(span, "blocks are not supported in a fusion body", "use `let` statements", errors)
        }
        syn::Expr::Repeat(_) => {
            unsupported(span, "array repeat expressions (`[x; n]`) are not supported", "write the elements out", errors)
        }
        syn::Expr::Infer(_) => {
            unsupported(span, "`_` is not a value", "`_` is allowed in patterns (let _ = ...) and in dims", errors)
        }
        _ => {
            unsupported(
                span,
                "this expression is not supported in a fusion body",
                "a fusion body has let statements, operators, `as` casts, literals and op calls",
                errors,
            )
        }
    }
}

fn lower_arg(e: &syn::Expr, errors: &mut Vec<DslError>) -> Arg {
    if let syn::Expr::Assign(a) = e {
        if let syn::Expr::Path(p) = &*a.left {
            if let Some(ident) = p.path.get_ident() {
                return Arg {
                    name: Some(Name {
                        text: ident.to_string(),
                        span: SpanRange::of(ident),
                    }),
                    value: lower_expr(&a.right, errors),
                };
            }
        }
    }
    Arg {
        name: None,
        value: lower_expr(e, errors),
    }
}

fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::Add(_) => BinOp::Add,
        B::Sub(_) => BinOp::Sub,
        B::Mul(_) => BinOp::Mul,
        B::Div(_) => BinOp::Div,
        B::Rem(_) => BinOp::Rem,
        B::And(_) => BinOp::And,
        B::Or(_) => BinOp::Or,
        B::BitXor(_) => BinOp::BitXor,
        B::BitAnd(_) => BinOp::BitAnd,
        B::BitOr(_) => BinOp::BitOr,
        B::Shl(_) => BinOp::Shl,
        B::Shr(_) => BinOp::Shr,
        B::Eq(_) => BinOp::Eq,
        B::Lt(_) => BinOp::Lt,
        B::Le(_) => BinOp::Le,
        B::Ne(_) => BinOp::Ne,
        B::Ge(_) => BinOp::Ge,
        B::Gt(_) => BinOp::Gt,
        _ => return None,
    })
}

/// A variable, a dtype name, or a typed constant path (`f32::NAN`, `i64::MAX`).
fn lower_path(p: &syn::ExprPath, span: SpanRange, errors: &mut Vec<DslError>) -> Expr {
    if p.qself.is_none() {
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            let kind = match DataType::from_name(&name) {
                Some(d) => ExprKind::DType(d),
                None => ExprKind::Var(name),
            };
            return Expr { kind, span };
        }
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if let [ty, c] = segs.as_slice() {
            if let Some(d) = DataType::from_name(ty) {
                let lit = match (d.is_float(), c.as_str()) {
                    (true, "NAN") => Some(Lit::Float {
                        value: f64::NAN,
                        dtype: Some(d),
                    }),
                    (true, "INFINITY") => Some(Lit::Float {
                        value: f64::INFINITY,
                        dtype: Some(d),
                    }),
                    (true, "NEG_INFINITY") => Some(Lit::Float {
                        value: f64::NEG_INFINITY,
                        dtype: Some(d),
                    }),
                    (false, "MAX") if d == DataType::I64 => Some(Lit::Int {
                        value: i64::MAX.into(),
                        dtype: Some(d),
                    }),
                    (false, "MIN") if d == DataType::I64 => Some(Lit::Int {
                        value: i64::MIN.into(),
                        dtype: Some(d),
                    }),
                    (false, "MAX") if d == DataType::I32 => Some(Lit::Int {
                        value: i32::MAX.into(),
                        dtype: Some(d),
                    }),
                    (false, "MIN") if d == DataType::I32 => Some(Lit::Int {
                        value: i32::MIN.into(),
                        dtype: Some(d),
                    }),
                    _ => None,
                };
                if let Some(lit) = lit {
                    // Typed constants are natural for f64/i64, like unsuffixed literals.
                    let lit = match lit {
                        Lit::Float {
                            value,
                            dtype: Some(DataType::F64),
                        } => Lit::Float { value, dtype: None },
                        Lit::Int {
                            value,
                            dtype: Some(DataType::I64),
                        } => Lit::Int { value, dtype: None },
                        other => other,
                    };
                    return Expr {
                        kind: ExprKind::Lit(lit),
                        span,
                    };
                }
            }
        }
    }
    unsupported(
        span,
        "paths are not supported in a fusion body",
        "use a variable or op name; typed constants are f32::NAN, f64::INFINITY, f32::NEG_INFINITY, i64::MAX, i32::MIN, ...",
        errors,
    )
}

fn lower_lit(lit: &syn::Lit, errors: &mut Vec<DslError>) -> Option<Lit> {
    let span = SpanRange::of(lit);
    let suffix_type = |suffix: &str, errors: &mut Vec<DslError>| -> Result<Option<DataType>, ()> {
        if suffix.is_empty() {
            return Ok(None);
        }
        match DataType::from_name(suffix) {
            Some(DataType::Bool) | None => {
                errors.push(
                    DslError::new(span, format!("unsupported literal type `{suffix}`"))
                        .with_hint("literal suffixes are i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2 (or none: `2` is i64, `2.0` is f64)"),
                );
                Err(())
            }
            Some(d) => Ok(Some(d)),
        }
    };
    match lit {
        syn::Lit::Int(i) => {
            let dtype = suffix_type(i.suffix(), errors).ok()?;
            let value: i128 = match i.base10_digits().parse() {
                Ok(v) => v,
                Err(_) => {
                    errors.push(DslError::new(span, "integer literal is too large"));
                    return None;
                }
            };
            Some(match dtype {
                Some(d) if d.is_float() => Lit::Float {
                    value: value as f64,
                    dtype: Some(d),
                },
                Some(DataType::I64) => Lit::Int { value, dtype: None },
                d => Lit::Int { value, dtype: d },
            })
        }
        syn::Lit::Float(f) => {
            let dtype = suffix_type(f.suffix(), errors).ok()?;
            if let Some(d) = dtype.filter(|d| !d.is_float()) {
                errors.push(
                    DslError::new(
                        span,
                        format!("a float literal cannot have the integer type `{d}`"),
                    )
                    .with_hint("write an integer literal, e.g. `2i32`"),
                );
                return None;
            }
            let value: f64 = f.base10_digits().parse().ok()?;
            Some(Lit::Float {
                value,
                dtype: dtype.filter(|d| *d != DataType::F64),
            })
        }
        syn::Lit::Bool(b) => Some(Lit::Bool(b.value)),
        syn::Lit::Str(_) | syn::Lit::ByteStr(_) | syn::Lit::CStr(_) => {
            errors.push(
                DslError::new(span, "string literals are not supported in a fusion")
                    .with_hint("literals are numbers (`2`, `0.5`, `1e-5f32`) and `true`/`false`"),
            );
            None
        }
        _ => {
            errors.push(
                DslError::new(span, "this literal type is not supported in a fusion")
                    .with_hint("literals are numbers (`2`, `0.5`, `1e-5f32`) and `true`/`false`"),
            );
            None
        }
    }
}

/// A dtype name, or an error with a suggestion.
pub(crate) fn dtype_of(ident: &syn::Ident, errors: &mut Vec<DslError>) -> Option<DataType> {
    let name = ident.to_string();
    if let Some(d) = DataType::from_name(&name) {
        return Some(d);
    }
    let hint = match closest(&name, DataType::ALL.iter().map(|d| d.name())) {
        Some(s) => format!("did you mean `{s}`?"),
        None => "the dtypes are bool, i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2".to_string(),
    };
    errors.push(
        DslError::new(SpanRange::of(ident), format!("unknown dtype `{name}`")).with_hint(hint),
    );
    None
}
