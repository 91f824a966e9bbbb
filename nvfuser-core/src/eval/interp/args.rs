//! Argument access: an expression's inputs as tensors or scalars, output dtypes, the
//! IR kinds of input dims, checked factory sizes and the broadcast shape of an
//! elementwise op's operands.

use std::borrow::Cow;

use super::{checked_numel, invalid_ir, Evaluator};
use crate::dtype::{DataType, ScalarValue};
use crate::error::{Error, Result};
use crate::eval::pointwise::Arg;
use crate::eval::tensor::{HostData, HostTensor};
use crate::ir::{Expr, IterKind, SizeArg};
use ndarray::ArrayD;

impl Evaluator<'_> {
    pub(super) fn arg(&self, e: &Expr, k: usize) -> Result<Arg<'_>> {
        let id = *e
            .inputs
            .get(k)
            .ok_or_else(|| invalid_ir(format!("{}: missing input {k}", e.op.name())))?;
        let t = self.env[id.index()]
            .as_deref()
            .ok_or_else(|| invalid_ir(format!("{}: input {id} has no value", e.op.name())))?;
        Ok(Arg {
            t,
            scalar: !self.fusion.val(id).is_tensor(),
        })
    }

    /// Input 0 of a data-movement op, converted to the output's dtype when the IR's
    /// types differ (only hand-built IR does that).
    pub(super) fn moved(&self, e: &Expr) -> Result<Cow<'_, HostTensor>> {
        let t = self.arg(e, 0)?.t;
        let out = self.out_dtype(e, 0)?;
        Ok(if t.dtype() == out {
            Cow::Borrowed(t)
        } else {
            Cow::Owned(t.cast(out))
        })
    }

    pub(super) fn out_dtype(&self, e: &Expr, k: usize) -> Result<DataType> {
        let id = e
            .outputs
            .get(k)
            .ok_or_else(|| invalid_ir(format!("{}: missing output {k}", e.op.name())))?;
        Ok(self.fusion.val(*id).dtype)
    }

    /// The IR kinds of input `k`'s shape dims (empty for scalars).
    pub(super) fn kinds(&self, e: &Expr, k: usize) -> Vec<IterKind> {
        e.inputs
            .get(k)
            .and_then(|&id| self.fusion.tensor_type(id))
            .map(|t| t.shape().map(|d| d.kind).collect())
            .unwrap_or_default()
    }

    /// A scalar argument's value.
    pub(super) fn scalar(&self, e: &Expr, k: usize) -> Result<ScalarValue> {
        let a = self.arg(e, k)?;
        if a.t.rank() != 0 {
            return Err(Error::Kind {
                op: e.op.name().into(),
                expected: format!("a scalar for input {k}"),
                found: format!("a tensor of shape {:?}", a.t.shape()),
            });
        }
        a.t.item()
            .ok_or_else(|| invalid_ir(format!("{}: empty scalar", e.op.name())))
    }

    pub(super) fn int_scalar(&self, e: &Expr, k: usize, what: &str) -> Result<i64> {
        let v = self.scalar(e, k)?;
        match v {
            ScalarValue::Int(i) => Ok(i),
            _ => Err(Error::dtype(
                e.op.name(),
                format!("an integer scalar for {what}"),
                self.arg(e, k)?.t.dtype(),
            )),
        }
    }

    pub(super) fn size_arg(&self, e: &Expr, a: SizeArg) -> Result<i64> {
        match a {
            SizeArg::Const(c) => Ok(c),
            SizeArg::Input(k) => self.int_scalar(e, k as usize, "a size"),
        }
    }

    /// Factory sizes: each must be >= 0.
    pub(super) fn sizes(&self, e: &Expr, args: &[SizeArg]) -> Result<Vec<usize>> {
        let name = e.op.name();
        let mut out = Vec::with_capacity(args.len());
        for (d, &a) in args.iter().enumerate() {
            let n = self.size_arg(e, a)?;
            if n < 0 {
                return Err(Error::invalid(
                    name,
                    format!("size {n} at dim {d}: expected >= 0"),
                ));
            }
            out.push(n as usize);
        }
        checked_numel(name, &out)?;
        Ok(out)
    }

    pub(super) fn index_tensor<'b>(&self, e: &Expr, a: Arg<'b>) -> Result<&'b ArrayD<i64>> {
        match a.t.data() {
            HostData::Int(i) => Ok(i),
            _ => Err(Error::dtype(
                e.op.name(),
                "an integer index tensor",
                a.t.dtype(),
            )),
        }
    }

    /// The broadcast shape of the operands of an elementwise op: dims align on the right;
    /// non-broadcast dims must have equal sizes.
    pub(super) fn pointwise_shape(&self, e: &Expr, n_args: usize) -> Result<Vec<usize>> {
        let name = e.op.name();
        let rank = e
            .outputs
            .first()
            .and_then(|&o| self.fusion.tensor_type(o))
            .map_or(0, |t| t.rank());
        let mut out = vec![1usize; rank];
        let mut owner: Vec<Option<usize>> = vec![None; rank];
        for k in 0..n_args {
            let a = self.arg(e, k)?;
            let shape = a.t.shape();
            if a.scalar {
                continue;
            }
            let kinds = self.kinds(e, k);
            if kinds.len() != shape.len() || shape.len() > rank {
                return Err(invalid_ir(format!(
                    "{name}: operand {k} has rank {} (output rank {rank})",
                    shape.len()
                )));
            }
            let lead = rank - shape.len();
            for (j, (&n, &kind)) in shape.iter().zip(&kinds).enumerate() {
                let d = lead + j;
                if kind == IterKind::Broadcast {
                    continue;
                }
                match owner[d] {
                    None => {
                        owner[d] = Some(k);
                        out[d] = n;
                    }
                    Some(first) if out[d] != n => {
                        let other = self.arg(e, first)?.t.shape().to_vec();
                        return Err(Error::shape(
                            name,
                            format!("size {} at dim {d} (non-broadcast dims must match)", out[d]),
                            format!("size {n} (operand shapes {other:?} and {shape:?})"),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        checked_numel(name, &out)?;
        Ok(out)
    }
}
