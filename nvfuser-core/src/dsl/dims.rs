//! Named dims: symbolic shape checking on top of the builder's.
//!
//! The IR knows an input dim only as `T0.size(1)`; the language lets a signature name it
//! (`x: Tensor<f32, [N, H]>`). Names are tracked beside the IR: a dim's name is the name
//! its extent traces back to (through `size(...)` scalars too). Two dims that meet in an
//! elementwise op (after right-aligned broadcasting) or in `cat` must not carry different
//! names: `[N, H] + [H]` is fine, `[N, H] + [M]` is an error, although the builder
//! (which only compares static sizes) would accept it. A named dim meeting a static size
//! or an unnamed dim is accepted: the run-time binding of the names checks it.

use super::build::Interp;
use super::error::{DslError, SpanRange};
use crate::ir::{Extent, IterDomain, IterKind, Op, ValId};

/// A shape with the name of each dim, if it has one.
type NamedShape = Vec<(Option<String>, IterDomain)>;

impl Interp<'_> {
    /// The name an extent traces back to, if any.
    pub(crate) fn dim_name(&self, e: &Extent) -> Option<String> {
        let mut e = e.clone();
        for _ in 0..64 {
            match e {
                Extent::Dim { tensor, axis } => {
                    return self.dim_names.get(&(tensor, axis)).cloned()
                }
                Extent::Scalar(v) => {
                    let fusion = self.fd.fusion();
                    let def = fusion.get_val(v)?.definition?;
                    let expr = fusion.expr(def);
                    let Op::Size { axis } = expr.op else {
                        return None;
                    };
                    let t = fusion.tensor_type(*expr.inputs.first()?)?;
                    e = t.shape().nth(axis)?.extent.clone();
                }
                _ => return None,
            }
        }
        None
    }

    /// A dim for messages: its name, size, `1 (broadcast)` or `_`.
    pub(crate) fn describe_dim(&self, d: &IterDomain) -> String {
        if d.kind == IterKind::Broadcast {
            return "1 (broadcast)".into();
        }
        if let Some(n) = self.dim_name(&d.extent) {
            return n;
        }
        match d.extent.as_const() {
            Some(c) => c.to_string(),
            None => "_".into(),
        }
    }

    /// A shape for messages: `[N, 4096, 1]`.
    pub(crate) fn describe_shape(&self, dims: &[IterDomain]) -> String {
        let parts: Vec<String> = dims
            .iter()
            .map(|d| match d.kind {
                IterKind::Broadcast => "1".into(),
                _ => self.describe_dim(d),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    fn named_shape(&self, v: ValId) -> Option<NamedShape> {
        let t = self.fd.fusion().tensor_type(v)?;
        Some(
            t.shape()
                .map(|d| (self.dim_name(&d.extent), d.clone()))
                .collect(),
        )
    }

    /// Checks the named dims of elementwise operands (aligned on the right). Reports a
    /// conflict at `span` and returns false.
    pub(crate) fn check_named(&mut self, operands: &[ValId], span: SpanRange, op: &str) -> bool {
        let shapes: Vec<(usize, NamedShape)> = operands
            .iter()
            .enumerate()
            .filter_map(|(i, &v)| self.named_shape(v).map(|s| (i, s)))
            .collect();
        let rank = shapes.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        for pos in 0..rank {
            let mut first: Option<(usize, usize, String)> = None;
            for (i, s) in &shapes {
                let Some(k) = (pos + s.len()).checked_sub(rank) else {
                    continue;
                };
                let (name, d) = &s[k];
                let Some(name) = name.as_ref().filter(|_| !d.is_broadcast_like()) else {
                    continue;
                };
                match &first {
                    None => first = Some((*i, k, name.clone())),
                    Some((fi, fk, fname)) if fname != name => {
                        let (a, b) = (
                            self.describe_shape_of(operands[*fi]),
                            self.describe_shape_of(operands[*i]),
                        );
                        self.errors.push(
                            DslError::new(
                                span,
                                format!(
                                    "{op}: named dims do not match: dim {fk} of operand {} is `{fname}` but dim {k} of operand {} is `{name}` (shapes {a} and {b})",
                                    fi + 1,
                                    i + 1
                                ),
                            )
                            .with_hint("broadcasting aligns dims from the right; check the parameters' dims, or line them up with unsqueeze/permute"),
                        );
                        return false;
                    }
                    Some(_) => {}
                }
            }
        }
        true
    }

    /// Checks the named dims of `cat` operands in every dim but `axis`.
    pub(crate) fn check_named_cat(
        &mut self,
        tensors: &[ValId],
        axis: i64,
        span: SpanRange,
    ) -> bool {
        let shapes: Vec<NamedShape> = tensors
            .iter()
            .filter_map(|&v| self.named_shape(v))
            .collect();
        let Some(rank) = shapes.first().map(Vec::len) else {
            return true;
        };
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        for pos in (0..rank).filter(|&p| p as i64 != axis) {
            let mut first: Option<&str> = None;
            for s in &shapes {
                let Some((Some(name), d)) = s.get(pos) else {
                    continue;
                };
                if d.is_broadcast_like() {
                    continue;
                }
                match first {
                    None => first = Some(name),
                    Some(f) if f != name => {
                        self.errors.push(
                            DslError::new(
                                span,
                                format!(
                                    "cat: named dims do not match in dim {pos}: `{f}` and `{name}`"
                                ),
                            )
                            .with_hint(
                                "cat joins tensors along one axis; every other dim must agree",
                            ),
                        );
                        return false;
                    }
                    Some(_) => {}
                }
            }
        }
        true
    }

    fn describe_shape_of(&self, v: ValId) -> String {
        match self.fd.fusion().tensor_type(v) {
            Some(t) => self.describe_shape(&t.shape_dims()),
            None => "a scalar".into(),
        }
    }
}
