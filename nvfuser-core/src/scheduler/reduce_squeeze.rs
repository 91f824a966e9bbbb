//! Reductions with size-1 dims beside their reduced dims, reduced without them.
//!
//! The reduction schedulers take reductions over the innermost dims (rows) or the
//! outermost dims (columns) of their input. A size-1 broadcast dim beside the reduced
//! dims hides that shape: `x[A, B, 1].sum([1])` (a `keepdim` result summed again, an
//! `unsqueeze`d input) reduces a middle dim, and fell to the untuned default schedule
//! (GPU fuzz seed 11337506). [`squeeze_reduction_broadcasts`] rewrites such a reduction
//! as `broadcast(sum(squeeze(x), [1]))`: the squeeze drops the size-1 dims that are not
//! reduced (then [`super::push_squeezes`] moves it to the value read from memory), the
//! reduction runs over the innermost or outermost dims of the squeezed input, and the
//! broadcast restores the size-1 dims of the result. The values are the same: a size-1
//! dim that is not reduced has one element along it, before and after.
//!
//! Only reductions that no scheduler would take as they are, and that become inner
//! reductions without their size-1 dims, are rewritten (the outer reduction scheduler
//! refuses the broadcast of its result back over the size-1 dims). The registry offers
//! the rewritten fusion to the tuned schedulers first and the fusion as it is after
//! (`registry::forms`), so a rewrite none of them takes changes nothing; the rest of the fusion is
//! unchanged (same inputs and outputs, same ids; the reduction's outputs keep their ids
//! as the broadcasts' results, their types lose the reduced dims, as a broadcast's
//! result has none).

use smallvec::SmallVec;

use crate::ir::{Expr, Fusion, IterKind, Op, TensorType, Val, ValId, ValKind};

/// `f` with every reduction that only size-1 dims keep from being an inner reduction
/// rewritten over its input without them (see the module documentation), or
/// `None` when there is none.
pub fn squeeze_reduction_broadcasts(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let uses = f.uses();
    // A result broadcast back to the input's rank (`keepdim`, a normalization: `x -
    // x.max([1], keepdim)`) is combined with tensors that keep the size-1 dims, so the
    // rows would have two ranks: such reductions are left to the schedulers as they are.
    let expanded_again = |e: &Expr, r: usize| {
        e.outputs.iter().any(|o| {
            uses[o.index()].iter().any(|&u| {
                live[u.index()]
                    && matches!(&f.expr(u).op, Op::Broadcast { mask } if mask.len() >= r)
            })
        })
    };
    let plans: Vec<Option<Squeezed>> = f
        .exprs()
        .map(|(id, e)| {
            let p = live[id.index()].then(|| squeezed(f, e)).flatten()?;
            let r = f.tensor_type(e.inputs[0]).map_or(0, |t| t.domain.len());
            (!expanded_again(e, r)).then_some(p)
        })
        .collect();
    if plans.iter().all(Option::is_none) {
        return None;
    }
    let mut nf = f.without_exprs();
    for ((_, e), plan) in f.exprs().zip(plans) {
        let Some(p) = plan else {
            nf.push_expr(e.clone());
            continue;
        };
        let x = e.inputs[0];
        let xt = f.tensor_type(x)?;
        let keep = |d: &[crate::ir::IterDomain]| -> Vec<crate::ir::IterDomain> {
            d.iter()
                .enumerate()
                .filter(|(i, _)| !p.dropped.contains(i))
                .map(|(_, d)| d.clone())
                .collect()
        };
        let sq = nf.push_val(Val {
            dtype: f.val(x).dtype,
            kind: ValKind::Tensor(TensorType::contiguous(keep(&xt.domain))),
            definition: None,
        });
        nf.push_expr(Expr {
            op: Op::Squeeze {
                axes: p.dropped.clone(),
            },
            inputs: SmallVec::from_elem(x, 1),
            outputs: SmallVec::from_elem(sq, 1),
        });
        let mut outs: SmallVec<[ValId; 1]> = SmallVec::new();
        for &o in &e.outputs {
            let ot = f.tensor_type(o)?;
            outs.push(nf.push_val(Val {
                dtype: f.val(o).dtype,
                kind: ValKind::Tensor(TensorType::contiguous(keep(&ot.domain))),
                definition: None,
            }));
        }
        let mut inputs = e.inputs.clone();
        inputs[0] = sq;
        nf.push_expr(Expr {
            op: with_axes(&e.op, p.axes.clone())?,
            inputs,
            outputs: outs.clone(),
        });
        for (&o, &r) in e.outputs.iter().zip(&outs) {
            // The original output, now a broadcast of the squeezed reduction's result:
            // its shape dims, the dropped ones broadcast.
            let ot = f.tensor_type(o)?;
            let shape = ot.shape_dims();
            let mask: Vec<bool> = (0..ot.domain.len())
                .filter(|&i| !ot.domain[i].is_reduction())
                .map(|i| p.dropped.contains(&i))
                .collect();
            let val = nf.val_mut(o);
            val.kind = ValKind::Tensor(TensorType::contiguous(shape));
            nf.push_expr(Expr {
                op: Op::Broadcast { mask },
                inputs: SmallVec::from_elem(r, 1),
                outputs: SmallVec::from_elem(o, 1),
            });
        }
    }
    Some(nf)
}

/// How one reduction is rewritten: the input dims dropped and the reduced axes of the
/// squeezed input.
struct Squeezed {
    dropped: Vec<usize>,
    axes: Vec<usize>,
}

/// The rewrite of `e` when it is a reduction over middle dims that size-1 dims beside
/// them make so, and without them are the innermost dims.
fn squeezed(f: &Fusion, e: &Expr) -> Option<Squeezed> {
    let axes = e.op.reduction_axes()?;
    let xt = f.tensor_type(*e.inputs.first()?)?;
    // Axes index the input's dims; an input with reduction dims of its own is left.
    if xt.domain.iter().any(|d| d.is_reduction()) || axes.is_empty() {
        return None;
    }
    let r = xt.domain.len();
    let k = axes.len();
    let inner = |ax: &[usize], r: usize| ax.iter().enumerate().all(|(i, &a)| a == r - k + i);
    let outer = |ax: &[usize]| ax.iter().enumerate().all(|(i, &a)| a == i);
    if inner(axes, r) || outer(axes) {
        return None;
    }
    // A reduced size-1 dim stays (reducing it is the identity or a count of one).
    if axes.iter().any(|&a| {
        xt.domain
            .get(a)
            .is_none_or(|d| d.kind != IterKind::Iteration)
    }) {
        return None;
    }
    let dropped: Vec<usize> = (0..r)
        .filter(|i| !axes.contains(i) && xt.domain[*i].kind == IterKind::Broadcast)
        .collect();
    if dropped.is_empty() {
        return None;
    }
    let new_axes: Vec<usize> = axes
        .iter()
        .map(|&a| a - dropped.iter().filter(|&&d| d < a).count())
        .collect();
    let nr = r - dropped.len();
    // Reducing every dim that is left would give a rank-0 result: left as it is. Only
    // inner reductions are rewritten: the outer reduction scheduler refuses the
    // broadcast of its result over the size-1 dims (a kept dim), so the rewritten
    // fusion would fall to the default schedule as before, or find no schedule.
    if nr == k || !inner(&new_axes, nr) {
        return None;
    }
    Some(Squeezed {
        dropped,
        axes: new_axes,
    })
}

/// `op` with its reduced axes replaced.
fn with_axes(op: &Op, axes: Vec<usize>) -> Option<Op> {
    Some(match op {
        Op::Reduction { op, .. } => Op::Reduction { op: *op, axes },
        Op::Var { correction, .. } => Op::Var {
            axes,
            correction: *correction,
        },
        Op::VarMean { correction, .. } => Op::VarMean {
            axes,
            correction: *correction,
        },
        Op::Welford { .. } => Op::Welford { axes },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{evaluate, EvalInput, HostTensor};

    fn build(src: &str) -> Fusion {
        crate::dsl::build_str(src).unwrap().remove(0).0
    }

    /// The rewrite computes what the fusion computes (on the CPU reference), and leaves
    /// reductions that are already inner or outer alone.
    #[test]
    fn middle_reductions_beside_size_one_dims_become_inner() {
        let cases: [(&str, &[usize]); 3] = [
            (
                "fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, 1]> { x.sum([1]) }",
                &[5, 7, 1],
            ),
            (
                "fn k(x: Tensor<f32, [_, _, 1]>) -> (Tensor<f32, [_, 1]>, Tensor<f32, [_, 1]>) { x.var_mean([1], 1) }",
                &[6, 5, 1],
            ),
            (
                "fn k(x: Tensor<f32, [_, 1, _]>) -> Tensor<f32, [1, _]> { (x * 2.0).max([0]) + 1.0 }",
                &[4, 1, 9],
            ),
        ];
        for (src, shape) in cases {
            let f = build(src);
            let x = HostTensor::random(crate::DataType::F32, shape, 7);
            let want = evaluate(&f, &[EvalInput::Tensor(x.clone())]).unwrap();
            match squeeze_reduction_broadcasts(&f) {
                Some(g) => {
                    crate::ir::verify(&g).unwrap();
                    let got = evaluate(&g, &[EvalInput::Tensor(x)]).unwrap();
                    assert_eq!(got.len(), want.len(), "{src}");
                    for (a, b) in got.iter().zip(&want) {
                        assert_eq!(a.shape(), b.shape(), "{src}");
                        assert_eq!(a.to_f64_vec(), b.to_f64_vec(), "{src}");
                    }
                }
                // `max([0])` of `[A, 1, C]` is an outer reduction already.
                None => assert!(src.contains("max([0])"), "{src}: not rewritten"),
            }
        }
    }

    #[test]
    fn inner_outer_and_size_one_reductions_are_left() {
        for src in [
            "fn k(x: Tensor<f32, [_, 1, _]>) -> Tensor<f32, [_, 1]> { x.sum([2]) }",
            "fn k(x: Tensor<f32, [_, 1, _]>) -> Tensor<f32, [1, _]> { x.sum([0]) }",
            "fn k(x: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _]> { x.sum([1]) }",
            "fn k(x: Tensor<f32, [1, _, 1]>) -> Tensor<f32, [1, 1]> { x.sum([1]) }",
            "fn k(x: Tensor<f32, [1, _, 1, _]>) -> Tensor<f32, [1, 1, _]> { x.sum([1]) }",
            "fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, _, 1]> { x - x.max([1], keepdim = true) }",
        ] {
            assert!(squeeze_reduction_broadcasts(&build(src)).is_none(), "{src}");
        }
    }
}
