//! The interpreter: binds inputs, runs the live expressions in arena order, checks every
//! result against the IR's declared extents and returns the outputs.

use std::borrow::Cow;

use ndarray::{ArrayD, IxDyn};

use super::convert::{cast_data, round_to};
use super::pointwise::{self, Arg};
use super::reduce;
use super::shape::{self as sh};
use super::tensor::{HostData, HostTensor};
use super::EvalInput;
use crate::dtype::{Category, DataType, ScalarValue};
use crate::error::{Error, Result};
use crate::ir::bind;
use crate::ir::{Distribution, Expr, Fusion, IterKind, Op, SizeArg, ValId, ValKind};

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
                // Every f32/f16/bf16-typed value is rounded to its dtype where it is
                // made, as a kernel holds it in a register of its type (module doc).
                let t = if t.dtype().is_half() || t.dtype() == DataType::F32 {
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

    // ----- argument access -----

    fn arg(&self, e: &Expr, k: usize) -> Result<Arg<'_>> {
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
    fn moved(&self, e: &Expr) -> Result<Cow<'_, HostTensor>> {
        let t = self.arg(e, 0)?.t;
        let out = self.out_dtype(e, 0)?;
        Ok(if t.dtype() == out {
            Cow::Borrowed(t)
        } else {
            Cow::Owned(t.cast(out))
        })
    }

    fn out_dtype(&self, e: &Expr, k: usize) -> Result<DataType> {
        let id = e
            .outputs
            .get(k)
            .ok_or_else(|| invalid_ir(format!("{}: missing output {k}", e.op.name())))?;
        Ok(self.fusion.val(*id).dtype)
    }

    /// The IR kinds of input `k`'s shape dims (empty for scalars).
    fn kinds(&self, e: &Expr, k: usize) -> Vec<IterKind> {
        e.inputs
            .get(k)
            .and_then(|&id| self.fusion.tensor_type(id))
            .map(|t| t.shape().map(|d| d.kind).collect())
            .unwrap_or_default()
    }

    /// A scalar argument's value.
    fn scalar(&self, e: &Expr, k: usize) -> Result<ScalarValue> {
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

    fn int_scalar(&self, e: &Expr, k: usize, what: &str) -> Result<i64> {
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

    fn size_arg(&self, e: &Expr, a: SizeArg) -> Result<i64> {
        match a {
            SizeArg::Const(c) => Ok(c),
            SizeArg::Input(k) => self.int_scalar(e, k as usize, "a size"),
        }
    }

    /// Factory sizes: each must be >= 0.
    fn sizes(&self, e: &Expr, args: &[SizeArg]) -> Result<Vec<usize>> {
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

    fn index_tensor<'b>(&self, e: &Expr, a: Arg<'b>) -> Result<&'b ArrayD<i64>> {
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
    fn pointwise_shape(&self, e: &Expr, n_args: usize) -> Result<Vec<usize>> {
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

    // ----- the ops -----

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
            Op::Broadcast { mask } => {
                let x = self.moved(e)?;
                if mask.iter().filter(|m| !**m).count() != x.rank() {
                    return Err(invalid_ir(format!(
                        "broadcast: mask {mask:?} does not fit rank {}",
                        x.rank()
                    )));
                }
                one(tensor(sh::broadcast(x.data(), mask)))
            }
            Op::Expand { sizes } => one(tensor(self.expand(e, sizes)?)),
            Op::Reshape { sizes } => one(tensor(self.reshape(e, sizes)?)),
            Op::Permute { perm } => {
                let x = self.moved(e)?;
                let mut seen = vec![false; x.rank()];
                let ok = perm.len() == x.rank()
                    && perm
                        .iter()
                        .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
                if !ok {
                    return Err(invalid_ir(format!(
                        "permute: {perm:?} is not a permutation of 0..{}",
                        x.rank()
                    )));
                }
                one(tensor(sh::permute(x.data(), perm)))
            }
            Op::Squeeze { axes } => {
                let x = self.moved(e)?;
                let mut sorted = axes.clone();
                sorted.sort_unstable();
                sorted.dedup();
                for &a in &sorted {
                    match x.shape().get(a) {
                        None => {
                            return Err(Error::AxisOutOfRange {
                                op: name.into(),
                                axis: a as i64,
                                rank: x.rank(),
                            })
                        }
                        Some(&n) if n != 1 => {
                            return Err(Error::shape(
                                name,
                                format!("size 1 at dim {a}"),
                                format!("size {n}"),
                            ))
                        }
                        _ => {}
                    }
                }
                one(tensor(sh::squeeze(x.data(), &sorted)))
            }
            Op::Slice { ranges } => one(tensor(self.slice(e, ranges)?)),
            Op::Pad { widths } => {
                let x = self.arg(e, 0)?.t;
                if widths.len() != x.rank() {
                    return Err(Error::arity(
                        name,
                        "(before, after) pairs (one per dim)",
                        x.rank(),
                        widths.len(),
                    ));
                }
                let mut w = Vec::with_capacity(widths.len());
                for (d, &(lo, hi)) in widths.iter().enumerate() {
                    if lo < 0 || hi < 0 {
                        return Err(Error::invalid(
                            name,
                            format!("widths ({lo}, {hi}) at dim {d}: expected >= 0"),
                        ));
                    }
                    w.push((lo as usize, hi as usize));
                }
                let padded = x
                    .shape()
                    .iter()
                    .zip(&w)
                    .map(|(&n, &(lo, hi))| n.checked_add(lo)?.checked_add(hi))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| {
                        Error::invalid(name, format!("widths {widths:?} are too large"))
                    })?;
                checked_numel(name, &padded)?;
                let fill = HostTensor::from_scalar_value(self.scalar(e, 1)?, out0);
                let xd = if x.dtype() == out0 {
                    Cow::Borrowed(x.data())
                } else {
                    Cow::Owned(cast_data(x.data(), x.dtype(), out0))
                };
                one(tensor(sh::pad(&xd, &w, fill.data())?))
            }
            Op::Cat { axis } => one(tensor(self.cat(e, *axis)?)),
            Op::Full { sizes } => {
                let shape = self.sizes(e, sizes)?;
                let v = HostTensor::from_scalar_value(self.scalar(e, 0)?, out0);
                one(HostTensor::raw(out0, sh::expand(name, v.data(), &shape)?))
            }
            Op::Iota { length } => one(tensor(self.iota(e, *length, out0)?)),
            Op::Rand { dist, sizes } => one(tensor(self.rand(e, *dist, sizes, out0)?)),
            Op::IndexSelect { axis } => {
                let x = self.moved(e)?;
                let idx = self.index_tensor(e, self.arg(e, 1)?)?;
                let n = *x
                    .shape()
                    .get(*axis)
                    .ok_or_else(|| self.axis_error(e, *axis, x.rank()))?;
                if idx.ndim() != 1 {
                    return Err(Error::Rank {
                        op: name.into(),
                        expected: "1 for the index".into(),
                        found: idx.ndim(),
                    });
                }
                sh::check_indices(name, idx, *axis, n)?;
                let picks: Vec<usize> = idx.iter().map(|&i| i as usize).collect();
                one(tensor(sh::index_select(x.data(), *axis, &picks)))
            }
            Op::Select { axis, index } => {
                let x = self.moved(e)?;
                let n = *x
                    .shape()
                    .get(*axis)
                    .ok_or_else(|| self.axis_error(e, *axis, x.rank()))?
                    as i64;
                let i = self.size_arg(e, *index)?;
                let j = if i < 0 { i + n } else { i };
                if j < 0 || j >= n {
                    return Err(Error::invalid(
                        name,
                        format!("index {i} is out of range for dim {axis} of size {n} (expected -{n}..{n})"),
                    ));
                }
                one(tensor(sh::select(x.data(), *axis, j as usize)))
            }
            Op::Gather { axis } => one(tensor(self.gather(e, *axis, false)?)),
            Op::TakeAlongAxis { axis } => one(tensor(self.gather(e, *axis, true)?)),
            Op::Size { axis } => {
                let x = self.arg(e, 0)?.t;
                let n = *x
                    .shape()
                    .get(*axis)
                    .ok_or_else(|| self.axis_error(e, *axis, x.rank()))?;
                one(HostTensor::raw(
                    DataType::I64,
                    HostData::Int(ArrayD::from_elem(IxDyn(&[]), n as i64)),
                )
                .cast(out0))
            }
        })
    }

    fn axis_error(&self, e: &Expr, axis: usize, rank: usize) -> Error {
        Error::AxisOutOfRange {
            op: e.op.name().into(),
            axis: axis as i64,
            rank,
        }
    }

    fn expand(&self, e: &Expr, sizes: &[SizeArg]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        if sizes.len() != x.rank() {
            return Err(Error::arity(
                name,
                "sizes (one per dim)",
                x.rank(),
                sizes.len(),
            ));
        }
        let kinds = self.kinds(e, 0);
        let mut shape = Vec::with_capacity(sizes.len());
        for (d, (&a, &n)) in sizes.iter().zip(x.shape()).enumerate() {
            let v = self.size_arg(e, a)?;
            let broadcast = kinds.get(d) == Some(&IterKind::Broadcast);
            shape.push(match v {
                -1 => n,
                v if v < -1 => {
                    return Err(Error::invalid(
                        name,
                        format!("size {v} at dim {d}: expected -1 or a size >= 0"),
                    ))
                }
                v if v as usize == n => n,
                v if broadcast && n == 1 => v as usize,
                v => {
                    return Err(Error::shape(
                        name,
                        format!("size {n} at dim {d} (only broadcast dims expand)"),
                        format!("{v}"),
                    ))
                }
            });
        }
        checked_numel(name, &shape)?;
        sh::expand(name, x.data(), &shape)
    }

    fn reshape(&self, e: &Expr, sizes: &[SizeArg]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let numel = x.numel();
        let mut vals = Vec::with_capacity(sizes.len());
        for &a in sizes {
            vals.push(self.size_arg(e, a)?);
        }
        let mut infer = None;
        let mut known: usize = 1;
        for (d, &v) in vals.iter().enumerate() {
            match v {
                -1 if infer.is_some() => {
                    return Err(Error::invalid(
                        name,
                        format!("sizes {vals:?}: at most one -1 may be inferred"),
                    ))
                }
                -1 => infer = Some(d),
                v if v < -1 => {
                    return Err(Error::invalid(
                        name,
                        format!("size {v} at dim {d}: expected -1 or a size >= 0"),
                    ))
                }
                v => {
                    known = known
                        .checked_mul(v as usize)
                        .ok_or_else(|| Error::invalid(name, format!("sizes {vals:?} overflow")))?
                }
            }
        }
        let mismatch = || {
            Error::shape(
                name,
                format!("sizes with {numel} elements (input shape {:?})", x.shape()),
                format!("{vals:?}"),
            )
        };
        let mut shape: Vec<usize> = vals.iter().map(|&v| v.max(0) as usize).collect();
        if let Some(d) = infer {
            if known == 0 || numel % known != 0 {
                return Err(mismatch());
            }
            shape[d] = numel / known;
        } else if known != numel {
            return Err(mismatch());
        }
        sh::reshape(x.data(), &shape)
    }

    fn slice(&self, e: &Expr, ranges: &[crate::ir::SliceRange]) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        if ranges.len() != x.rank() {
            return Err(Error::arity(
                name,
                "ranges (one per dim)",
                x.rank(),
                ranges.len(),
            ));
        }
        let mut resolved = Vec::with_capacity(ranges.len());
        for (d, (r, &n)) in ranges.iter().zip(x.shape()).enumerate() {
            if r.step < 1 {
                return Err(Error::invalid(
                    name,
                    format!("step {} at dim {d}: expected >= 1", r.step),
                ));
            }
            let size = n as i64;
            let bound = |a: SizeArg, what: &str| -> Result<i64> {
                match a {
                    SizeArg::Const(c) if c < 0 => Ok((size + c).max(0)),
                    SizeArg::Const(c) => Ok(c.min(size)),
                    SizeArg::Input(_) => {
                        let v = self.size_arg(e, a)?;
                        if v < 0 || v > size {
                            return Err(Error::invalid(
                                name,
                                format!(
                                    "{what} {v} at dim {d} is out of range for a dim of size {size} \
                                     (bounds given by scalars must be within 0..={size})"
                                ),
                            ));
                        }
                        Ok(v)
                    }
                }
            };
            let start = bound(r.start, "start")?;
            let stop = bound(r.stop, "stop")?.max(start);
            resolved.push((start as usize, stop as usize, r.step as usize));
        }
        Ok(sh::slice(x.data(), &resolved))
    }

    fn cat(&self, e: &Expr, axis: usize) -> Result<HostData> {
        let name = e.op.name();
        let out = self.out_dtype(e, 0)?;
        let n = e.inputs.len();
        let args = (0..n).map(|k| self.arg(e, k)).collect::<Result<Vec<_>>>()?;
        let rank = args.first().map_or(0, |a| a.t.rank());
        if axis >= rank {
            return Err(self.axis_error(e, axis, rank));
        }
        let mut common: Vec<Option<usize>> = vec![None; rank];
        for (k, a) in args.iter().enumerate() {
            if a.t.rank() != rank {
                return Err(Error::Rank {
                    op: name.into(),
                    expected: format!("{rank} like the first tensor"),
                    found: a.t.rank(),
                });
            }
            let kinds = self.kinds(e, k);
            for (d, &s) in a.t.shape().iter().enumerate() {
                if d == axis || kinds.get(d) == Some(&IterKind::Broadcast) {
                    continue;
                }
                match common[d] {
                    None => common[d] = Some(s),
                    Some(c) if c != s => {
                        return Err(Error::shape(
                            name,
                            format!("size {c} at dim {d} (non-axis dims must match)"),
                            format!("size {s} in tensor {k} (shape {:?})", a.t.shape()),
                        ))
                    }
                    _ => {}
                }
            }
        }
        let shapes: Vec<Vec<usize>> = args
            .iter()
            .map(|a| {
                (0..rank)
                    .map(|d| {
                        if d == axis {
                            a.t.shape()[d]
                        } else {
                            common[d].unwrap_or(1)
                        }
                    })
                    .collect()
            })
            .collect();
        let mut total = shapes[0].clone();
        total[axis] = shapes.iter().map(|s| s[axis]).sum();
        checked_numel(name, &total)?;
        let converted: Vec<Cow<'_, HostData>> = args
            .iter()
            .map(|a| {
                if a.t.dtype() == out {
                    Cow::Borrowed(a.t.data())
                } else {
                    Cow::Owned(cast_data(a.t.data(), a.t.dtype(), out))
                }
            })
            .collect();
        let parts: Vec<&HostData> = converted.iter().map(|c| c.as_ref()).collect();
        sh::cat(&parts, &shapes, axis)
    }

    fn iota(&self, e: &Expr, length: SizeArg, out: DataType) -> Result<HostData> {
        let name = e.op.name();
        let n = self.size_arg(e, length)?;
        if n < 0 {
            return Err(Error::invalid(name, format!("length {n}: expected >= 0")));
        }
        checked_numel(name, &[n as usize])?;
        let start = HostTensor::from_scalar_value(self.scalar(e, 0)?, out);
        let step = HostTensor::from_scalar_value(self.scalar(e, 1)?, out);
        let shape = IxDyn(&[n as usize]);
        match (start.data(), step.data()) {
            (HostData::Int(a), HostData::Int(b)) => {
                let (a, b) = (
                    a.first().copied().unwrap_or(0),
                    b.first().copied().unwrap_or(0),
                );
                let mut r =
                    ArrayD::from_shape_fn(shape, |i| a.wrapping_add((i[0] as i64).wrapping_mul(b)));
                super::convert::wrap_array(&mut r, out);
                Ok(HostData::Int(r))
            }
            (HostData::Float(a), HostData::Float(b)) => {
                let (a, b) = (
                    a.first().copied().unwrap_or(0.0),
                    b.first().copied().unwrap_or(0.0),
                );
                Ok(HostData::Float(ArrayD::from_shape_fn(shape, |i| {
                    a + i[0] as f64 * b
                })))
            }
            _ => Err(Error::dtype(name, "an integer or floating point type", out)),
        }
    }

    fn rand(
        &self,
        e: &Expr,
        dist: Distribution,
        sizes: &[SizeArg],
        out: DataType,
    ) -> Result<HostData> {
        use crate::philox;
        let name = e.op.name();
        if out.category() != Category::Floating {
            return Err(Error::dtype(name, "a floating point output type", out));
        }
        let shape = self.sizes(e, sizes)?;
        let a = self.scalar(e, 0)?.as_f64();
        let b = self.scalar(e, 1)?.as_f64();
        let seed = self.int_scalar(e, 2, "the seed")? as u64;
        let offset = self.int_scalar(e, 3, "the offset")? as u64;
        let numel = checked_numel(name, &shape)? as u64;
        let values: Vec<f64> = match (dist, out) {
            // A value that rounds up to `high` becomes `low`, so the range is [low, high)
            // as in PyTorch (the generated kernels do the same after rounding).
            (Distribution::Uniform, DataType::F64) => (0..numel)
                .map(|i| philox::uniform_f64(seed, offset, i, a, b))
                .map(|v| if v >= b { a } else { v })
                .collect(),
            (Distribution::Uniform, _) => {
                let (lo, hi) = (a as f32, b as f32);
                let (lo_d, hi_d) = (round_to(lo as f64, out), round_to(hi as f64, out));
                (0..numel)
                    .map(|i| round_to(philox::uniform_f32(seed, offset, i, lo, hi) as f64, out))
                    .map(|v| if v >= hi_d { lo_d } else { v })
                    .collect()
            }
            (Distribution::Normal, DataType::F64) => (0..numel)
                .map(|i| philox::normal_f64(seed, offset, i, a, b))
                .collect(),
            (Distribution::Normal, _) => (0..numel)
                .map(|i| round_to(philox::normal_f32_as_f64(seed, offset, i, a, b), out))
                .collect(),
        };
        let arr = ArrayD::from_shape_vec(IxDyn(&shape), values)
            .map_err(|_| invalid_ir(format!("{name}: shape")))?;
        Ok(HostData::Float(arr))
    }

    /// `gather` (index no larger than the input in non-axis dims) or `take_along_axis`
    /// (index and input broadcast against each other in non-axis dims).
    fn gather(&self, e: &Expr, axis: usize, broadcast: bool) -> Result<HostData> {
        let name = e.op.name();
        let x = self.moved(e)?;
        let idx = self.index_tensor(e, self.arg(e, 1)?)?;
        let rank = x.rank();
        if axis >= rank {
            return Err(self.axis_error(e, axis, rank));
        }
        if idx.ndim() != rank {
            return Err(Error::Rank {
                op: name.into(),
                expected: format!("{rank} (the input's rank) for the index"),
                found: idx.ndim(),
            });
        }
        let (xk, ik) = (self.kinds(e, 0), self.kinds(e, 1));
        let mut out_shape = idx.shape().to_vec();
        for d in (0..rank).filter(|&d| d != axis) {
            let (xs, is) = (x.shape()[d], idx.shape()[d]);
            if !broadcast {
                if is > xs {
                    return Err(Error::shape(
                        name,
                        format!("index size <= {xs} at dim {d} (the input's size)"),
                        format!(
                            "{is} (index shape {:?}, input shape {:?})",
                            idx.shape(),
                            x.shape()
                        ),
                    ));
                }
                continue;
            }
            let x_b = xk.get(d) == Some(&IterKind::Broadcast);
            let i_b = ik.get(d) == Some(&IterKind::Broadcast);
            out_shape[d] = match (x_b, i_b) {
                (true, _) => is,
                (false, true) => xs,
                (false, false) if xs == is => xs,
                _ => {
                    return Err(Error::shape(
                        name,
                        format!("index size {xs} at dim {d} (or a broadcast dim)"),
                        format!(
                            "{is} (index shape {:?}, input shape {:?})",
                            idx.shape(),
                            x.shape()
                        ),
                    ))
                }
            };
        }
        checked_numel(name, &out_shape)?;
        sh::check_indices(name, idx, axis, x.shape()[axis])?;
        let view = idx
            .broadcast(IxDyn(&out_shape))
            .ok_or_else(|| invalid_ir(format!("{name}: index does not broadcast")))?;
        // Input dims of size 1 broadcast inside `gather` (stride 0); any other size equals
        // the output's here.
        sh::gather(name, x.data(), axis, view)
    }
}
