//! Outputs: the tail expression becomes the fusion's outputs (in place where it says
//! `inplace(value, input)`), checked against the declared return type.

use super::ast::{DimKind, Expr, ExprKind, TensorType};
use super::build::{Interp, Value};
use super::error::{DslError, SpanRange};
use super::params::dim_sig;
use super::signature::{OutputSig, TensorSig};
use crate::ir::{IterKind, ValId};

impl Interp<'_> {
    /// Evaluates the tail and adds the outputs.
    pub(crate) fn outputs(&mut self) -> Vec<OutputSig> {
        let f = self.f;
        let Some(tail) = &f.tail else {
            self.errors.push(
                DslError::new(
                    f.body_end,
                    "the body must end with the fusion's output (an expression without `;`)",
                )
                .with_hint("end the body with the returned value, e.g. `y` or `(y, z)`"),
            );
            return Vec::new();
        };
        let entries: Vec<&Expr> = match &tail.kind {
            ExprKind::Tuple(elems) => elems.iter().collect(),
            _ => vec![tail],
        };
        // (value, in-place target, span) per output.
        let mut outs: Vec<(Option<ValId>, Option<ValId>, SpanRange)> = Vec::new();
        for entry in &entries {
            let (value, alias) = match &entry.kind {
                ExprKind::Call {
                    func,
                    receiver,
                    args,
                } if func.text == "inplace" => {
                    let mut all: Vec<&Expr> = receiver.iter().map(|r| &**r).collect();
                    all.extend(args.iter().map(|a| &a.value));
                    if all.len() != 2 || args.iter().any(|a| a.name.is_some()) {
                        self.errors.push(
                            DslError::new(
                                entry.span,
                                format!(
                                    "inplace takes 2 arguments (value, input), found {}",
                                    all.len()
                                ),
                            )
                            .with_hint("write inplace(y, x) to store y into the input x"),
                        );
                        outs.push((None, None, entry.span));
                        continue;
                    }
                    let v = self.eval(all[0]);
                    let target = self.eval(all[1]);
                    let alias = match target {
                        Value::Tensor(t) if self.fd.fusion().input_position(t).is_some() => Some(t),
                        Value::Poison => None,
                        _ => {
                            self.errors.push(
                                DslError::new(all[1].span, "the second argument of inplace must be a tensor parameter")
                                    .with_hint("name the input tensor the output is stored into (a `let` that shadows the parameter hides it)"),
                            );
                            None
                        }
                    };
                    (v, alias)
                }
                _ => (self.eval(entry), None),
            };
            match value {
                Value::Tuple(vs) if entries.len() == 1 => {
                    for v in vs {
                        let v = self.expect_val(v, entry.span);
                        outs.push((v, None, entry.span));
                    }
                }
                other => {
                    let v = self.expect_val(other, entry.span);
                    outs.push((v, alias, entry.span));
                }
            }
        }
        let declared = &f.ret.types;
        if !f.ret.valid {
            self.invalid_seen = true;
        }
        if f.ret.valid && outs.len() != declared.len() {
            self.errors.push(
                DslError::new(
                    tail.span,
                    format!(
                        "the body returns {} value(s) but the return type declares {}",
                        outs.len(),
                        declared.len()
                    ),
                )
                .with_hint(
                    "return one value per declared tensor type, as a tuple when there are several",
                ),
            );
        }
        let mut sigs = Vec::new();
        for (i, (v, alias, span)) in outs.into_iter().enumerate() {
            let decl = declared.get(i);
            let Some(v) = v else { continue };
            let val = self.fd.fusion().val(v);
            if !val.is_tensor() && f.ret.valid {
                self.errors.push(
                    DslError::new(
                        span,
                        format!(
                            "fusion outputs are tensors, found a scalar of type {}",
                            val.dtype
                        ),
                    )
                    .with_hint("return a tensor, e.g. full([1], s, f32)"),
                );
                continue;
            }
            if !val.is_tensor() {
                continue;
            }
            if let Some(decl) = decl.filter(|_| f.ret.valid) {
                if !self.check_return(v, decl, span) {
                    continue;
                }
            }
            let r = match alias {
                Some(a) => self.fd.add_output_alias(v, a),
                None => self.fd.add_output(v),
            };
            if let Err(e) = r {
                self.builder_error(e, span);
                continue;
            }
            let alias_of = alias.and_then(|a| self.param_vals.iter().position(|p| *p == Some(a)));
            let ty = match decl {
                Some(d) => TensorSig {
                    dtype: d.dtype,
                    dims: d.dims.iter().map(|x| dim_sig(&x.kind, false)).collect(),
                    expanded: Vec::new(),
                    contiguity: Vec::new(),
                    stride_order: Vec::new(),
                },
                None => TensorSig {
                    dtype: self.fd.fusion().val(v).dtype,
                    dims: Vec::new(),
                    expanded: Vec::new(),
                    contiguity: Vec::new(),
                    stride_order: Vec::new(),
                },
            };
            sigs.push(OutputSig { ty, alias_of });
        }
        sigs
    }

    /// Checks a returned tensor against its declared type.
    fn check_return(&mut self, v: ValId, decl: &TensorType, span: SpanRange) -> bool {
        let fusion = self.fd.fusion();
        let dtype = fusion.val(v).dtype;
        let shape = fusion
            .tensor_type(v)
            .map(|t| t.shape_dims())
            .unwrap_or_default();
        if dtype != decl.dtype {
            self.errors.push(
                DslError::new(
                    span,
                    format!(
                        "returns {dtype} but the return type declares {}",
                        decl.dtype
                    ),
                )
                .with_hint(format!(
                    "cast the result (`... as {}`) or declare {dtype}",
                    decl.dtype
                )),
            );
            return false;
        }
        if shape.len() != decl.dims.len() {
            self.errors.push(DslError::new(
                span,
                format!(
                    "returns a tensor of rank {} ({}) but the return type declares rank {}",
                    shape.len(),
                    self.describe_shape(&shape),
                    decl.dims.len()
                ),
            ));
            return false;
        }
        let mut ok = true;
        for (i, (d, actual)) in decl.dims.iter().zip(&shape).enumerate() {
            let broadcast = actual.kind == IterKind::Broadcast;
            let konst = actual.extent.as_const();
            let name = self.dim_name(&actual.extent);
            let bad = match &d.kind {
                DimKind::Any | DimKind::Invalid => false,
                DimKind::Size(1) => !(broadcast || konst == Some(1)),
                DimKind::Size(n) => broadcast || konst.is_some_and(|k| k != *n),
                DimKind::Named(n) => broadcast || name.as_ref().is_some_and(|m| m != n),
            };
            if bad {
                let want = match &d.kind {
                    DimKind::Size(1) => "1 (broadcast)".to_string(),
                    DimKind::Size(n) => n.to_string(),
                    DimKind::Named(n) => n.clone(),
                    DimKind::Any | DimKind::Invalid => "_".to_string(),
                };
                self.errors.push(
                    DslError::new(span, format!("dim {i} of the result is {} but the return type declares {want}", self.describe_dim(actual)))
                        .with_hint("fix the declared dims, or use `_` for a size the signature does not pin down"),
                );
                ok = false;
            }
        }
        ok
    }
}
