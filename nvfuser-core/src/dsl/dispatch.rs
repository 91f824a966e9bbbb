//! Dispatch: calling the builder method of an op with its evaluated arguments.
//!
//! Named-dim checks run first for the ops that line up dims (elementwise ops, `cat`,
//! `take_along_axis`); a builder error is reported at the argument it is about when the
//! error says which (an axis, the sizes), else at the call.

use super::build::{Interp, Value};
use super::call::ArgVal;
use super::error::SpanRange;
use super::ops::{Family, OpSpec};
use crate::error::{Error, Result};
use crate::ir::ValId;

impl Interp<'_> {
    /// Calls the builder.
    pub(crate) fn dispatch(
        &mut self,
        spec: &OpSpec,
        vals: &[ArgVal],
        spans: &[SpanRange],
        call_span: SpanRange,
    ) -> Value {
        use ArgVal as A;
        let v = |i: usize| match &vals[i] {
            A::Val(v) => *v,
            other => unreachable!("argument {i} is {other:?}"),
        };
        let ints = |i: usize| match &vals[i] {
            A::Ints(v) => v.clone(),
            other => unreachable!("argument {i} is {other:?}"),
        };
        let int = |i: usize| match &vals[i] {
            A::Int(v) => *v,
            other => unreachable!("argument {i} is {other:?}"),
        };
        let boolean = |i: usize| match &vals[i] {
            A::Bool(v) => *v,
            other => unreachable!("argument {i} is {other:?}"),
        };
        let sizes = |i: usize| match &vals[i] {
            A::Sizes(v) => v.clone(),
            other => unreachable!("argument {i} is {other:?}"),
        };
        let size = |i: usize| match &vals[i] {
            A::Size(v) => *v,
            other => unreachable!("argument {i} is {other:?}"),
        };
        let dtype = |i: usize| match &vals[i] {
            A::DType(v) => *v,
            other => unreachable!("argument {i} is {other:?}"),
        };
        let fd = &mut self.fd;
        let r: Result<Value> = match spec.family {
            Family::Unary(u) => fd.unary(u, v(0)).map(Value::Tensor),
            Family::Binary(b) => {
                if !self.check_named(&[v(0), v(1)], call_span, spec.name) {
                    return Value::Poison;
                }
                self.fd.binary(b, v(0), v(1)).map(Value::Tensor)
            }
            Family::Ternary(t) => {
                let args: Vec<ValId> = (0..t.arity()).map(v).collect();
                if !self.check_named(&args, call_span, spec.name) {
                    return Value::Poison;
                }
                self.fd.ternary(t, &args).map(Value::Tensor)
            }
            Family::Cast => fd.cast(v(0), dtype(1)).map(Value::Tensor),
            Family::Set => fd.set(v(0)).map(Value::Tensor),
            Family::SegmentSet => fd.segment_set(v(0)).map(Value::Tensor),
            Family::Reduction(r) => match vals.get(3) {
                Some(A::DType(d)) => fd.reduction_as(r, v(0), &ints(1), boolean(2), *d),
                _ => fd.reduction(r, v(0), &ints(1), boolean(2)),
            }
            .map(Value::Tensor),
            Family::Scan(s) => match vals.get(2) {
                Some(A::DType(d)) => fd.scan_as(s, v(0), int(1), *d),
                _ => fd.scan(s, v(0), int(1)),
            }
            .map(Value::Tensor),
            Family::Sort => fd
                .sort(v(0), int(1), boolean(2), boolean(3))
                .map(|(a, b)| Value::Tuple(vec![Value::Tensor(a), Value::Tensor(b)])),
            Family::Argsort => fd.argsort(v(0), int(1), boolean(2)).map(Value::Tensor),
            Family::Topk => fd
                .topk(v(0), int(1), int(2), boolean(3), boolean(4))
                .map(|(a, b)| Value::Tuple(vec![Value::Tensor(a), Value::Tensor(b)])),
            Family::Var => fd
                .var(v(0), &ints(1), int(2), boolean(3))
                .map(Value::Tensor),
            Family::VarMean => fd
                .var_mean(v(0), &ints(1), int(2), boolean(3))
                .map(|(a, b)| Value::Tuple(vec![Value::Tensor(a), Value::Tensor(b)])),
            Family::Welford => fd.welford(v(0), &ints(1)).map(|(a, b, c)| {
                Value::Tuple(vec![Value::Tensor(a), Value::Tensor(b), Value::Tensor(c)])
            }),
            Family::Broadcast => match &vals[1] {
                A::Mask(m) => fd.broadcast(v(0), m).map(Value::Tensor),
                other => unreachable!("mask is {other:?}"),
            },
            Family::Unsqueeze => fd.unsqueeze(v(0), int(1)).map(Value::Tensor),
            Family::Squeeze => fd.squeeze(v(0), &ints(1)).map(Value::Tensor),
            Family::Expand => fd.expand(v(0), &sizes(1)).map(Value::Tensor),
            Family::Reshape => fd.reshape(v(0), &sizes(1)).map(Value::Tensor),
            Family::Permute => fd.permute(v(0), &ints(1)).map(Value::Tensor),
            Family::Slice => match &vals[1] {
                A::Ranges(r) => fd.slice(v(0), r).map(Value::Tensor),
                other => unreachable!("ranges are {other:?}"),
            },
            Family::Pad => match &vals[1] {
                A::Widths(w) => fd.pad_sizes(v(0), w, v(2)).map(Value::Tensor),
                other => unreachable!("widths are {other:?}"),
            },
            Family::Cat => match &vals[0] {
                A::Vals(ts) => {
                    let ts = ts.clone();
                    if !self.check_named_cat(&ts, int(1), call_span) {
                        return Value::Poison;
                    }
                    self.fd.cat(&ts, int(1)).map(Value::Tensor)
                }
                other => unreachable!("tensors are {other:?}"),
            },
            Family::BroadcastInDim => {
                let dims: Vec<usize> = ints(2).into_iter().map(|d| d as usize).collect();
                fd.broadcast_in_dim(v(0), &sizes(1), &dims)
                    .map(Value::Tensor)
            }
            Family::Triu => fd.triu(v(0), int(1)).map(Value::Tensor),
            Family::Tril => fd.tril(v(0), int(1)).map(Value::Tensor),
            Family::Full => fd.full(&sizes(0), v(1), dtype(2)).map(Value::Tensor),
            Family::Iota => fd.iota(size(0), v(1), v(2), dtype(3)).map(Value::Tensor),
            Family::Rand(crate::ir::Distribution::Uniform) => fd
                .uniform(&sizes(0), v(1), v(2), v(3), v(4), dtype(5))
                .map(Value::Tensor),
            Family::Rand(crate::ir::Distribution::Normal) => fd
                .normal(&sizes(0), v(1), v(2), v(3), v(4), dtype(5))
                .map(Value::Tensor),
            Family::RandGen(crate::ir::Distribution::Uniform) => fd
                .rand_uniform(&sizes(0), v(1), v(2), dtype(3))
                .map(Value::Tensor),
            Family::RandGen(crate::ir::Distribution::Normal) => fd
                .rand_normal(&sizes(0), v(1), v(2), dtype(3))
                .map(Value::Tensor),
            Family::Size => fd.size(v(0), int(1)).map(Value::Scalar),
            Family::IndexSelect => fd.index_select(v(0), int(1), v(2)).map(Value::Tensor),
            Family::Select => fd.select(v(0), int(1), size(2)).map(Value::Tensor),
            Family::Gather => fd.gather(v(0), int(1), v(2)).map(Value::Tensor),
            Family::TakeAlongAxis => {
                if !self.check_named(&[v(0), v(1)], call_span, spec.name) {
                    return Value::Poison;
                }
                self.fd
                    .take_along_axis(v(0), v(1), int(2))
                    .map(Value::Tensor)
            }
            Family::Scatter(false) => fd.scatter(v(0), int(1), v(2), v(3)).map(Value::Tensor),
            Family::Scatter(true) => fd.scatter_add(v(0), int(1), v(2), v(3)).map(Value::Tensor),
            Family::Inplace => unreachable!("reported before dispatch"),
        };
        match r {
            // Elementwise ops on scalars give scalars: re-wrap by the value's kind.
            Ok(Value::Tensor(id)) | Ok(Value::Scalar(id)) => self.wrap(id),
            Ok(other) => other,
            Err(e) => {
                let span = self.error_span(spec, &e, spans, call_span);
                self.builder_error(e, span)
            }
        }
    }

    /// The narrowest span for a builder error: the argument it is about, when that is
    /// clear from the error, else the call.
    fn error_span(
        &self,
        spec: &OpSpec,
        e: &Error,
        spans: &[SpanRange],
        call_span: SpanRange,
    ) -> SpanRange {
        let find = |names: &[&str]| {
            spec.params
                .iter()
                .position(|p| names.contains(&p.name))
                .map_or(call_span, |i| spans[i])
        };
        match e {
            Error::AxisOutOfRange { .. } => find(&["axes", "axis", "perm"]),
            Error::Arity { what, .. } if what.contains("sizes") => find(&["sizes"]),
            Error::Arity { what, .. } if what.contains("ranges") => find(&["ranges"]),
            Error::Arity { what, .. } if what.contains("pairs") => find(&["widths"]),
            Error::Arity { what, .. } if what.contains("permutation") => find(&["perm"]),
            Error::Arity { what, .. } if what.contains("broadcast dims") => find(&["dims"]),
            Error::InvalidArgument { reason, .. } | Error::Shape { found: reason, .. }
                if reason.starts_with("k ") =>
            {
                find(&["k"])
            }
            Error::InvalidArgument { reason, .. } if reason.contains("correction") => {
                find(&["correction"])
            }
            Error::InvalidArgument { reason, .. }
                if reason.contains("axis") || reason.contains("permutation") =>
            {
                find(&["axes", "axis", "perm"])
            }
            Error::DType { expected, .. } if expected.contains("for a size") => {
                find(&["sizes", "length", "index"])
            }
            _ => call_span,
        }
    }
}
