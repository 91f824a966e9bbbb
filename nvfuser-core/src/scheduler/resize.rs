//! Which tensors a kernel recomputes inside the resize and indexing ops that read them.
//!
//! A resize op (slice, pad, cat, reshape, select) or an indexing op (index_select,
//! gather, take_along_axis) reads its input at other positions than its own output's.
//! The lowering reads such an input from memory, or computes it right there at the
//! position read (`ScheduledFusion::recompute_at_use`): elementwise math, casts,
//! broadcasts, squeezes, permutes, creation ops and other resize ops, down to fusion
//! inputs and scalars. [`recomputed_tensors`] finds the tensors a schedule recomputes:
//! those whose every reader is a resize op, a squeeze or another recomputed tensor (rope's
//! `cat([-x[.., h..], x[.., ..h]])` recomputes the `neg` and both slices inside the
//! `cat`), and checks that every resize op then reads only fusion inputs and recomputed
//! tensors.

use super::unfit::Unfit;
use crate::ir::{Fusion, ValId};
use crate::sched::{is_recomputable, reads_elsewhere};

/// The tensors of `f` a kernel computes inside the resize ops that read them, in
/// topological order, or why some resize op reads a value it can neither load nor
/// recompute (a fusion output, a reduction result, a value other expressions also read
/// at their own positions).
pub(crate) fn recomputed_tensors(f: &Fusion) -> Result<Vec<ValId>, Unfit> {
    let live = f.live_exprs();
    let uses = f.uses();
    let mut is_output = vec![false; f.num_vals()];
    for o in f.outputs() {
        is_output[o.val.index()] = true;
    }
    let mut in_r = vec![false; f.num_vals()];
    let exprs: Vec<_> = f.exprs().filter(|(id, _)| live[id.index()]).collect();
    // Readers come after their producers: walking backwards decides every reader first.
    for (_, e) in exprs.iter().rev() {
        let [t] = e.outputs[..] else { continue };
        if !f.val(t).is_tensor()
            || is_output[t.index()]
            || f.input_position(t).is_some()
            || !is_recomputable(&e.op)
        {
            continue;
        }
        let mut readers = uses[t.index()]
            .iter()
            .filter(|u| live[u.index()])
            .map(|&u| f.expr(u))
            .peekable();
        if readers.peek().is_none() {
            continue;
        }
        in_r[t.index()] = readers.all(|u| reads_elsewhere(&u.op) || in_r[u.outputs[0].index()]);
    }
    for (_, e) in &exprs {
        let recomputed = e.outputs.len() == 1 && in_r[e.outputs[0].index()];
        if !(recomputed || reads_elsewhere(&e.op)) {
            continue;
        }
        for &i in &e.inputs {
            if !f.val(i).is_tensor() || f.input_position(i).is_some() || in_r[i.index()] {
                continue;
            }
            let why = if is_output[i.index()] {
                "is a fusion output (a kernel cannot read back elements other threads store)"
                    .to_string()
            } else {
                match f.val(i).definition.map(|d| f.expr(d)) {
                    Some(d) if !is_recomputable(&d.op) || d.outputs.len() != 1 => format!(
                        "is computed by {}, which cannot be recomputed per element",
                        d.op.name()
                    ),
                    _ => {
                        let other = uses[i.index()]
                            .iter()
                            .map(|&u| f.expr(u))
                            .find(|u| !reads_elsewhere(&u.op) && !in_r[u.outputs[0].index()])
                            .map_or("another op", |u| u.op.name());
                        format!("{other} also reads at its own positions")
                    }
                }
            };
            return Err(Unfit::ResizeOfComputed {
                op: e.op.name().into(),
                tensor: i,
                why,
            });
        }
    }
    Ok(exprs
        .iter()
        .filter_map(|(_, e)| match e.outputs[..] {
            [t] if in_r[t.index()] => Some(t),
            _ => None,
        })
        .collect())
}

/// At most this many expressions are cloned for one resize op's input.
const MAX_CLONED: usize = 32;

/// The fusion with a private copy of every computed value that a resize or indexing op
/// reads while other expressions read it too, when that value is cheap to recompute:
/// elementwise math, casts, broadcasts and other recomputable ops of at most
/// [`MAX_CLONED`] expressions down to fusion inputs and scalars. The copy is then read
/// only by resize ops, so a kernel recomputes it where they read
/// ([`recomputed_tensors`]) instead of the fusion materializing it: the natural
/// cross-entropy's `take_along_axis(logits as f32, labels)` gathers from the bf16
/// logits, while the log-sum-exp keeps its own cast. `None` when there is nothing to
/// copy. Inputs and outputs keep their ids; values are unchanged.
pub fn isolate_resize_reads(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let uses = f.uses();
    let shared = |v: ValId| {
        uses[v.index()]
            .iter()
            .any(|&u| live[u.index()] && !reads_elsewhere(&f.expr(u).op))
    };
    let wanted = |v: ValId| {
        f.val(v).is_tensor()
            && f.input_position(v).is_none()
            && shared(v)
            && cone_size(f, v, &mut 0).is_some()
    };
    let any = f.exprs().any(|(id, e)| {
        live[id.index()] && reads_elsewhere(&e.op) && e.inputs.iter().any(|&i| wanted(i))
    });
    if !any {
        return None;
    }
    let mut nf = f.without_exprs();
    let mut copies: rustc_hash::FxHashMap<ValId, ValId> = Default::default();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let mut e = e.clone();
        if reads_elsewhere(&e.op) {
            for i in e.inputs.iter_mut() {
                if wanted(*i) {
                    *i = copy_of(f, &mut nf, &mut copies, *i);
                }
            }
        }
        nf.push_expr(e);
    }
    Some(nf)
}

/// The number of expressions computing `v` from fusion inputs and scalars through
/// recomputable single-output expressions, or `None` when some other expression
/// contributes or there are more than [`MAX_CLONED`] (`seen` counts across the walk).
pub(crate) fn cone_size(f: &Fusion, v: ValId, seen: &mut usize) -> Option<usize> {
    if !f.val(v).is_tensor() || f.input_position(v).is_some() {
        return Some(*seen);
    }
    let e = f.expr(f.val(v).definition?);
    if e.outputs.len() != 1 || !is_recomputable(&e.op) {
        return None;
    }
    *seen += 1;
    if *seen > MAX_CLONED {
        return None;
    }
    for &i in &e.inputs {
        cone_size(f, i, seen)?;
    }
    Some(*seen)
}

/// A copy of `v`'s computation in `nf` (fusion inputs and scalars are shared), made
/// once per value.
pub(crate) fn copy_of(
    f: &Fusion,
    nf: &mut Fusion,
    copies: &mut rustc_hash::FxHashMap<ValId, ValId>,
    v: ValId,
) -> ValId {
    if !f.val(v).is_tensor() || f.input_position(v).is_some() {
        return v;
    }
    if let Some(&c) = copies.get(&v) {
        return c;
    }
    let Some(e) = f.val(v).definition.map(|d| f.expr(d)) else {
        return v;
    };
    let inputs = e
        .inputs
        .iter()
        .map(|&i| copy_of(f, nf, copies, i))
        .collect();
    let mut val = f.val(v).clone();
    val.definition = None;
    let c = nf.push_val(val);
    nf.push_expr(crate::ir::Expr {
        op: e.op.clone(),
        inputs,
        outputs: smallvec::smallvec![c],
    });
    copies.insert(v, c);
    c
}
