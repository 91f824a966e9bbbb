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
