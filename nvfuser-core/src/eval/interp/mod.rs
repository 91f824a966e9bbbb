//! The interpreter: binds inputs, runs the live expressions in arena order, checks every
//! result against the IR's declared extents and returns the outputs.
//!
//! This file holds the walk and the pointwise and reduction ops; `args` reads an
//! expression's arguments, and the other op families resolve and check theirs in
//! `layout` (shape ops), `create` (full, iota, rand) and `indexing` (index_select,
//! select, gather, take_along_axis, size).

mod args;
mod create;
mod indexing;
mod layout;

use std::borrow::Cow;

use super::convert::cast_data;
use super::pointwise;
use super::reduce;
use super::tensor::{HostData, HostTensor};
use super::EvalInput;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ir::bind;
use crate::ir::{Expr, Fusion, IterKind, Op, ValId, ValKind};

/// Runs `fusion` on `inputs` (one per fusion input, in order) and returns its outputs in
/// order, rounded to their dtypes. See the [module documentation](super) for the
/// semantics.
pub fn evaluate(fusion: &Fusion, inputs: &[EvalInput]) -> Result<Vec<HostTensor>> {
    crate::ir::verify(fusion)?;
    let mut ev = Evaluator {
        fusion,
        env: vec![None; fusion.num_vals()],
        input_shapes: vec![None; fusion.num_vals()],
        empty_reductions: vec![false; fusion.num_exprs()],
    };
    ev.bind_inputs(inputs)?;
    ev.run()?;
    ev.outputs()
}

struct Evaluator<'a> {
    fusion: &'a Fusion,
    /// Values by id: inputs are borrowed, computed values owned.
    env: Vec<Option<Cow<'a, HostTensor>>>,
    /// Runtime shapes of input tensors, by id (for extents).
    input_shapes: Vec<Option<Vec<usize>>>,
    /// The max/min expressions (by index) that reduced over an empty dim.
    empty_reductions: Vec<bool>,
}

fn invalid_ir(msg: impl Into<String>) -> Error {
    Error::InvalidIr(msg.into())
}

/// The largest tensor the evaluator creates (2^40 elements); larger requests are errors.
const MAX_ELEMENTS: usize = 1 << 40;

/// The element count of a tensor the evaluator is about to create: at most 2^40
/// elements, then [`super::tensor::check_alloc`] (at most 2^38 bytes of storage, and
/// granted by the allocator), so that a huge shape is an error, not an abort.
fn checked_numel(op: &str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| {
            Error::invalid(op, format!("shape {shape:?} has more than 2^40 elements"))
        })?;
    super::tensor::check_alloc(op, shape)
}

fn one(t: HostTensor) -> Vec<HostTensor> {
    vec![t]
}

impl<'a> Evaluator<'a> {
    fn bind_inputs(&mut self, inputs: &'a [EvalInput]) -> Result<()> {
        let declared = self.fusion.inputs();
        if inputs.len() != declared.len() {
            return Err(Error::arity(
                "evaluate",
                "inputs",
                declared.len(),
                inputs.len(),
            ));
        }
        for (index, (&id, given)) in declared.iter().zip(inputs).enumerate() {
            let val = self.fusion.val(id);
            let input_err = |expected: String, found: String| Error::Input {
                index,
                expected,
                found,
            };
            match (&val.kind, given) {
                (ValKind::Tensor(tt), EvalInput::Tensor(t)) => {
                    if t.dtype() != val.dtype {
                        return Err(input_err(
                            format!("dtype {}", val.dtype),
                            format!("dtype {}", t.dtype()),
                        ));
                    }
                    let dims = tt.shape_dims();
                    if t.rank() != dims.len() {
                        return Err(input_err(
                            format!("rank {}", dims.len()),
                            format!("rank {} (shape {:?})", t.rank(), t.shape()),
                        ));
                    }
                    for (d, (dim, &n)) in dims.iter().zip(t.shape()).enumerate() {
                        let want = dim.extent.as_const();
                        if dim.kind == IterKind::Broadcast && n != 1 {
                            return Err(input_err(
                                format!("size 1 at dim {d} (a broadcast dim)"),
                                format!("size {n} (shape {:?})", t.shape()),
                            ));
                        }
                        if let Some(w) = want {
                            if w != n as i64 {
                                return Err(input_err(
                                    format!("size {w} at dim {d} (a static size)"),
                                    format!("size {n} (shape {:?})", t.shape()),
                                ));
                            }
                        }
                    }
                    self.input_shapes[id.index()] = Some(t.shape().to_vec());
                    self.env[id.index()] = Some(Cow::Borrowed(t));
                }
                (ValKind::Tensor(tt), EvalInput::Scalar(s)) => {
                    return Err(input_err(
                        format!("a tensor ({}, rank {})", val.dtype, tt.rank()),
                        format!("a scalar ({s})"),
                    ))
                }
                (ValKind::Scalar(_), EvalInput::Tensor(t)) => {
                    return Err(input_err(
                        format!("a scalar of type {}", val.dtype),
                        format!("a tensor ({}, shape {:?})", t.dtype(), t.shape()),
                    ))
                }
                (ValKind::Scalar(_), EvalInput::Scalar(s)) => {
                    bind::check_scalar(index, val.dtype, *s)?;
                    self.env[id.index()] =
                        Some(Cow::Owned(HostTensor::from_scalar_value(*s, val.dtype)));
                }
            }
        }
        // Every extent the fusion equates, with the same check (and message) as a GPU.
        let bound: Vec<bind::BoundArg<'_>> = inputs
            .iter()
            .map(|i| match i {
                EvalInput::Tensor(t) => bind::BoundArg::Tensor(t.shape()),
                EvalInput::Scalar(s) => bind::BoundArg::Scalar(*s),
            })
            .collect();
        bind::check_sizes(self.fusion, &bound)?;
        for (id, v) in self.fusion.vals() {
            if let Some(c) = v.constant() {
                self.env[id.index()] = Some(Cow::Owned(HostTensor::from_scalar_value(c, v.dtype)));
            }
        }
        Ok(())
    }

    fn run(&mut self) -> Result<()> {
        let fusion = self.fusion;
        let n = fusion.num_vals();
        let live = fusion.live_exprs();
        let mut last_use: Vec<Option<usize>> = vec![None; n];
        for (eid, e) in fusion.exprs() {
            if live[eid.index()] {
                for &i in &e.inputs {
                    last_use[i.index()] = Some(eid.index());
                }
            }
        }
        let mut keep = vec![false; n];
        for o in fusion.outputs() {
            keep[o.val.index()] = true;
        }
        for (eid, e) in fusion.exprs() {
            if !live[eid.index()] {
                continue;
            }
            if bind::is_max_or_min(&e.op) {
                if let (Op::Reduction { axes, .. }, Some(Some(x))) = (
                    &e.op,
                    e.inputs.first().map(|i| self.env[i.index()].as_deref()),
                ) {
                    if axes.iter().any(|&a| x.shape().get(a) == Some(&0)) {
                        self.empty_reductions[eid.index()] = true;
                    }
                }
            }
            let results = self.eval_expr(e)?;
            if results.len() != e.outputs.len() {
                return Err(invalid_ir(format!(
                    "{}: produced {} values for {} outputs",
                    e.op.name(),
                    results.len(),
                    e.outputs.len()
                )));
            }
            for (&o, t) in e.outputs.iter().zip(results) {
                self.check_result(e, o, &t)?;
                // Every f32/f16/bf16/fp8-typed value is rounded to its dtype where it
                // is made, as a kernel holds it in a register of its type (module doc).
                let t = if t.dtype().is_narrow_float() || t.dtype() == DataType::F32 {
                    t.into_rounded()
                } else {
                    t
                };
                self.env[o.index()] = Some(Cow::Owned(t));
            }
            // Free intermediate tensors after their last use.
            for &i in &e.inputs {
                let idx = i.index();
                if last_use[idx] == Some(eid.index()) && !keep[idx] && fusion.val(i).is_tensor() {
                    if let Some(Cow::Owned(_)) = self.env[idx] {
                        self.env[idx] = None;
                    }
                }
            }
        }
        Ok(())
    }

    fn outputs(mut self) -> Result<Vec<HostTensor>> {
        let outs = self.fusion.outputs();
        // A max/min over an empty dim whose values an output observes (the shared rule;
        // `bind::check_sizes` already refused what the argument sizes tell).
        let no_elements = |v: ValId| {
            self.env[v.index()]
                .as_deref()
                .is_some_and(|t| t.shape().contains(&0))
        };
        if let Some(e) =
            bind::observed_empty_reduction(self.fusion, &self.empty_reductions, &no_elements)
        {
            return Err(bind::observed_empty_reduction_error(self.fusion, e));
        }
        let mut result = Vec::with_capacity(outs.len());
        for (k, o) in outs.iter().enumerate() {
            let idx = o.val.index();
            let later = outs[k + 1..].iter().any(|p| p.val == o.val);
            let t = if later {
                self.env[idx].as_deref().cloned()
            } else {
                self.env[idx].take().map(Cow::into_owned)
            };
            let t = t.ok_or_else(|| invalid_ir(format!("output {} was not computed", o.val)))?;
            result.push(t.into_rounded());
        }
        Ok(result)
    }

    /// Checks a result's dtype, rank and sizes against the IR (sizes where the declared
    /// extent can be evaluated). A failure is an inconsistency between the IR and the
    /// evaluator, reported as invalid IR.
    fn check_result(&self, e: &Expr, o: ValId, t: &HostTensor) -> Result<()> {
        let val = self.fusion.val(o);
        let name = e.op.name();
        if t.dtype() != val.dtype {
            return Err(invalid_ir(format!(
                "{name}: produced {} for {o}, declared {}",
                t.dtype(),
                val.dtype
            )));
        }
        let Some(tt) = val.tensor() else {
            if t.rank() != 0 {
                return Err(invalid_ir(format!(
                    "{name}: produced a tensor for the scalar {o}"
                )));
            }
            return Ok(());
        };
        let dims = tt.shape_dims();
        if dims.len() != t.rank() {
            return Err(invalid_ir(format!(
                "{name}: produced rank {} for {o}, declared rank {}",
                t.rank(),
                dims.len()
            )));
        }
        let dim_size = |tensor: ValId, axis: usize| -> Option<i64> {
            self.input_shapes
                .get(tensor.index())?
                .as_ref()?
                .get(axis)
                .map(|&s| s as i64)
        };
        let scalar =
            |v: ValId| -> Option<i64> { self.env.get(v.index())?.as_ref()?.item()?.as_i64() };
        for (d, (dim, &n)) in dims.iter().zip(t.shape()).enumerate() {
            if let Some(want) = dim.extent.eval(&dim_size, &scalar) {
                if want != n as i64 {
                    return Err(invalid_ir(format!(
                        "{name}: produced size {n} at dim {d} of {o}, but the IR declares extent {} = {want}",
                        dim.extent
                    )));
                }
            }
        }
        Ok(())
    }

    /// Computes the outputs of one expression. Pointwise ops and reductions are
    /// computed here; the shape, creation and indexing ops resolve and check their
    /// arguments in `layout`, `create` and `indexing`.
    fn eval_expr(&self, e: &Expr) -> Result<Vec<HostTensor>> {
        let name = e.op.name();
        let out0 = self.out_dtype(e, 0)?;
        let tensor = |data: HostData| HostTensor::raw(out0, data);
        Ok(match &e.op {
            Op::Unary(u) => one(tensor(pointwise::unary(*u, self.arg(e, 0)?, out0)?)),
            Op::Binary(b) => {
                let shape = self.pointwise_shape(e, 2)?;
                let data = pointwise::binary(*b, self.arg(e, 0)?, self.arg(e, 1)?, out0, &shape)?;
                one(tensor(data))
            }
            Op::Ternary(t) => {
                let n = t.arity();
                let shape = self.pointwise_shape(e, n)?;
                let args = (0..n).map(|k| self.arg(e, k)).collect::<Result<Vec<_>>>()?;
                one(tensor(pointwise::ternary(*t, &args, out0, &shape)?))
            }
            // A cast rounds to its type, even to the type it has; so does a segment
            // boundary, where the value is stored to memory in its dtype.
            Op::Cast | Op::SegmentSet => {
                let x = self.arg(e, 0)?.t;
                one(tensor(cast_data(x.data(), x.dtype(), out0)))
            }
            Op::Set => one(tensor(pointwise::copy(self.arg(e, 0)?.t, out0))),
            Op::Reduction { op, axes } => one(tensor(reduce::reduction(
                *op,
                self.arg(e, 0)?.t,
                axes,
                out0,
            )?)),
            Op::Scan { op, axis } => {
                one(tensor(reduce::scan(*op, self.arg(e, 0)?.t, *axis, out0)?))
            }
            Op::Sort {
                axis,
                descending,
                k,
            } => {
                let (values, indices) =
                    super::sort::sort(name, self.arg(e, 0)?.t, *axis, *descending, *k)?;
                vec![tensor(values), HostTensor::raw(DataType::I64, indices)]
            }
            Op::Var { axes, correction } => {
                let (var, _) = reduce::var_mean(name, self.arg(e, 0)?.t, axes, *correction, out0)?;
                one(tensor(var))
            }
            Op::VarMean { axes, correction } => {
                let (var, mean) =
                    reduce::var_mean(name, self.arg(e, 0)?.t, axes, *correction, out0)?;
                let mean_dt = self.out_dtype(e, 1)?;
                vec![tensor(var), HostTensor::raw(out0, mean).cast(mean_dt)]
            }
            Op::Welford { axes } => {
                let (mean, m2, count) = reduce::welford(self.arg(e, 0)?.t, axes, out0)?;
                let (m2_dt, count_dt) = (self.out_dtype(e, 1)?, self.out_dtype(e, 2)?);
                vec![
                    tensor(mean),
                    HostTensor::raw(out0, m2).cast(m2_dt),
                    HostTensor::raw(DataType::I64, count).cast(count_dt),
                ]
            }
            Op::Broadcast { mask } => one(tensor(self.broadcast(e, mask)?)),
            Op::Expand { sizes } => one(tensor(self.expand(e, sizes)?)),
            Op::Reshape { sizes } => one(tensor(self.reshape(e, sizes)?)),
            Op::Permute { perm } => one(tensor(self.permute(e, perm)?)),
            Op::Squeeze { axes } => one(tensor(self.squeeze(e, axes)?)),
            Op::Slice { ranges } => one(tensor(self.slice(e, ranges)?)),
            Op::Pad { widths } => one(tensor(self.pad(e, widths, out0)?)),
            Op::Cat { axis } => one(tensor(self.cat(e, *axis)?)),
            Op::Full { sizes } => one(tensor(self.full(e, sizes, out0)?)),
            Op::Iota { length } => one(tensor(self.iota(e, *length, out0)?)),
            Op::Rand { dist, sizes } => one(tensor(self.rand(e, *dist, sizes, out0)?)),
            Op::IndexSelect { axis } => one(tensor(self.index_select(e, *axis)?)),
            Op::Select { axis, index } => one(tensor(self.select(e, *axis, *index)?)),
            Op::Gather { axis } => one(tensor(self.gather(e, *axis, false)?)),
            Op::TakeAlongAxis { axis } => one(tensor(self.gather(e, *axis, true)?)),
            Op::Scatter { axis, add } => one(tensor(self.scatter(e, *axis, *add)?)),
            Op::Size { axis } => one(self.dim_size(e, *axis, out0)?),
        })
    }
}
