//! Parameters: each becomes one fusion input, in order, with its layout; named dims are
//! recorded for the symbolic checks (see `dims`).

use std::collections::HashSet;

use super::ast::{ContiguitySpec, DimKind, ParamType, TensorType};
use super::build::{Binding, Interp, Value};
use super::error::DslError;
use super::signature::{DimSig, ParamKind, ParamSig, TensorSig};
use crate::builder::{Contiguity, TensorSpec};
use crate::dtype::DataType;
use crate::error::Error;

/// The signature form of a declared dim.
pub(crate) fn dim_sig(kind: &DimKind, static_sizes: bool) -> DimSig {
    match kind {
        DimKind::Any | DimKind::Invalid => DimSig::Any,
        DimKind::Named(n) => DimSig::Named(n.clone()),
        DimKind::Size(1) if !static_sizes => DimSig::Broadcast,
        DimKind::Size(n) => DimSig::Static(*n),
    }
}

impl Interp<'_> {
    /// Declares every parameter as a fusion input, in order.
    pub(crate) fn declare_params(&mut self) -> Vec<ParamSig> {
        let f = self.f;
        let mut seen = HashSet::new();
        let mut sigs = Vec::new();
        let mut known_dims = HashSet::new();
        for (i, p) in f.params.iter().enumerate() {
            let duplicate = !seen.insert(p.name.text.clone());
            if duplicate {
                self.errors.push(
                    DslError::new(
                        p.name.span,
                        format!("parameter `{}` is declared twice", p.name.text),
                    )
                    .with_hint("rename one of them"),
                );
            }
            if let ParamType::Tensor(t) = &p.ty {
                for d in &t.dims {
                    if let DimKind::Named(n) = &d.kind {
                        known_dims.insert(n.clone());
                    }
                }
            }
            self.check_binding_name(&p.name);
            let (value, kind) = match &p.ty {
                ParamType::Scalar { dtype, .. } => match self.fd.define_scalar(*dtype) {
                    Ok(v) => (Value::Scalar(v), ParamKind::Scalar(*dtype)),
                    Err(e) => {
                        self.errors.push(DslError::new(p.span, e.to_string()));
                        (Value::Poison, ParamKind::Scalar(*dtype))
                    }
                },
                ParamType::Invalid(_) => {
                    self.invalid_seen = true;
                    (Value::Poison, ParamKind::Scalar(DataType::F32))
                }
                ParamType::Tensor(t) if !t.valid => {
                    self.invalid_seen = true;
                    (Value::Poison, ParamKind::Scalar(t.dtype))
                }
                ParamType::Tensor(t) => self.declare_tensor(t),
            };
            // A duplicate still becomes an input (the count of inputs stays right) but its
            // name is poisoned, so uses of it report nothing more.
            let value = if duplicate { Value::Poison } else { value };
            self.param_vals.push(match value {
                Value::Tensor(v) | Value::Scalar(v) => Some(v),
                _ => None,
            });
            self.param_used.push(false);
            self.env.insert(
                p.name.text.clone(),
                Binding {
                    value,
                    param: Some(i),
                },
            );
            sigs.push(ParamSig {
                name: p.name.text.clone(),
                kind,
            });
        }
        for t in &f.ret.types {
            for d in &t.dims {
                if let DimKind::Named(n) = &d.kind {
                    if !known_dims.contains(n) {
                        self.errors.push(
                            DslError::new(d.span, format!("unknown dim name `{n}`: named dims are introduced by parameters"))
                                .with_hint("use `_` for a size that no parameter names"),
                        );
                    }
                }
            }
        }
        sigs
    }

    fn declare_tensor(&mut self, t: &TensorType) -> (Value, ParamKind) {
        let layout = t.layout.clone().unwrap_or_default();
        let layout_span = layout.span.unwrap_or(t.span);
        let rank = t.dims.len();
        let sizes: Vec<i64> = t
            .dims
            .iter()
            .map(|d| match d.kind {
                DimKind::Any | DimKind::Named(_) | DimKind::Invalid => -1,
                DimKind::Size(n) => n,
            })
            .collect();
        let mut expanded = vec![false; rank];
        let mut ok = true;
        for &e in &layout.expanded {
            if e >= rank {
                self.errors.push(DslError::new(
                    layout_span,
                    format!("expanded dim {e} is out of range for a tensor of rank {rank}"),
                ));
                ok = false;
            } else if sizes[e] == 1 && !layout.static_sizes {
                self.errors.push(
                    DslError::new(
                        t.dims[e].span,
                        format!("dim {e} is a broadcast dim (`1`) and cannot also be expanded"),
                    )
                    .with_hint(
                        "an expanded dim has a real size: write `_`, a name or a static size",
                    ),
                );
                ok = false;
            } else {
                expanded[e] = true;
            }
        }
        let contiguity = match &layout.contiguity {
            None => Contiguity::All(true),
            Some(ContiguitySpec::All(b)) => Contiguity::All(*b),
            Some(ContiguitySpec::PerDim(v)) => Contiguity::PerDim(v.clone()),
        };
        let mut spec = TensorSpec::new(t.dtype, &sizes)
            .contiguity(contiguity)
            .expanded(&expanded)
            .static_sizes(layout.static_sizes);
        if let Some(order) = &layout.stride_order {
            spec = spec.stride_order(order);
        }
        let dims: Vec<DimSig> = t
            .dims
            .iter()
            .map(|d| dim_sig(&d.kind, layout.static_sizes))
            .collect();
        let mut sig = TensorSig {
            dtype: t.dtype,
            dims,
            expanded,
            contiguity: Vec::new(),
            stride_order: Vec::new(),
        };
        if !ok {
            return (Value::Poison, ParamKind::Tensor(sig));
        }
        match self.fd.define_tensor_spec(spec) {
            Ok(v) => {
                for (axis, d) in t.dims.iter().enumerate() {
                    if let DimKind::Named(n) = &d.kind {
                        self.dim_names.insert((v, axis as u32), n.clone());
                    }
                }
                if let Some(tt) = self.fd.fusion().tensor_type(v) {
                    sig.contiguity = tt.contiguity.clone();
                    sig.stride_order = tt.stride_order.clone();
                }
                (Value::Tensor(v), ParamKind::Tensor(sig))
            }
            Err(e) => {
                let hint = match &e {
                    Error::InvalidArgument { reason, .. } if reason.contains("contiguity") => {
                        Some("in `contiguity = [...]` write `_` for broadcast and expanded dims, true/false for the others".to_string())
                    }
                    _ => None,
                };
                self.errors
                    .push(DslError::new(layout_span, e.to_string()).with_hint_opt(hint));
                (Value::Poison, ParamKind::Tensor(sig))
            }
        }
    }
}
