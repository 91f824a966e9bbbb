//! Permutes moved up to the values they read from memory.
//!
//! A permute of a computed value makes the value's whole elementwise chain recomputed
//! at the permuted positions, each element read from global memory on its own: the
//! head split `((x as f32) * scale).permute([0, 2, 1, 3])` loaded its bf16 input one
//! element at a time and ran at half of copy bandwidth. A permute commutes with
//! elementwise math (every tensor operand of an elementwise expression has the result's
//! rank, and the result's element at a position reads each operand at that position),
//! so [`push_permutes`] rewrites `permute(f(a, b), p)` as `f(permute(a, p), permute(b,
//! p))`, up to values that are not elementwise results: fusion inputs, or the results of
//! reductions, broadcasts and data-movement ops. A permute of a fusion input is a view
//! of global memory that the pointwise schedule loads with vectors when the innermost
//! dim stays innermost, and that the transpose schedule takes as a transpose.
//!
//! Only a value whose one reader is the permute moves (a value read elsewhere too would
//! be computed twice, at two layouts). The rewritten fusion has the same inputs and
//! outputs (same ids) and computes the same values: the permute's output is the result
//! of the last elementwise expression, the permuted operands are new values, and the
//! values passed over stay, unread, in the fusion.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::ir::{Expr, ExprId, Fusion, IterDomain, Op, TensorType, Val, ValId, ValKind};

/// At most this many new values per rewrite; past it, permutes stay where they are.
const MAX_NEW_VALS: usize = 4096;
/// At most this deep a chain of elementwise expressions is walked up.
const MAX_DEPTH: usize = 256;

/// The fusion with every permute of an elementwise result that only the permute reads
/// moved up to the operands, or `None` when no permute can move (the common case costs
/// one scan).
pub fn push_permutes(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let uses = f.uses();
    let movable = |v: ValId| single_reader(f, &live, &uses, v) && passes(f, v);
    if !f.exprs().any(|(id, e)| {
        live[id.index()] && matches!(e.op, Op::Permute { .. }) && movable(e.inputs[0])
    }) {
        return None;
    }
    let mut rw = Rewrite {
        f,
        live: &live,
        uses: &uses,
        nf: f.without_exprs(),
        memo: FxHashMap::default(),
        new_vals: 0,
    };
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        match &e.op {
            Op::Permute { perm } if movable(e.inputs[0]) => {
                rw.permute_of(e.inputs[0], perm, Some(e.outputs[0]), 0);
            }
            _ => {
                rw.nf.push_expr(e.clone());
            }
        }
    }
    Some(rw.nf)
}

/// True when `v` is read by one live expression and is not a fusion output.
fn single_reader(f: &Fusion, live: &[bool], uses: &[Vec<ExprId>], v: ValId) -> bool {
    f.outputs().iter().all(|o| o.val != v)
        && uses[v.index()].iter().filter(|u| live[u.index()]).count() == 1
}

/// True when `v` is the one result of an elementwise expression whose tensor operands
/// all have `v`'s rank.
fn passes(f: &Fusion, v: ValId) -> bool {
    let Some(d) = f.val(v).definition else {
        return false;
    };
    let e = f.expr(d);
    let rank = f.tensor_type(v).map(TensorType::rank);
    matches!(
        e.op,
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set
    ) && e.outputs.len() == 1
        && rank.is_some()
        && e.inputs.iter().any(|&i| f.val(i).is_tensor())
        && e.inputs
            .iter()
            .filter(|&&i| f.val(i).is_tensor())
            .all(|&i| f.tensor_type(i).map(TensorType::rank) == rank)
}

struct Rewrite<'a> {
    f: &'a Fusion,
    live: &'a [bool],
    uses: &'a [Vec<ExprId>],
    nf: Fusion,
    /// (original value, permutation) -> its permuted copy in `nf`.
    memo: FxHashMap<(ValId, SmallVec<[usize; 4]>), ValId>,
    new_vals: usize,
}

impl Rewrite<'_> {
    /// `v` permuted by `perm`, written to `target` when given (the original permute's
    /// output) or to a new value.
    fn permute_of(
        &mut self,
        v: ValId,
        perm: &[usize],
        target: Option<ValId>,
        depth: usize,
    ) -> ValId {
        let f = self.f;
        let key = (v, SmallVec::from_slice(perm));
        if target.is_none() {
            if let Some(&done) = self.memo.get(&key) {
                return done;
            }
        }
        let budget = depth < MAX_DEPTH && self.new_vals < MAX_NEW_VALS;
        // The first value (the permute's own input) was checked by the caller; values
        // further up move only when the permuted copy is their one reader too.
        let moves =
            budget && passes(f, v) && (depth == 0 || single_reader(f, self.live, self.uses, v));
        let result = match f.val(v).definition.map(|d| f.expr(d)) {
            Some(e) if moves => {
                let inputs = e
                    .inputs
                    .iter()
                    .map(|&i| {
                        if f.val(i).is_tensor() {
                            self.permute_of(i, perm, None, depth + 1)
                        } else {
                            i
                        }
                    })
                    .collect();
                self.emit(e.op.clone(), inputs, v, perm, target)
            }
            _ => self.emit(
                Op::Permute {
                    perm: perm.to_vec(),
                },
                SmallVec::from_elem(v, 1),
                v,
                perm,
                target,
            ),
        };
        if target.is_none() {
            self.memo.insert(key, result);
        }
        result
    }

    /// Emits `op(inputs)` whose result is `v` permuted by `perm`, into `target` or a
    /// new value.
    fn emit(
        &mut self,
        op: Op,
        inputs: SmallVec<[ValId; 3]>,
        v: ValId,
        perm: &[usize],
        target: Option<ValId>,
    ) -> ValId {
        let out = match target {
            Some(t) => t,
            None => {
                let val = self.f.val(v);
                let ty = self.f.tensor_type(v).expect("permuted values are tensors");
                let dims: Vec<IterDomain> = ty.shape().cloned().collect();
                let permuted = perm.iter().map(|&p| dims[p].clone()).collect();
                self.new_vals += 1;
                self.nf.push_val(Val {
                    dtype: val.dtype,
                    kind: ValKind::Tensor(TensorType::contiguous(permuted)),
                    definition: None,
                })
            }
        };
        self.nf.push_expr(Expr {
            op,
            inputs,
            outputs: SmallVec::from_elem(out, 1),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataType;

    fn build(src: &str) -> Fusion {
        crate::dsl::build_str(src).unwrap().remove(0).0
    }

    fn same_values(f: &Fusion, g: &Fusion, shapes: &[(DataType, &[usize])]) {
        crate::scheduler::assert_same_values(f, g, shapes);
    }

    fn permuted_inputs(g: &Fusion) -> usize {
        let live = g.live_exprs();
        g.exprs()
            .filter(|(id, e)| {
                live[id.index()]
                    && matches!(e.op, Op::Permute { .. })
                    && g.input_position(e.inputs[0]).is_some()
            })
            .count()
    }

    #[test]
    fn a_permute_of_elementwise_math_moves_to_the_inputs_and_keeps_the_values() {
        let f = build(
            "fn k(x: Tensor<bf16, [_, _, _, _]>, y: Tensor<f32, [_, _, _, _]>) -> Tensor<bf16, [_, _, _, _]> {
                (((x as f32) * y * 0.5f32).permute([0, 2, 1, 3])) as bf16
            }",
        );
        let g = push_permutes(&f).expect("the permute moves");
        assert_eq!(permuted_inputs(&g), 2, "{g}");
        assert_eq!(f.outputs(), g.outputs());
        same_values(
            &f,
            &g,
            &[
                (DataType::BF16, &[2, 3, 4, 5]),
                (DataType::F32, &[2, 3, 4, 5]),
            ],
        );
    }

    #[test]
    fn a_broadcast_operand_is_permuted_where_it_is_read() {
        let f = build(
            "fn k(x: Tensor<f32, [_, _]>, b: Tensor<f32, [_]>) -> Tensor<f32, [_, _]> {
                (x + b.broadcast([true, false])).exp().permute([1, 0])
            }",
        );
        let g = push_permutes(&f).expect("the permute moves");
        assert_eq!(permuted_inputs(&g), 1, "{g}");
        same_values(&f, &g, &[(DataType::F32, &[3, 5]), (DataType::F32, &[5])]);
    }

    #[test]
    fn a_value_read_twice_keeps_its_layout() {
        let f = build(
            "fn k(x: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
                let e = x.exp();
                (e.permute([1, 0]), e)
            }",
        );
        assert!(push_permutes(&f).is_none());
    }
}
