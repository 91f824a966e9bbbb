//! Squeezes moved up to the values they read from memory.
//!
//! A squeeze removes size-1 dims. Inside a kernel, a tensor of rank `r + 1` that is only
//! squeezed to rank `r` would need loops of its own, which no scheduler gives it: every
//! scheduler schedules the computed tensors like one reference of one rank. But a
//! squeeze commutes with elementwise math and with broadcasts (a size-1 dim of the
//! result is a size-1 dim of every tensor operand), so [`push_squeezes`] rewrites
//! `squeeze(f(a, b))` as `f(squeeze(a), squeeze(b))`, all the way up to values that are
//! not elementwise results: fusion inputs (kernel arguments in global memory), or the
//! results of reductions and data-movement ops. A squeeze of a fusion input is then a
//! view of global memory: the kernel reads it with index 0 in the removed dims (the
//! lowering's producer map), as a broadcast of an input reads it with the broadcast
//! dims left out. The schedulers accept exactly those squeezes
//! (`analysis::is_input_squeeze`).
//!
//! The rewritten fusion has the same inputs and outputs (same ids) and computes the same
//! values: only where the size-1 dims are dropped moves. The squeezed copies are new
//! values; the original values stay where something else still reads them. A value read
//! under the same squeeze twice is squeezed once.

use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};

use crate::ir::{Expr, Fusion, IterKind, Op, TensorType, Val, ValId, ValKind};

/// At most this many new values per rewrite; past it, squeezes stay where they are.
const MAX_NEW_VALS: usize = 4096;
/// At most this deep a chain of elementwise expressions is walked up.
const MAX_DEPTH: usize = 256;

/// The fusion with every squeeze moved up past elementwise expressions, broadcasts and
/// other squeezes, or `None` when no squeeze can move (nothing to rewrite; the common
/// case costs one scan).
pub fn push_squeezes(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let movable = f.exprs().any(|(id, e)| {
        live[id.index()]
            && matches!(e.op, Op::Squeeze { .. })
            && f.val(e.inputs[0])
                .definition
                .is_some_and(|d| can_pass(f, f.expr(d)))
    });
    if !movable {
        return None;
    }
    let nf = f.without_exprs();
    let mut rw = Rewrite {
        f,
        nf,
        memo: FxHashMap::default(),
        new_vals: 0,
    };
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        if let Op::Squeeze { axes } = &e.op {
            rw.squeeze_of(e.inputs[0], axes, Some(e.outputs[0]), 0);
            continue;
        }
        rw.nf.push_expr(e.clone());
    }
    Some(rw.nf)
}

/// True for the expressions a squeeze of their result can move past.
fn can_pass(f: &Fusion, e: &Expr) -> bool {
    match e.op {
        Op::Broadcast { .. } | Op::Squeeze { .. } => true,
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set => {
            e.outputs.len() == 1 && e.inputs.iter().any(|&i| f.val(i).is_tensor())
        }
        _ => false,
    }
}

/// True when dim `axis` of tensor `v` may be squeezed: a broadcast dim or a dim of
/// constant size 1 (the builder's rule).
fn size_one(f: &Fusion, v: ValId, axis: usize) -> bool {
    f.tensor_type(v)
        .and_then(|t| t.shape().nth(axis).cloned())
        .is_some_and(|d| d.kind == IterKind::Broadcast || d.extent.as_const() == Some(1))
}

struct Rewrite<'a> {
    f: &'a Fusion,
    nf: Fusion,
    /// (original value, squeezed axes) -> its squeezed copy in `nf`.
    memo: FxHashMap<(ValId, SmallVec<[usize; 4]>), ValId>,
    new_vals: usize,
}

impl Rewrite<'_> {
    /// `v` squeezed at `axes` (sorted, distinct, each a size-1 dim of `v`), written to
    /// `target` when given (the original squeeze's output) or to a new value.
    fn squeeze_of(
        &mut self,
        v: ValId,
        axes: &[usize],
        target: Option<ValId>,
        depth: usize,
    ) -> ValId {
        let f = self.f;
        let key = (v, SmallVec::from_slice(axes));
        if target.is_none() {
            if let Some(&done) = self.memo.get(&key) {
                return done;
            }
        }
        let def = f.val(v).definition.map(|d| f.expr(d));
        let budget = depth < MAX_DEPTH && self.new_vals < MAX_NEW_VALS;
        let result = match def {
            Some(e) if budget && can_pass(f, e) => match &e.op {
                Op::Broadcast { mask } => {
                    self.through_broadcast(v, e.inputs[0], mask, axes, target, depth)
                }
                Op::Squeeze { axes: inner } => {
                    let composed = compose(inner, axes);
                    self.squeeze_of(e.inputs[0], &composed, target, depth + 1)
                }
                _ if self.operands_squeezable(e, axes) => {
                    let inputs = e
                        .inputs
                        .iter()
                        .map(|&i| {
                            if f.val(i).is_tensor() {
                                self.squeeze_of(i, axes, None, depth + 1)
                            } else {
                                i
                            }
                        })
                        .collect();
                    self.emit(e.op.clone(), inputs, v, axes, target)
                }
                _ => self.emit(
                    Op::Squeeze {
                        axes: axes.to_vec(),
                    },
                    smallvec![v],
                    v,
                    axes,
                    target,
                ),
            },
            _ => self.emit(
                Op::Squeeze {
                    axes: axes.to_vec(),
                },
                smallvec![v],
                v,
                axes,
                target,
            ),
        };
        if target.is_none() {
            self.memo.insert(key, result);
        }
        result
    }

    /// Every tensor operand of `e` has the result's rank and a size-1 dim at each axis.
    fn operands_squeezable(&self, e: &Expr, axes: &[usize]) -> bool {
        let f = self.f;
        let rank = f.tensor_type(e.outputs[0]).map(TensorType::rank);
        e.inputs
            .iter()
            .filter(|&&i| f.val(i).is_tensor())
            .all(|&i| {
                f.tensor_type(i).map(TensorType::rank) == rank
                    && axes.iter().all(|&a| size_one(f, i, a))
            })
    }

    /// `squeeze(broadcast(x, mask), axes)`: squeezed new dims leave the mask; squeezed
    /// dims of `x` are squeezed from `x` first.
    fn through_broadcast(
        &mut self,
        v: ValId,
        x: ValId,
        mask: &[bool],
        axes: &[usize],
        target: Option<ValId>,
        depth: usize,
    ) -> ValId {
        let mut x_axes = Vec::new();
        let mut new_mask = Vec::new();
        let mut j = 0;
        for (i, &m) in mask.iter().enumerate() {
            if axes.contains(&i) {
                if !m {
                    x_axes.push(j);
                }
            } else {
                new_mask.push(m);
            }
            if !m {
                j += 1;
            }
        }
        let keeps_a_new_dim = new_mask.iter().any(|&m| m);
        let x2 = if x_axes.is_empty() {
            x
        } else {
            let to = if keeps_a_new_dim { None } else { target };
            self.squeeze_of(x, &x_axes, to, depth + 1)
        };
        if keeps_a_new_dim {
            self.emit(
                Op::Broadcast { mask: new_mask },
                smallvec![x2],
                v,
                axes,
                target,
            )
        } else {
            match target {
                // Squeezing `x` wrote the target already.
                Some(t) if x2 == t => t,
                // Every dim the broadcast added is gone: the result is `x` itself.
                Some(_) => self.emit(Op::Set, smallvec![x2], v, axes, target),
                None => x2,
            }
        }
    }

    /// Emits `op(inputs)` whose result is `v` squeezed at `axes`, into `target` or a
    /// new value.
    fn emit(
        &mut self,
        op: Op,
        inputs: SmallVec<[ValId; 3]>,
        v: ValId,
        axes: &[usize],
        target: Option<ValId>,
    ) -> ValId {
        let out = match target {
            Some(t) => t,
            None => {
                let val = self.f.val(v);
                let ty = self.f.tensor_type(v).expect("squeezed values are tensors");
                let kept = ty
                    .shape()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, d)| d.clone())
                    .collect();
                self.new_vals += 1;
                self.nf.push_val(Val {
                    dtype: val.dtype,
                    kind: ValKind::Tensor(TensorType::contiguous(kept)),
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

/// The axes of `x` that `squeeze(squeeze(x, inner), outer)` removes.
fn compose(inner: &[usize], outer: &[usize]) -> Vec<usize> {
    // Dim k of the inner squeeze's result is the k-th dim of `x` not in `inner`.
    let rank = inner.len() + outer.iter().max().map_or(0, |&m| m + 1);
    let kept: Vec<usize> = (0..rank.max(inner.iter().max().map_or(0, |&m| m + 1)))
        .filter(|i| !inner.contains(i))
        .collect();
    let mut all: Vec<usize> = inner
        .iter()
        .copied()
        .chain(outer.iter().filter_map(|&k| kept.get(k).copied()))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::{compose, push_squeezes};
    use crate::builder::FusionDefinition;
    use crate::codegen::{self, KernelOptions};
    use crate::dtype::DataType;
    use crate::ir::{Fusion, Op};
    use crate::scheduler::{
        compute_heuristics, default_schedule_kind, schedule_with, DeviceInfo, RuntimeInfo,
        SchedulerKind,
    };

    type R = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn composed_squeezes_name_the_dims_of_the_first_input() {
        // x: [a, 1, b, 1, c]; squeeze 1 -> [a, b, 1, c]; squeeze 2 -> [a, b, c].
        assert_eq!(compose(&[1], &[2]), vec![1, 3]);
        assert_eq!(compose(&[0, 2], &[0]), vec![0, 1, 2]);
        assert_eq!(compose(&[3], &[0, 1]), vec![0, 1, 3]);
    }

    /// The scheduler the registry picks for contiguous inputs of `sizes`, and the
    /// kernel it generates.
    fn planned(f: &Fusion, sizes: &[&[i64]]) -> (SchedulerKind, String) {
        let shapes: Vec<(DataType, &[i64])> = f
            .inputs()
            .iter()
            .zip(sizes)
            .map(|(&v, s)| (f.val(v).dtype, *s))
            .collect();
        let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
        let params = compute_heuristics(f, &info).unwrap_or_else(|r| panic!("{r}\n{f}"));
        let sf = schedule_with(f, &params).unwrap();
        let kernel = codegen::generate(&sf, &KernelOptions::default()).unwrap();
        (params.kind(), kernel.cuda_source())
    }

    /// Every squeeze left in `f` reads a fusion input.
    fn squeezes_read_inputs(f: &Fusion) -> bool {
        let live = f.live_exprs();
        f.exprs().all(|(id, e)| {
            !live[id.index()]
                || !matches!(e.op, Op::Squeeze { .. })
                || f.input_position(e.inputs[0]).is_some()
        })
    }

    #[test]
    fn squeezes_of_math_move_to_the_inputs() -> R {
        // z = squeeze(relu(x) + y, [1]) with x: [N, 1, H], y: [1, 1, H] (y's dim 0 is
        // a constant 1, dim 1 broadcast).
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
        let y = fd.define_tensor(DataType::F32, &[1, 1, -1])?;
        let r = fd.relu(x)?;
        let s = fd.add(r, y)?;
        let z = fd.squeeze(s, &[1])?;
        fd.add_output(z)?;
        let f = fd.finish()?;
        let pushed = push_squeezes(&f).expect("a squeeze moves");
        assert!(squeezes_read_inputs(&pushed), "{pushed}");
        assert_eq!(pushed.inputs(), f.inputs());
        assert_eq!(pushed.outputs(), f.outputs());
        crate::ir::verify(&pushed)?;
        // Nothing more to move the second time.
        assert!(push_squeezes(&pushed).is_none());
        let (kind, cuda) = planned(&f, &[&[64, 1, 1024], &[1, 1, 1024]]);
        assert_eq!(kind, SchedulerKind::Pointwise, "{cuda}");
        Ok(())
    }

    #[test]
    fn a_squeezed_broadcast_is_its_input() -> R {
        // squeeze(broadcast(x)) is x again, then math on it; a squeeze of a broadcast
        // that added two dims keeps one of them, and the squeeze of math on that
        // removes it.
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
        let b = fd.broadcast(x, &[false, true, true, false])?;
        let s1 = fd.squeeze(b, &[1])?;
        let s2 = fd.squeeze(s1, &[1])?;
        let e = fd.exp(s2)?;
        let keep = fd.squeeze(b, &[2])?;
        let n = fd.neg(keep)?;
        let n = fd.squeeze(n, &[1])?;
        fd.add_output(e)?;
        fd.add_output(n)?;
        let f = fd.finish()?;
        let pushed = push_squeezes(&f).expect("squeezes move");
        assert!(
            !pushed.exprs().any(
                |(id, e)| pushed.live_exprs()[id.index()] && matches!(e.op, Op::Squeeze { .. })
            ),
            "no squeeze is left: {pushed}"
        );
        let (_, cuda) = default_schedule_kind(&f).map(|(sf, _)| {
            let k = codegen::generate(&sf, &KernelOptions::default()).unwrap();
            ((), k.cuda_source())
        })?;
        assert!(cuda.contains("__global__"));
        Ok(())
    }

    #[test]
    fn reductions_of_squeezed_inputs_take_the_tuned_schedulers() -> R {
        // softmax over the last dim of squeeze(x * 2, [1]), x: [N, 1, H].
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
        let two = fd.constant(2.0f64);
        let t = fd.mul(x, two)?;
        let s = fd.squeeze(t, &[1])?;
        let m = fd.max(s, &[1], false)?;
        let mb = fd.broadcast(m, &[false, true])?;
        let d = fd.sub(s, mb)?;
        let e = fd.exp(d)?;
        let sum = fd.sum(e, &[1], false)?;
        let sb = fd.broadcast(sum, &[false, true])?;
        let y = fd.div(e, sb)?;
        fd.add_output(y)?;
        let f = fd.finish()?;
        let (kind, cuda) = planned(&f, &[&[128, 1, 1024]]);
        assert_eq!(kind, SchedulerKind::InnerPersistent, "{cuda}");
        // A plain row sum of a squeezed input: the reduction scheduler.
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1, 1])?;
        let s = fd.squeeze(x, &[2])?;
        let r = fd.sum(s, &[1], false)?;
        fd.add_output(r)?;
        let (kind, _) = planned(&fd.finish()?, &[&[128, 4096, 1]]);
        assert_eq!(kind, SchedulerKind::Reduction);
        Ok(())
    }

    #[test]
    fn squeezes_of_data_movement_stay_and_are_refused() -> R {
        // pad is not elementwise: the squeeze of its result stays on a computed value.
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
        let zero = fd.constant(0.0f64);
        let p = fd.pad(x, &[(0, 0), (0, 0), (1, 1)], zero)?;
        let s = fd.squeeze(p, &[1])?;
        fd.add_output(s)?;
        let f = fd.finish()?;
        assert!(push_squeezes(&f).is_none());
        let err = default_schedule_kind(&f).unwrap_err().to_string();
        assert!(err.contains("squeeze"), "{err}");
        Ok(())
    }
}
