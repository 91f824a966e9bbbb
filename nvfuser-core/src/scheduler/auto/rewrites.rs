//! Fusion rewrites the inner persistent schedule applies before scheduling, each
//! keeping the outputs' ids: uncorrected moments computed in two passes over the row,
//! and a division by a per-row value turned into a multiplication by its reciprocal.

use crate::ir::{Fusion, Op, ValId};

/// The fusion with every uncorrected `var_mean` / `var` computed in two passes over the
/// row: `mean = mean(x)`, then `var = mean((x - mean)²)`. With the row in registers the
/// second pass reads no memory, and two plain block reductions replace a Welford update
/// (a division per element) and a Welford combine. An f32 mean accumulates in f64.
/// Outputs keep their ids; a nonzero correction keeps the Welford form.
pub(crate) fn two_pass_moments(f: &Fusion) -> Fusion {
    use crate::dtype::DataType;
    use crate::ir::{BinaryOp, Expr, IterDomain, ReductionOp, TensorType, Val, ValKind};
    use smallvec::smallvec;
    let mut nf = f.without_exprs();
    let full_type = |x: ValId, broadcast_axes: &[usize]| -> Option<TensorType> {
        let t = f.tensor_type(x)?;
        let dims: Vec<IterDomain> = t
            .shape()
            .enumerate()
            .map(|(i, d)| {
                if broadcast_axes.contains(&i) {
                    IterDomain::broadcast()
                } else {
                    d.clone()
                }
            })
            .collect();
        Some(TensorType::contiguous(dims))
    };
    for (_, e) in f.exprs() {
        let (axes, var, mean) = match &e.op {
            Op::VarMean {
                axes,
                correction: 0,
            } => (axes.clone(), e.outputs[0], Some(e.outputs[1])),
            Op::Var {
                axes,
                correction: 0,
            } => (axes.clone(), e.outputs[0], None),
            _ => {
                nf.push_expr(e.clone());
                continue;
            }
        };
        let x = e.inputs[0];
        let (Some(bt), Some(ft)) = (full_type(x, &axes), full_type(x, &[])) else {
            nf.push_expr(e.clone());
            continue;
        };
        let dtype = f.val(var).dtype;
        let mean = mean.unwrap_or_else(|| {
            nf.push_val(Val {
                dtype,
                kind: f.val(var).kind.clone(),
                definition: None,
            })
        });
        let tensor = |nf: &mut Fusion, t: &TensorType| {
            nf.push_val(Val {
                dtype,
                kind: ValKind::Tensor(t.clone()),
                definition: None,
            })
        };
        let rank = ft.domain.len();
        // An f32 mean is accumulated in f64 and rounded once, as the reference's: an
        // f32 sum overflows for rows near f32::MAX (a LayerNorm of them gave NaN where
        // the reference and PyTorch's Welford give the bias), and rounds a constant
        // row's mean away from its value. One conversion and one f64 add per element
        // cost nothing in a memory-bound kernel.
        let wide = dtype == DataType::F32 && f.val(x).dtype == DataType::F32;
        let (src, dst) = if wide {
            let xd = nf.push_val(Val {
                dtype: DataType::F64,
                kind: ValKind::Tensor(ft.clone()),
                definition: None,
            });
            nf.push_expr(Expr {
                op: Op::Cast,
                inputs: smallvec![x],
                outputs: smallvec![xd],
            });
            let md = nf.push_val(Val {
                dtype: DataType::F64,
                kind: f.val(var).kind.clone(),
                definition: None,
            });
            (xd, md)
        } else {
            (x, mean)
        };
        nf.push_expr(Expr {
            op: Op::Reduction {
                op: ReductionOp::Mean,
                axes: axes.clone(),
            },
            inputs: smallvec![src],
            outputs: smallvec![dst],
        });
        if wide {
            // The mean is a cast of the f64 reduction: its dims are the kept ones. The
            // type is read from `nf`: a `var` alone has no mean in `f`, its fresh one
            // (with the reduced dims of `var`'s type) is only in `nf` (CPU fuzz seed
            // 13200097: the cast kept a reduction dim and the lowering took it for a
            // reduction, "lowering of cast is not implemented").
            if let Some(t) = nf.tensor_type(mean) {
                let kept = TensorType::contiguous(t.shape().cloned().collect());
                nf.vals[mean.index()].kind = ValKind::Tensor(kept);
            }
            nf.push_expr(Expr {
                op: Op::Cast,
                inputs: smallvec![dst],
                outputs: smallvec![mean],
            });
        }
        let mb = tensor(&mut nf, &bt);
        nf.push_expr(Expr {
            op: Op::Broadcast {
                mask: (0..rank).map(|i| axes.contains(&i)).collect(),
            },
            inputs: smallvec![mean],
            outputs: smallvec![mb],
        });
        let d = tensor(&mut nf, &ft);
        nf.push_expr(Expr {
            op: Op::Binary(BinaryOp::Sub),
            inputs: smallvec![x, mb],
            outputs: smallvec![d],
        });
        let d2 = tensor(&mut nf, &ft);
        nf.push_expr(Expr {
            op: Op::Binary(BinaryOp::Mul),
            inputs: smallvec![d, d],
            outputs: smallvec![d2],
        });
        nf.push_expr(Expr {
            op: Op::Reduction {
                op: ReductionOp::Mean,
                axes,
            },
            inputs: smallvec![d2],
            outputs: smallvec![var],
        });
    }
    nf
}

/// The fusion with every float division by a broadcast per-row value
/// (`x / broadcast(s)`, softmax's normalization) turned into a multiplication by the
/// row's reciprocal, computed once per row: an IEEE division per element costs about
/// ten instructions, a multiplication one. The result may differ from the division in
/// the last bit of f32. Outputs keep their ids.
pub(crate) fn divide_by_reciprocal(f: &Fusion) -> Fusion {
    use crate::ir::{BinaryOp, Expr, TensorType, UnaryOp, Val, ValKind};
    use smallvec::smallvec;
    let mut nf = f.without_exprs();
    for (_, e) in f.exprs() {
        let per_row_divisor = match &e.op {
            Op::Binary(BinaryOp::Div) if f.val(e.outputs[0]).dtype.is_float() => {
                let b = e.inputs[1];
                f.val(b).definition.and_then(|d| {
                    let be = f.expr(d);
                    let src = be.inputs[0];
                    let computed = f.input_position(src).is_none() && f.val(src).is_tensor();
                    (matches!(be.op, Op::Broadcast { .. })
                        && computed
                        && f.val(src).dtype == f.val(b).dtype)
                        .then(|| (be.op.clone(), src, b))
                })
            }
            _ => None,
        };
        let Some((bcast, src, b)) = per_row_divisor else {
            nf.push_expr(e.clone());
            continue;
        };
        // Fresh values shaped like `like` (reduction dims dropped: a pointwise result).
        let fresh = |nf: &mut Fusion, like: ValId| {
            let t = f.tensor_type(like).expect("a tensor");
            nf.push_val(Val {
                dtype: f.val(like).dtype,
                kind: ValKind::Tensor(TensorType::contiguous(t.shape_dims())),
                definition: None,
            })
        };
        let r = fresh(&mut nf, src);
        nf.push_expr(Expr {
            op: Op::Unary(UnaryOp::Reciprocal),
            inputs: smallvec![src],
            outputs: smallvec![r],
        });
        let rb = fresh(&mut nf, b);
        nf.push_expr(Expr {
            op: bcast,
            inputs: smallvec![r],
            outputs: smallvec![rb],
        });
        nf.push_expr(Expr {
            op: Op::Binary(BinaryOp::Mul),
            inputs: smallvec![e.inputs[0], rb],
            outputs: e.outputs.clone(),
        });
    }
    nf
}
