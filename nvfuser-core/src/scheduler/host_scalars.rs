//! The host scalar program (nvFuser's `ExpressionEvaluator` before a launch).
//!
//! Kernels run tensor math only. A scalar computed inside a fusion from sizes and scalar
//! inputs (`full([2, 2], s0 + s1)`, `reshape(x, [x.size(0), a, b])`, a slice ending at
//! `x.size(1) - 1`, `x * f32(x.size(1) + 1)`) is computed on the host before the launch
//! and passed to the kernel as a scalar argument.
//!
//! [`split_host_scalars`] splits a fusion into
//!
//! - a *kernel fusion*: the original inputs first, in order (so argument positions stay
//!   valid), then one new scalar input per computed scalar that tensor expressions or
//!   tensor extents use; the scalar expressions are gone;
//! - a [`HostScalarProgram`] that computes those extra arguments from a call's tensor
//!   sizes and scalar arguments. It is a scalar-only [`Fusion`] run by the CPU reference
//!   evaluator ([`crate::eval::evaluate`]), so its values are exactly the reference's.
//!   Each `size` expression becomes an `i64` input of the program, its value the
//!   tensor's declared extent evaluated from the call (the evaluator checks every
//!   result's size against its declared extent, so the two agree).
//!
//! A fusion without computed scalars that tensors use is not split (`None`: no cost). A
//! fusion with a scalar output, or a `size` of a tensor whose extent depends on a
//! computed scalar, is not split either: the schedulers refuse it as before.

use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::dtype::{DataType, ScalarValue};
use crate::error::{Error, Result};
use crate::eval::{evaluate, EvalInput};
use crate::ir::bind::BoundArg;
use crate::ir::{
    BinaryOp, Expr, ExprId, Extent, ExtentOp, Fusion, Op, Output, Val, ValId, ValKind,
};

/// A fusion split into the kernel part and the host scalar program.
#[derive(Clone, Debug)]
pub struct HostScalarSplit {
    /// The fusion the kernels run: the original inputs, then one scalar input per
    /// value of [`HostScalarProgram::computed`]; no scalar expressions.
    pub kernel: Fusion,
    /// Computes the extra arguments of the kernel fusion.
    pub program: HostScalarProgram,
}

/// Where one input of the host program comes from.
#[derive(Clone, Debug)]
enum Source {
    /// The original call's argument at this position (a scalar).
    Arg(usize),
    /// An extent in the original fusion's ids (its dims and scalars are inputs), i.e.
    /// the value of a `size` expression.
    Extent(Extent),
}

/// Computes, from a call's arguments, the scalar arguments that the kernel fusion of a
/// [`HostScalarSplit`] takes after the original ones.
#[derive(Clone, Debug)]
pub struct HostScalarProgram {
    /// Scalar-only; its outputs are the extra arguments, in order.
    program: Fusion,
    /// Per program input, its value's source.
    sources: Vec<Source>,
    /// Original input id -> (argument position, declared dtype).
    positions: FxHashMap<ValId, (usize, DataType)>,
    /// The original values that became kernel inputs, in order.
    computed: Vec<ValId>,
    /// Number of original inputs.
    num_args: usize,
}

impl HostScalarProgram {
    /// The original fusion's values whose results the extra arguments are, in order.
    pub fn computed(&self) -> &[ValId] {
        &self.computed
    }

    /// The scalar-only fusion the CPU reference evaluates.
    pub fn fusion(&self) -> &Fusion {
        &self.program
    }

    /// The extra scalar arguments of a call (`args`: the original fusion's arguments,
    /// already checked against its declarations), with the CPU reference's semantics.
    pub fn evaluate(&self, args: &[BoundArg<'_>]) -> Result<Vec<ScalarValue>> {
        const OP: &str = "host scalar program";
        if args.len() != self.num_args {
            return Err(Error::arity(OP, "arguments", self.num_args, args.len()));
        }
        let dim = |t: ValId, axis: usize| -> Option<i64> {
            match args.get(self.positions.get(&t)?.0)? {
                BoundArg::Tensor(sizes) => sizes.get(axis).and_then(|&s| i64::try_from(s).ok()),
                BoundArg::Scalar(_) => None,
            }
        };
        let scalar = |v: ValId| -> Option<i64> {
            let &(pos, dtype) = self.positions.get(&v)?;
            match args.get(pos)? {
                BoundArg::Scalar(s) => s.cast(dtype).as_i64(),
                BoundArg::Tensor(_) => None,
            }
        };
        let inputs = self
            .sources
            .iter()
            .map(|s| match s {
                Source::Arg(pos) => match args.get(*pos) {
                    Some(BoundArg::Scalar(v)) => Ok(EvalInput::Scalar(*v)),
                    _ => Err(Error::invalid(
                        OP,
                        format!("argument {pos} is not the scalar the program reads"),
                    )),
                },
                Source::Extent(e) => e
                    .eval(&dim, &scalar)
                    .map(|n| EvalInput::Scalar(ScalarValue::Int(n)))
                    .ok_or_else(|| {
                        Error::invalid(
                            OP,
                            format!("the extent {e} does not evaluate from the arguments"),
                        )
                    }),
            })
            .collect::<Result<Vec<_>>>()?;
        evaluate(&self.program, &inputs)?
            .iter()
            .map(|t| {
                t.item()
                    .ok_or_else(|| Error::InvalidIr(format!("{OP}: an output is not a scalar")))
            })
            .collect()
    }
}

/// Splits `fusion` into a kernel fusion and a host scalar program (see the module
/// documentation); `None` when nothing needs splitting or the split does not apply.
pub fn split_host_scalars(fusion: &Fusion) -> Option<HostScalarSplit> {
    let f = fusion;
    if f.outputs().iter().any(|o| !f.val(o.val).is_tensor()) {
        return None;
    }
    let n = f.num_vals();
    let mut is_input = vec![false; n];
    for &i in f.inputs() {
        is_input[i.index()] = true;
    }
    let live = f.live_exprs();
    // Host-computed values: outputs of live scalar expressions over scalars (inputs,
    // constants, host values) and of `size`.
    let mut host = vec![false; n];
    let mut host_expr = vec![false; f.num_exprs()];
    for (id, e) in f.exprs() {
        if !live[id.index()] || e.outputs.iter().any(|&o| f.val(o).is_tensor()) {
            continue;
        }
        let ok = match e.op {
            Op::Size { .. } => e.inputs.first().is_some_and(|&t| f.val(t).is_tensor()),
            _ => e.inputs.iter().all(|&i| {
                let v = f.val(i);
                !v.is_tensor() && (is_input[i.index()] || v.constant().is_some() || host[i.index()])
            }),
        };
        if !ok {
            return None;
        }
        host_expr[id.index()] = true;
        for &o in &e.outputs {
            host[o.index()] = true;
        }
    }
    // The host values the kernel needs: read by a live tensor expression, or in the
    // extents of a live tensor.
    let mut needed = vec![false; n];
    let mut live_tensors: Vec<ValId> = f.inputs().to_vec();
    live_tensors.extend(f.outputs().iter().map(|o| o.val));
    for (id, e) in f.exprs() {
        if live[id.index()] && !host_expr[id.index()] {
            for &i in &e.inputs {
                needed[i.index()] |= host[i.index()];
            }
            live_tensors.extend(e.inputs.iter().chain(&e.outputs).copied());
        }
    }
    for &t in &live_tensors {
        if let Some(tt) = f.tensor_type(t) {
            for d in &tt.domain {
                d.extent
                    .for_each_val(&mut |v| needed[v.index()] |= host[v.index()]);
            }
        }
    }
    let computed: Vec<ValId> = (0..n as u32)
        .map(ValId::new)
        .filter(|v| needed[v.index()])
        .collect();
    if computed.is_empty() {
        return None;
    }
    let program = build_program(f, &is_input, &host, &computed)?;
    let kernel = build_kernel(f, &live, &host_expr, &computed);
    Some(HostScalarSplit { kernel, program })
}

/// The scalar-only fusion computing `computed` (host values) from the original scalar
/// inputs and one `i64` input per `size` expression.
fn build_program(
    f: &Fusion,
    is_input: &[bool],
    host: &[bool],
    computed: &[ValId],
) -> Option<HostScalarProgram> {
    let Cone {
        in_cone,
        exprs,
        sizes,
        derived_dims,
    } = cone(f, is_input, host, computed)?;
    let positions: FxHashMap<ValId, (usize, DataType)> = f
        .inputs()
        .iter()
        .enumerate()
        .map(|(p, &i)| (i, (p, f.val(i).dtype)))
        .collect();
    let mut program = Fusion::new();
    let mut map: FxHashMap<ValId, ValId> = FxHashMap::default();
    let mut sources = Vec::new();
    let scalar_val = |dtype, c| Val {
        dtype,
        kind: ValKind::Scalar(c),
        definition: None,
    };
    for (pos, &i) in f.inputs().iter().enumerate() {
        if in_cone[i.index()] && !f.val(i).is_tensor() {
            map.insert(i, program.push_val(scalar_val(f.val(i).dtype, None)));
            sources.push(Source::Arg(pos));
        }
    }
    for &s in &sizes {
        let e = f.expr(f.val(s).definition?);
        let Op::Size { axis } = e.op else {
            return None;
        };
        let extent = f
            .tensor_type(*e.inputs.first()?)?
            .shape()
            .nth(axis)?
            .extent
            .clone();
        // Only extents of the call's own sizes and scalar arguments.
        let mut closed = true;
        extent.for_each_val(&mut |v| closed &= is_input[v.index()]);
        if !closed {
            return None;
        }
        map.insert(s, program.push_val(scalar_val(f.val(s).dtype, None)));
        sources.push(Source::Extent(extent));
    }
    let mut dim_vals: FxHashMap<(ValId, u32), ValId> = FxHashMap::default();
    for &(tensor, axis) in &derived_dims {
        dim_vals.insert(
            (tensor, axis),
            program.push_val(scalar_val(DataType::I64, None)),
        );
        sources.push(Source::Extent(Extent::Dim { tensor, axis }));
    }
    program.inputs = (0..sources.len() as u32).map(ValId::new).collect();
    for &e in &exprs {
        let expr = f.expr(e);
        if let Op::Size { axis } = expr.op {
            // A size of a computed tensor: its extent as program arithmetic.
            let extent = &f
                .tensor_type(*expr.inputs.first()?)?
                .shape()
                .nth(axis)?
                .extent;
            let r = emit_extent(&mut program, &mut map, &dim_vals, f, extent)?;
            map.insert(*expr.outputs.first()?, r);
            continue;
        }
        let mut inputs: SmallVec<[ValId; 3]> = SmallVec::new();
        for &i in &expr.inputs {
            let v = match map.get(&i) {
                Some(&v) => v,
                None => {
                    let val = f.val(i);
                    val.constant()?;
                    let c = program.push_val(scalar_val(val.dtype, val.constant()));
                    map.insert(i, c);
                    c
                }
            };
            inputs.push(v);
        }
        let outputs = expr
            .outputs
            .iter()
            .map(|&o| {
                let v = program.push_val(scalar_val(f.val(o).dtype, None));
                map.insert(o, v);
                v
            })
            .collect();
        program.push_expr(Expr {
            op: expr.op.clone(),
            inputs,
            outputs,
        });
    }
    program.outputs = computed
        .iter()
        .map(|c| {
            map.get(c).map(|&val| Output {
                val,
                alias_of: None,
            })
        })
        .collect::<Option<_>>()?;
    Some(HostScalarProgram {
        program,
        sources,
        positions,
        computed: computed.to_vec(),
        num_args: f.inputs().len(),
    })
}

/// The host part of the cone of a host-scalar program's outputs.
struct Cone {
    /// Per value: whether the cone reaches it.
    in_cone: Vec<bool>,
    /// The expressions the program recomputes, arena order.
    exprs: Vec<ExprId>,
    /// The `size` values whose extents the call's own sizes and scalars give, sorted.
    sizes: Vec<ValId>,
    /// Input dims read by the extents of sizes of computed tensors, sorted.
    derived_dims: Vec<(ValId, u32)>,
}

/// The cone of `computed`, back to inputs, constants and `size` expressions; `None`
/// when the size of a computed tensor reads something the host does not know.
fn cone(f: &Fusion, is_input: &[bool], host: &[bool], computed: &[ValId]) -> Option<Cone> {
    let mut in_cone = vec![false; f.num_vals()];
    let mut stack: Vec<ValId> = computed.to_vec();
    let mut exprs: Vec<ExprId> = Vec::new();
    let mut sizes: Vec<ValId> = Vec::new();
    // Input dims read by the extents of sizes of computed tensors.
    let mut derived_dims: Vec<(ValId, u32)> = Vec::new();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut in_cone[v.index()], true) {
            continue;
        }
        let Some(def) = f.val(v).definition.filter(|_| host[v.index()]) else {
            continue;
        };
        let e = f.expr(def);
        if let Op::Size { axis } = e.op {
            let extent = &f.tensor_type(*e.inputs.first()?)?.shape().nth(axis)?.extent;
            let mut closed = true;
            extent.for_each_val(&mut |w| closed &= is_input[w.index()]);
            if closed {
                sizes.push(v);
            } else {
                // The size of a computed tensor (a slice to a computed bound): its
                // extent is computed by the program from the input dims it reads and
                // the host values it names.
                let mut ok = true;
                extent.for_each_val(&mut |w| {
                    if f.val(w).is_tensor() {
                        ok &= is_input[w.index()];
                    } else {
                        ok &=
                            is_input[w.index()] || host[w.index()] || f.val(w).constant().is_some();
                        stack.push(w);
                    }
                });
                if !ok {
                    return None;
                }
                collect_dims(extent, &mut derived_dims);
                exprs.push(def);
            }
        } else {
            exprs.push(def);
            stack.extend(e.inputs.iter().copied());
        }
    }
    exprs.sort_unstable();
    exprs.dedup();
    sizes.sort_unstable();
    derived_dims.sort_unstable();
    derived_dims.dedup();
    Some(Cone {
        in_cone,
        exprs,
        sizes,
        derived_dims,
    })
}

/// The input dims an extent reads.
fn collect_dims(e: &Extent, out: &mut Vec<(ValId, u32)>) {
    match e {
        Extent::Dim { tensor, axis } => out.push((*tensor, *axis)),
        Extent::Op(_, a, b) => {
            collect_dims(a, out);
            collect_dims(b, out);
        }
        Extent::Const(_) | Extent::Scalar(_) => {}
    }
}

/// `e` as integer arithmetic in the host program (values of `map`, input dims of
/// `dims`); its result. Extents are non-negative, so floor division is the evaluator's
/// truncating one, and a ceiling division is `(a + b - 1) / b`.
fn emit_extent(
    program: &mut Fusion,
    map: &mut FxHashMap<ValId, ValId>,
    dims: &FxHashMap<(ValId, u32), ValId>,
    f: &Fusion,
    e: &Extent,
) -> Option<ValId> {
    let int = |program: &mut Fusion, c: Option<ScalarValue>| {
        program.push_val(Val {
            dtype: DataType::I64,
            kind: ValKind::Scalar(c),
            definition: None,
        })
    };
    let binary = |program: &mut Fusion, op: BinaryOp, x: ValId, y: ValId| {
        let out = int(program, None);
        program.push_expr(Expr {
            op: Op::Binary(op),
            inputs: smallvec::smallvec![x, y],
            outputs: smallvec::smallvec![out],
        });
        out
    };
    Some(match e {
        Extent::Const(c) => int(program, Some(ScalarValue::Int(*c))),
        Extent::Dim { tensor, axis } => *dims.get(&(*tensor, *axis))?,
        Extent::Scalar(w) => match map.get(w) {
            Some(&v) => v,
            None => {
                let c = f.val(*w).constant()?;
                let v = int(program, Some(c));
                map.insert(*w, v);
                v
            }
        },
        Extent::Op(op, a, b) => {
            let x = emit_extent(program, map, dims, f, a)?;
            let y = emit_extent(program, map, dims, f, b)?;
            match op {
                ExtentOp::Add => binary(program, BinaryOp::Add, x, y),
                ExtentOp::Sub => binary(program, BinaryOp::Sub, x, y),
                ExtentOp::Mul => binary(program, BinaryOp::Mul, x, y),
                ExtentOp::Div => binary(program, BinaryOp::Div, x, y),
                ExtentOp::Max => binary(program, BinaryOp::Maximum, x, y),
                ExtentOp::Min => binary(program, BinaryOp::Minimum, x, y),
                ExtentOp::CeilDiv => {
                    let one = int(program, Some(ScalarValue::Int(1)));
                    let s = binary(program, BinaryOp::Add, x, y);
                    let t = binary(program, BinaryOp::Sub, s, one);
                    binary(program, BinaryOp::Div, t, y)
                }
            }
        }
    })
}

/// The original fusion without its scalar expressions (and dead ones), `computed` turned
/// into inputs after the original inputs; values renumbered in arena order.
fn build_kernel(f: &Fusion, live: &[bool], host_expr: &[bool], computed: &[ValId]) -> Fusion {
    let keep_expr = |id: ExprId| live[id.index()] && !host_expr[id.index()];
    let mut keep = vec![false; f.num_vals()];
    for &i in f.inputs().iter().chain(computed) {
        keep[i.index()] = true;
    }
    for o in f.outputs() {
        keep[o.val.index()] = true;
    }
    for (id, e) in f.exprs() {
        if keep_expr(id) {
            for &v in e.inputs.iter().chain(&e.outputs) {
                keep[v.index()] = true;
            }
        }
    }
    // Values named by the extents of kept tensors (inputs and host values, already
    // kept; marked again for safety).
    let extent_vals: FxHashSet<ValId> = f
        .vals()
        .filter(|(id, _)| keep[id.index()])
        .filter_map(|(_, v)| v.tensor())
        .flat_map(|t| {
            let mut vs = Vec::new();
            for d in &t.domain {
                d.extent.for_each_val(&mut |v| vs.push(v));
            }
            vs
        })
        .collect();
    for v in extent_vals {
        keep[v.index()] = true;
    }
    let mut map = vec![ValId::new(u32::MAX); f.num_vals()];
    let mut next = 0u32;
    for (id, _) in f.vals() {
        if keep[id.index()] {
            map[id.index()] = ValId::new(next);
            next += 1;
        }
    }
    let remap = |v: ValId| map[v.index()];
    let mut kernel = Fusion::new();
    kernel.segment = f.segment;
    for (id, v) in f.vals() {
        if !keep[id.index()] {
            continue;
        }
        let kind = match &v.kind {
            ValKind::Tensor(t) => {
                let mut t = t.clone();
                for d in &mut t.domain {
                    d.extent = d.extent.remap(&remap);
                }
                ValKind::Tensor(t)
            }
            ValKind::Scalar(c) => ValKind::Scalar(*c),
        };
        kernel.push_val(Val {
            dtype: v.dtype,
            kind,
            definition: None,
        });
    }
    for (id, e) in f.exprs() {
        if keep_expr(id) {
            kernel.push_expr(Expr {
                op: e.op.clone(),
                inputs: e.inputs.iter().map(|&v| remap(v)).collect(),
                outputs: e.outputs.iter().map(|&v| remap(v)).collect(),
            });
        }
    }
    kernel.inputs = f
        .inputs()
        .iter()
        .chain(computed)
        .map(|&v| remap(v))
        .collect();
    kernel.outputs = f
        .outputs()
        .iter()
        .map(|o| Output {
            val: remap(o.val),
            alias_of: o.alias_of.map(remap),
        })
        .collect();
    kernel
}

#[cfg(test)]
mod tests;
