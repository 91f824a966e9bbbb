//! Reductions over size-1 dims only, computed as the pointwise math they are.
//!
//! A reduction whose reduced dims are all broadcast dims (or dims of constant size 1)
//! reduces one element per output element: it is a squeeze followed by elementwise
//! math. Left as a reduction it asks the reduction schedulers for a shape they were not
//! built for (a reduced dim of extent 1 beside kept dims of another layout): CPU fuzz
//! seed 12124262 (`x[1, A, B, H].var([0])`) was refused by every scheduler ("blockIdx.x
//! is bound to two extents"). [`pointwise_unit_reductions`] rewrites each such
//! reduction as `squeeze(x)` followed by the reference's value of a one-element
//! reduction (`eval::reduce`), exactly:
//!
//! - `sum`, `mean`: `x + 0` (the reference's pairwise sum starts from `+0`, so `-0`
//!   sums to `+0`; every other value is itself);
//! - `prod`, `max`, `min`: `x` (cast to the result's type, a copy when it has it);
//! - `var` with correction `c`: `(x - x)² / max(0, 1 - c)`: `0` for a finite `x` and
//!   `c <= 0`, NaN for an infinite or NaN `x` and for `c >= 1` (`0 / 0`), as the
//!   reference's `M2 / max(0, n - c)` with `n = 1`;
//! - `var_mean`: the variance above and the mean `x + 0`;
//! - `welford`: mean `x + 0`, `M2 = (x - x)²`, count `1` (an i64 `where` whose both
//!   branches are 1, so no creation op joins the fusion).
//!
//! An expanded dim (stride 0, any size) is not size 1 and keeps its reduction. The
//! rewritten fusion has the same inputs and outputs (same ids, the outputs' types
//! without their reduction dims, as pointwise results have none); the squeeze is
//! moved to the value read from memory afterwards (`push_squeezes`). The registry
//! offers the rewritten fusion to the tuned schedulers first and the fusion as it is
//! after (`registry::forms`), as for `squeeze_reduction_broadcasts`: a `keepdim`
//! result (`x[1, B, N].mean([0], keepdim)`) becomes a computed value broadcast to a
//! higher rank, which the pointwise scheduler refuses, and the reduction scheduler
//! still takes the fusion as written.

use smallvec::{smallvec, SmallVec};

use crate::dtype::{DataType, ScalarValue};
use crate::ir::{
    BinaryOp, Expr, Fusion, IterDomain, IterKind, Op, ReductionOp, TensorType, TernaryOp, Val,
    ValId, ValKind,
};

/// `f` with every live reduction over size-1 dims only rewritten as pointwise math
/// (see the module documentation), or `None` when there is none.
pub fn pointwise_unit_reductions(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let unit = |e: &Expr| unit_axes(f, e).is_some();
    if !f.exprs().any(|(id, e)| live[id.index()] && unit(e)) {
        return None;
    }
    let mut nf = f.without_exprs();
    for (id, e) in f.exprs() {
        let axes = live[id.index()].then(|| unit_axes(f, e)).flatten();
        let Some(axes) = axes else {
            nf.push_expr(e.clone());
            continue;
        };
        // Every check was made by `unit_axes`; a value without a tensor type would be a
        // malformed fusion, left to the schedulers' own checks.
        Rewriter { f, nf: &mut nf }.rewrite(e, &axes)?;
    }
    Some(nf)
}

/// The reduced axes of `e` (indices among its input's shape dims) when `e` is a
/// reduction whose reduced dims are all of size 1.
fn unit_axes(f: &Fusion, e: &Expr) -> Option<Vec<usize>> {
    let axes = e.op.reduction_axes()?;
    let xt = f.tensor_type(*e.inputs.first()?)?;
    let shape = xt.shape_dims();
    let unit = |a: &usize| {
        shape.get(*a).is_some_and(|d| {
            d.kind == IterKind::Broadcast
                || (d.kind != IterKind::Reduction && d.extent.as_const() == Some(1))
        })
    };
    // Every output must be a tensor (a reduction's outputs always are).
    let outputs_ok = e.outputs.iter().all(|&o| f.tensor_type(o).is_some());
    (outputs_ok && axes.iter().all(unit)).then(|| axes.to_vec())
}

struct Rewriter<'a> {
    f: &'a Fusion,
    nf: &'a mut Fusion,
}

impl Rewriter<'_> {
    /// A new tensor of `dtype` over `dims`.
    fn tensor(&mut self, dtype: DataType, dims: &[IterDomain]) -> ValId {
        self.nf.push_val(Val {
            dtype,
            kind: ValKind::Tensor(TensorType::contiguous(dims.to_vec())),
            definition: None,
        })
    }

    /// A constant scalar.
    fn constant(&mut self, dtype: DataType, value: ScalarValue) -> ValId {
        self.nf.push_val(Val {
            dtype,
            kind: ValKind::Scalar(Some(value)),
            definition: None,
        })
    }

    fn emit(&mut self, op: Op, inputs: SmallVec<[ValId; 3]>, out: ValId) {
        self.nf.push_expr(Expr {
            op,
            inputs: inputs.into_iter().collect(),
            outputs: smallvec![out],
        });
    }

    /// `x` as `dtype` (itself when it has it).
    fn as_dtype(&mut self, x: ValId, dtype: DataType, dims: &[IterDomain]) -> ValId {
        if self.nf.val(x).dtype == dtype {
            return x;
        }
        let c = self.tensor(dtype, dims);
        self.emit(Op::Cast, smallvec![x], c);
        c
    }

    /// Writes `op(inputs)` into `out`, or into a new value when `out` is `None`.
    fn write(
        &mut self,
        op: Op,
        inputs: SmallVec<[ValId; 3]>,
        out: Option<ValId>,
        dtype: DataType,
        dims: &[IterDomain],
    ) -> ValId {
        let out = out.unwrap_or_else(|| self.tensor(dtype, dims));
        self.emit(op, inputs, out);
        out
    }

    /// `v + 0` into `out` (the one-element sum: `-0` becomes `+0`).
    fn plus_zero(&mut self, v: ValId, out: ValId, dims: &[IterDomain]) {
        let dtype = self.nf.val(out).dtype;
        let zero = self.constant(DataType::F64, ScalarValue::Float(0.0));
        self.write(
            Op::Binary(BinaryOp::Add),
            smallvec![v, zero],
            Some(out),
            dtype,
            dims,
        );
    }

    /// `(v - v)²` into `out` when given: the one-element sum of squared deviations.
    fn m2(&mut self, v: ValId, out: Option<ValId>, dims: &[IterDomain]) -> ValId {
        let dtype = self.nf.val(v).dtype;
        let d = self.write(
            Op::Binary(BinaryOp::Sub),
            smallvec![v, v],
            None,
            dtype,
            dims,
        );
        self.write(Op::Binary(BinaryOp::Mul), smallvec![d, d], out, dtype, dims)
    }

    /// The one-element variance with `correction` into `out`.
    fn variance(&mut self, v: ValId, correction: i64, out: ValId, dims: &[IterDomain]) {
        let dof = (1i128 - i128::from(correction)).max(0);
        if dof == 1 {
            self.m2(v, Some(out), dims);
            return;
        }
        let dtype = self.nf.val(out).dtype;
        let m2 = self.m2(v, None, dims);
        let c = self.constant(DataType::F64, ScalarValue::Float(dof as f64));
        self.write(
            Op::Binary(BinaryOp::Div),
            smallvec![m2, c],
            Some(out),
            dtype,
            dims,
        );
    }

    /// Copies or casts `v` into `out`.
    fn copy(&mut self, v: ValId, out: ValId, dims: &[IterDomain]) {
        let dtype = self.nf.val(out).dtype;
        let op = if self.nf.val(v).dtype == dtype {
            Op::Set
        } else {
            Op::Cast
        };
        self.write(op, smallvec![v], Some(out), dtype, dims);
    }

    /// Pushes the pointwise form of reduction `e` over the size-1 `axes`.
    fn rewrite(&mut self, e: &Expr, axes: &[usize]) -> Option<()> {
        let f = self.f;
        let x = e.inputs[0];
        let xt = f.tensor_type(x)?;
        let dims: Vec<IterDomain> = xt
            .shape()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, d)| d.clone())
            .collect();
        let sq = if axes.is_empty() {
            x
        } else {
            let sq = self.tensor(f.val(x).dtype, &dims);
            self.emit(
                Op::Squeeze {
                    axes: axes.to_vec(),
                },
                smallvec![x],
                sq,
            );
            sq
        };
        // The outputs become pointwise results: their dims without the reduced ones.
        for &o in &e.outputs {
            let ot = f.tensor_type(o)?;
            self.nf.val_mut(o).kind = ValKind::Tensor(TensorType::contiguous(ot.shape_dims()));
        }
        let out_dtype = |k: usize| f.val(e.outputs[k]).dtype;
        match &e.op {
            Op::Reduction { op, .. } => {
                let o = e.outputs[0];
                let dtype = out_dtype(0);
                match op {
                    ReductionOp::Sum | ReductionOp::Mean if dtype.is_float() => {
                        let v = self.as_dtype(sq, dtype, &dims);
                        self.plus_zero(v, o, &dims);
                    }
                    _ => self.copy(sq, o, &dims),
                }
            }
            Op::Var { correction, .. } => {
                let v = self.as_dtype(sq, out_dtype(0), &dims);
                self.variance(v, *correction, e.outputs[0], &dims);
            }
            Op::VarMean { correction, .. } => {
                let v = self.as_dtype(sq, out_dtype(0), &dims);
                self.variance(v, *correction, e.outputs[0], &dims);
                let m = self.as_dtype(sq, out_dtype(1), &dims);
                self.plus_zero(m, e.outputs[1], &dims);
            }
            Op::Welford { .. } => {
                let v = self.as_dtype(sq, out_dtype(0), &dims);
                self.plus_zero(v, e.outputs[0], &dims);
                let w = self.as_dtype(sq, out_dtype(1), &dims);
                self.m2(w, Some(e.outputs[1]), &dims);
                // The count: 1 for every element, whatever the value.
                let count = e.outputs[2];
                let cd = out_dtype(2);
                let any = self.write(
                    Op::Binary(BinaryOp::Ne),
                    smallvec![v, v],
                    None,
                    DataType::Bool,
                    &dims,
                );
                let one = self.constant(cd, ScalarValue::Int(1));
                self.write(
                    Op::Ternary(TernaryOp::Where),
                    smallvec![any, one, one],
                    Some(count),
                    cd,
                    &dims,
                );
            }
            _ => return None,
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
