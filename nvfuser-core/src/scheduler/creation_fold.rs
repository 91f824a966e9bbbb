//! Broadcasts of creation ops folded into the creation.
//!
//! `iota(T).unsqueeze(0)` (the column index of an attention mask or of a one-hot in
//! cross-entropy's backward) is a broadcast of a computed value along the rows. The
//! reduction and persistent schedulers refuse such broadcasts: the value would need a
//! loop of its own, outside the rows. But a creation op reads no memory, and its value
//! at an element depends only on that element's index along its one dim, so the
//! broadcast can be computed directly: [`fold_creation_broadcasts`] redefines
//! `broadcast(iota(n, start, step))` as an `iota` with the broadcast's shape (the
//! iota runs along its one dim that is not a broadcast, `codegen`'s `Op::Iota`
//! lowering and the evaluator read it so), and `broadcast(full(...))` as a `full` of
//! that shape. The rows' schedulers then take it as any creation op in their shape, in
//! the same kernel as the rows (cross-entropy's backward was a kernel for the `iota`
//! and a streaming reduction narrowed to 16-byte vectors of its `i64` values).
//!
//! Only the broadcast is redefined (same value id; same type, unless `push_broadcasts`
//! widened its dims to its consumer's, where the operand's broadcast dims come back);
//! the creation op stays for its other uses and is dead otherwise. Random ops are left alone: their streams
//! are keyed on the linear index in their own shape.

use smallvec::SmallVec;

use crate::ir::{Expr, Fusion, IterDomain, Op, SizeArg, TensorType, ValId, ValKind};

/// `f` with every live broadcast of an `iota` or `full` (of scalars) redefined as that
/// creation op in the broadcast's shape, or `None` when there is none.
pub fn fold_creation_broadcasts(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    // Built in order, so a broadcast of a folded broadcast (an implicit broadcast to a
    // higher rank) sees the creation op it became.
    let mut nf = f.without_exprs();
    let mut folded = false;
    for (id, e) in f.exprs() {
        let mut e = e.clone();
        if live[id.index()] {
            if let Some((op, inputs, t)) = folded_broadcast(&nf, &e) {
                e.op = op;
                e.inputs = inputs;
                nf.val_mut(e.outputs[0]).kind = ValKind::Tensor(t);
                folded = true;
            }
        }
        nf.push_expr(e);
    }
    folded.then_some(nf)
}

/// The creation op, its inputs and its type that broadcast `e` becomes in `f`, or
/// `None`. The type is the creation's dims at the positions the broadcast keeps and
/// broadcast dims at the new ones: a broadcast whose dims were widened to its
/// consumer's (`push_broadcasts` types a pushed broadcast as the one it replaced) gets
/// back the broadcast dims of its operand, so an iota keeps its one dim.
fn folded_broadcast(f: &Fusion, e: &Expr) -> Option<(Op, SmallVec<[ValId; 3]>, TensorType)> {
    let Op::Broadcast { mask } = &e.op else {
        return None;
    };
    let c = f.expr(f.val(e.inputs[0]).definition?);
    if !matches!(c.op, Op::Iota { .. } | Op::Full { .. })
        || c.inputs.iter().any(|&i| f.val(i).is_tensor())
    {
        return None;
    }
    let from = f.tensor_type(c.outputs[0])?.shape_dims();
    let out = f.tensor_type(e.outputs[0])?;
    if out.domain.iter().any(|d| d.is_reduction()) || out.rank() != mask.len() {
        return None;
    }
    let mut dims = from.iter();
    let domain = mask
        .iter()
        .map(|&new| {
            if new {
                Some(IterDomain::broadcast())
            } else {
                dims.next().cloned()
            }
        })
        .collect::<Option<Vec<_>>>()?;
    let op = match &c.op {
        // The sizes in the broadcast's shape: 1 at each new dim.
        Op::Full { sizes } => {
            let mut old = sizes.iter();
            let sizes = mask
                .iter()
                .map(|&new| {
                    if new {
                        Some(SizeArg::Const(1))
                    } else {
                        old.next().copied()
                    }
                })
                .collect::<Option<Vec<_>>>()?;
            Op::Full { sizes }
        }
        op => op.clone(),
    };
    // The broadcast's own type (its layout, for an output) unless dims were widened.
    let same = out
        .domain
        .iter()
        .zip(&domain)
        .all(|(a, b)| a.is_broadcast_like() == b.is_broadcast_like());
    let t = if same {
        out.clone()
    } else if f.outputs().iter().any(|o| o.val == e.outputs[0]) {
        return None;
    } else {
        TensorType::contiguous(domain)
    };
    Some((op, c.inputs.clone(), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fusion(src: &str) -> Fusion {
        crate::dsl::build_str(src).unwrap().remove(0).0
    }

    #[test]
    fn an_iota_broadcast_along_the_rows_becomes_an_iota_of_that_shape() {
        let f = fusion(
            r#"
fn k(x: Tensor<f32, [_, _]>, labels: Tensor<i64, [_, 1]>) -> Tensor<f32, [_, _]> {
    let col = iota(x.size(1), 0, 1, i64).unsqueeze(0);
    let onehot = (col == labels) as f32;
    x - onehot
}
"#,
        );
        let g = fold_creation_broadcasts(&f).expect("folded");
        let live = g.live_exprs();
        let iotas: Vec<_> = g
            .exprs()
            .filter(|(id, e)| live[id.index()] && matches!(e.op, Op::Iota { .. }))
            .map(|(_, e)| g.tensor_type(e.outputs[0]).unwrap().rank())
            .collect();
        assert_eq!(iotas, [2]);
        assert!(!g
            .exprs()
            .any(|(id, e)| live[id.index()] && matches!(e.op, Op::Broadcast { .. })));
        use crate::DataType::{F32, I64};
        crate::scheduler::assert_same_values(&f, &g, &[(F32, &[5, 7]), (I64, &[5, 1])]);
    }

    #[test]
    fn causal_masks_and_fulls_fold_and_keep_their_values() {
        let f = fusion(
            r#"
fn k(s: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _, _]> {
    let row = iota(s.size(1), 3, 2, i64).unsqueeze(1);
    let col = iota(s.size(2), 0, 1, i64).unsqueeze(0);
    let z = full([s.size(2)], 0.5, f32).unsqueeze(0);
    where_(col <= row, s + z, f32::NEG_INFINITY)
}
"#,
        );
        let g = fold_creation_broadcasts(&f).expect("folded");
        crate::scheduler::assert_same_values(&f, &g, &[(crate::DataType::F32, &[2, 6, 9])]);
        assert!(fold_creation_broadcasts(&g).is_none());
    }

    #[test]
    fn random_ops_are_not_folded() {
        let f = fusion(
            r#"
fn k(x: Tensor<f32, [_, _]>, seed: i64, offset: i64) -> Tensor<f32, [_, _]> {
    x + uniform([x.size(1)], 0.0, 1.0, seed, offset, f32).unsqueeze(0)
}
"#,
        );
        assert!(fold_creation_broadcasts(&f).is_none());
    }
}
