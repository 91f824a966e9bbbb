//! Innermost cats of math on slices, rewritten as a cat of the slices and a select.
//!
//! Rotary embedding's rotate-half is `cat([-x[.., 64..128], x[.., 0..64]], -1)`: each
//! piece of the cat is elementwise math on a slice of an input. A cat reads each piece
//! at another position than its own, so the pieces' math is recomputed at every
//! element of the cat, each element loaded from global memory on its own (sixteen
//! 2-byte loads per thread, rope at 72% of copy bandwidth). [`split_inner_cats`]
//! rewrites
//!
//! ```text
//! cat([f0(s0), f1(s1), ...], axis)  as  where(m0, f0(c), where(m1, f1(c), ... fk(c)))
//! with c = cat([s0, s1, ...], axis)
//! ```
//!
//! where `mi` is true on piece `i`'s range of the axis (a cat of constant `full`s,
//! broadcast over the other dims). `c` is a cat of slices of inputs: the pointwise
//! schedule loads it with vectors when every piece boundary and slice start is a
//! multiple of the vector width (each vector then lies in one piece, a contiguous run
//! of one input row). Each `fi` is computed on every element of `c`, and the select
//! keeps it on piece `i` only: the values are the cat's, bit for bit, and the extra
//! math runs on registers.
//!
//! Only innermost cats whose pieces are chains of elementwise math with one tensor
//! operand (other operands scalars), each value read only by the chain, ending at a
//! slice of a fusion input or a fusion input, all of one dtype and constant length,
//! are rewritten; a chain with integer division or remainder is left (its error checks
//! would see the other pieces' elements). The cat's output keeps its id.

use smallvec::{smallvec, SmallVec};

use crate::dtype::{DataType, ScalarValue};
use crate::ir::{
    BinaryOp, Expr, ExprId, Fusion, IterDomain, Op, SizeArg, TensorType, TernaryOp, Val, ValId,
    ValKind,
};

/// A piece of a cat: the source (a slice of an input, or an input) and the chain of
/// elementwise expressions from it to the piece, in order.
struct Piece {
    source: ValId,
    chain: Vec<ExprId>,
    len: i64,
}

/// The fusion with every innermost cat of elementwise math on slices of inputs
/// rewritten (see the module documentation), or `None` when there is none.
pub fn split_inner_cats(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let uses = f.uses();
    let plans: Vec<(ExprId, Vec<Piece>)> = f
        .exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(id, e)| Some((id, pieces(f, &live, &uses, e)?)))
        .collect();
    if plans.is_empty() {
        return None;
    }
    let mut nf = f.without_exprs();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        match plans.iter().find(|(c, _)| *c == id) {
            Some((_, ps)) => rewrite(f, &mut nf, e, ps),
            None => {
                nf.push_expr(e.clone());
            }
        }
    }
    Some(nf)
}

/// The pieces of `e` when it is a cat this rewrite takes.
fn pieces(f: &Fusion, live: &[bool], uses: &[Vec<ExprId>], e: &Expr) -> Option<Vec<Piece>> {
    let Op::Cat { axis } = e.op else {
        return None;
    };
    let out_t = f.tensor_type(e.outputs[0])?;
    if axis + 1 != out_t.rank() || e.inputs.len() < 2 {
        return None;
    }
    let mut ps = Vec::with_capacity(e.inputs.len());
    for &p in &e.inputs {
        let t = f.tensor_type(p)?;
        let len = t.shape().nth(axis)?.extent.as_const()?;
        if len < 2 || t.shape().nth(axis)?.is_broadcast_like() {
            return None;
        }
        let mut chain = Vec::new();
        let mut v = p;
        loop {
            if f.input_position(v).is_some() {
                break;
            }
            let d = f.val(v).definition?;
            let de = f.expr(d);
            if matches!(de.op, Op::Slice { .. }) && f.input_position(de.inputs[0]).is_some() {
                break;
            }
            let single = f.outputs().iter().all(|o| o.val != v)
                && uses[v.index()].iter().filter(|u| live[u.index()]).count() == 1;
            let mut tensors: Vec<ValId> = de
                .inputs
                .iter()
                .copied()
                .filter(|&i| f.val(i).is_tensor())
                .collect();
            tensors.dedup();
            // Integer division reports a zero divisor (a device-side check), which the
            // other pieces' elements must not reach.
            let int_division = |b: &BinaryOp| {
                matches!(b, BinaryOp::Div | BinaryOp::Fmod | BinaryOp::Remainder)
                    && de.inputs.iter().any(|&i| !f.val(i).dtype.is_float())
            };
            let elementwise = match &de.op {
                Op::Unary(_) | Op::Cast | Op::Set | Op::Ternary(_) => true,
                Op::Binary(b) => !int_division(b),
                _ => false,
            };
            if !single || !elementwise || de.outputs.len() != 1 || tensors.len() != 1 {
                return None;
            }
            if f.tensor_type(tensors[0]).map(TensorType::rank) != Some(t.rank()) {
                return None;
            }
            chain.push(d);
            v = tensors[0];
        }
        chain.reverse();
        ps.push(Piece {
            source: v,
            chain,
            len,
        });
    }
    let dtype = f.val(ps[0].source).dtype;
    let math = ps.iter().any(|p| !p.chain.is_empty());
    (math && ps.iter().all(|p| f.val(p.source).dtype == dtype)).then_some(ps)
}

fn new_tensor(nf: &mut Fusion, dtype: DataType, dims: Vec<IterDomain>) -> ValId {
    nf.push_val(Val {
        dtype,
        kind: ValKind::Tensor(TensorType::contiguous(dims)),
        definition: None,
    })
}

fn constant(nf: &mut Fusion, v: ScalarValue, dtype: DataType) -> ValId {
    nf.push_val(Val {
        dtype,
        kind: ValKind::Scalar(Some(v)),
        definition: None,
    })
}

fn push(nf: &mut Fusion, op: Op, inputs: SmallVec<[ValId; 3]>, out: ValId) {
    nf.push_expr(Expr {
        op,
        inputs,
        outputs: smallvec![out],
    });
}

/// Emits the rewrite of cat `e` with pieces `ps` into `nf`.
fn rewrite(f: &Fusion, nf: &mut Fusion, e: &Expr, ps: &[Piece]) {
    let out = e.outputs[0];
    let out_t = f.tensor_type(out).expect("a cat's output is a tensor");
    let dims: Vec<IterDomain> = out_t.shape().cloned().collect();
    let rank = dims.len();
    let src_dtype = f.val(ps[0].source).dtype;
    // c = cat of the sources.
    let c = new_tensor(nf, src_dtype, dims.clone());
    push(
        nf,
        Op::Cat { axis: rank - 1 },
        ps.iter().map(|p| p.source).collect(),
        c,
    );
    // Each piece's math on all of c.
    let mut values = Vec::with_capacity(ps.len());
    for p in ps {
        let mut v = c;
        for &d in &p.chain {
            let de = f.expr(d);
            let r = new_tensor(nf, f.val(de.outputs[0]).dtype, dims.clone());
            let inputs = de
                .inputs
                .iter()
                .map(|&i| if f.val(i).is_tensor() { v } else { i })
                .collect();
            push(nf, de.op.clone(), inputs, r);
            v = r;
        }
        values.push(v);
    }
    // Piece i's mask: true on its range of the axis, broadcast over the other dims.
    let mask = |nf: &mut Fusion, i: usize| -> ValId {
        let parts: SmallVec<[ValId; 3]> = ps
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let value = constant(nf, ScalarValue::Bool(k == i), DataType::Bool);
                let mut sizes = vec![SizeArg::Const(1); rank - 1];
                sizes.push(SizeArg::Const(p.len));
                let mut pd = vec![IterDomain::broadcast(); rank - 1];
                pd.push(IterDomain::iteration(crate::ir::Extent::Const(p.len)));
                let t = new_tensor(nf, DataType::Bool, pd);
                push(nf, Op::Full { sizes }, smallvec![value], t);
                t
            })
            .collect();
        let mut md = vec![IterDomain::broadcast(); rank - 1];
        md.push(dims[rank - 1].clone());
        let m = new_tensor(nf, DataType::Bool, md);
        push(nf, Op::Cat { axis: rank - 1 }, parts, m);
        m
    };
    // where(m0, v0, where(m1, v1, ... vk)), the outermost written to the cat's output.
    let dtype = f.val(out).dtype;
    let mut acc = *values.last().expect("a cat has pieces");
    for i in (0..values.len() - 1).rev() {
        let m = mask(nf, i);
        let r = if i == 0 {
            out
        } else {
            new_tensor(nf, dtype, dims.clone())
        };
        push(
            nf,
            Op::Ternary(TernaryOp::Where),
            smallvec![m, values[i], acc],
            r,
        );
        acc = r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(src: &str) -> Fusion {
        crate::dsl::build_str(src).unwrap().remove(0).0
    }

    fn same_values(f: &Fusion, g: &Fusion, shapes: &[(DataType, &[usize])]) {
        crate::scheduler::assert_same_values(f, g, shapes);
    }

    #[test]
    fn rotate_half_becomes_a_cat_of_slices_and_a_select() {
        let f = build(
            "fn k(x: Tensor<bf16, [_, _, 128]>, c: Tensor<bf16, [_, _, 128]>) -> Tensor<bf16, [_, _, 128]> {
                let r = cat([-x.slice([.., .., 64..128]), x.slice([.., .., 0..64])], 2);
                ((x as f32) * (c as f32) + (r as f32)) as bf16
            }",
        );
        let g = split_inner_cats(&f).expect("the cat is rewritten");
        let live = g.live_exprs();
        // The cat of slices reads x; the masks are cats of fulls.
        let cats: Vec<&Expr> = g
            .exprs()
            .filter(|(id, e)| live[id.index()] && matches!(e.op, Op::Cat { .. }))
            .map(|(_, e)| e)
            .collect();
        assert_eq!(cats.len(), 2, "{g}");
        assert_eq!(f.outputs(), g.outputs());
        same_values(
            &f,
            &g,
            &[
                (DataType::BF16, &[3, 5, 128]),
                (DataType::BF16, &[3, 5, 128]),
            ],
        );
    }

    #[test]
    fn three_pieces_with_scalar_math() {
        let f = build(
            "fn k(x: Tensor<f32, [_, 24]>, y: Tensor<f32, [_, 8]>) -> Tensor<f32, [_, 32]> {
                cat([x.slice([.., 16..24]) * 2.0f32, y.exp(), -x.slice([.., 0..16])], 1)
            }",
        );
        let g = split_inner_cats(&f).expect("the cat is rewritten");
        same_values(
            &f,
            &g,
            &[(DataType::F32, &[7, 24]), (DataType::F32, &[7, 8])],
        );
    }

    #[test]
    fn other_cats_are_left() {
        for src in [
            // Not the innermost axis.
            "fn k(x: Tensor<f32, [8, _]>) -> Tensor<f32, [16, _]> { cat([-x, x], 0) }",
            // A piece with a second tensor operand.
            "fn k(x: Tensor<f32, [_, 8]>, y: Tensor<f32, [_, 8]>) -> Tensor<f32, [_, 16]> { cat([x * y, x], 1) }",
            // No math: already a cat of inputs.
            "fn k(x: Tensor<f32, [_, 8]>, y: Tensor<f32, [_, 8]>) -> Tensor<f32, [_, 16]> { cat([x, y], 1) }",
            // Sources of two dtypes.
            "fn k(x: Tensor<f32, [_, 8]>, y: Tensor<bf16, [_, 8]>) -> Tensor<f32, [_, 16]> { cat([-x, y as f32], 1) }",
        ] {
            assert!(split_inner_cats(&build(src)).is_none(), "{src}");
        }
    }
}
