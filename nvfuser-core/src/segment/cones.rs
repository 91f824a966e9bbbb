//! Private copies of cheap values before segmentation.
//!
//! A value computed by elementwise math from fusion inputs (`xhat = (x - mean) * rstd`,
//! `dy as f32`) that several expressions read would become a boundary tensor when its
//! readers land in different segments: one segment writes it to memory (in f32, often
//! twice as wide as the input it came from) and the others read it back. When the
//! fusion has to be segmented, each reader after the first gets its own copy of such a
//! value's computation instead, so every segment recomputes it from the inputs it reads
//! anyway. A LayerNorm backward then splits into a `dx` kernel and column reductions
//! that read `dy` and `x` directly, with no `[N, H]` f32 tensor between them.

use rustc_hash::FxHashMap;

use crate::ir::{ExprId, Fusion, ValId};
use crate::sched::is_recomputable;
use crate::scheduler::resize::{cone_size, copy_of};

/// At most this many expressions are added by all copies together, as a multiple of the
/// fusion's live expressions.
const MAX_GROWTH: usize = 2;

/// `f` with a private copy of every shared cheap value for each of its readers after
/// the first (see the module documentation), or `None` when nothing is copied. A value
/// is copied when it is computed by recomputable single-output expressions from fusion
/// input tensors (at most [`crate::scheduler::resize`]'s cone limit; no full, iota or
/// random op, which reduction schedulers refuse), is not a fusion output, and the
/// full-size inputs its copy reads are at most twice its own
/// width (reading `x` in bf16 to recompute an f32 `xhat` is cheaper than writing and
/// reading `xhat`; three bf16 inputs summed into one bf16 value are not). Inputs and
/// outputs keep their ids; values are unchanged.
pub(crate) fn private_cones(f: &Fusion) -> Option<Fusion> {
    let live = f.live_exprs();
    let uses = f.uses();
    let mut is_output = vec![false; f.num_vals()];
    for o in f.outputs() {
        is_output[o.val.index()] = true;
    }
    // Per value: its live readers, in arena order (the first keeps the original).
    let readers: Vec<Vec<ExprId>> = uses
        .iter()
        .map(|u| {
            let mut r: Vec<ExprId> = u.iter().copied().filter(|x| live[x.index()]).collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let shared: Vec<bool> = f
        .vals()
        .map(|(v, val)| {
            readers[v.index()].len() > 1
                && val.is_tensor()
                && f.input_position(v).is_none()
                && !is_output[v.index()]
                && val
                    .definition
                    .is_some_and(|d| is_recomputable(&f.expr(d).op))
                && cone_size(f, v, &mut 0).is_some()
                && !creates(f, v)
                && cheap(f, v)
        })
        .collect();
    if !shared.contains(&true) {
        return None;
    }
    let budget = MAX_GROWTH * live.iter().filter(|&&l| l).count();
    let mut nf = f.without_exprs();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let mut e = e.clone();
        // One set of copies per reader: its inputs share them.
        let mut copies: FxHashMap<ValId, ValId> = FxHashMap::default();
        for i in e.inputs.iter_mut() {
            if shared[i.index()] && readers[i.index()].first() != Some(&id) {
                *i = copy_of(f, &mut nf, &mut copies, *i);
            }
        }
        nf.push_expr(e);
        if nf.num_exprs() > f.num_exprs() + budget {
            return None;
        }
    }
    Some(nf)
}

/// Whether recomputing `v` reads at most twice its width from full-size inputs: the
/// cone's tensor inputs with at least as many non-broadcast dims as `v`, by element
/// size (a `[N, 1]` statistic or a `[H]` weight beside `[N, H]` rows does not count).
fn cheap(f: &Fusion, v: ValId) -> bool {
    let dims = |x: ValId| {
        f.tensor_type(x)
            .map_or(0, |t| t.shape().filter(|d| !d.is_broadcast_like()).count())
    };
    let own = dims(v);
    let mut inputs = Vec::new();
    cone_inputs(f, v, &mut inputs);
    inputs.sort_unstable();
    inputs.dedup();
    let read: usize = inputs
        .iter()
        .filter(|&&i| dims(i) >= own)
        .map(|&i| f.val(i).dtype.size_bytes())
        .sum();
    read <= 2 * f.val(v).dtype.size_bytes()
}

/// Whether `v`'s computation makes a tensor from scalars (full, iota, a random op).
/// Such values get no private copies. This dates from when the reduction schedulers
/// refused creation ops (a copy would have run as a kernel of its own); they take them
/// now, and copies recomputing a mask in another segment would save its round trip
/// through memory, but that has not been run on a GPU yet.
fn creates(f: &Fusion, v: ValId) -> bool {
    let Some(d) = f.val(v).definition else {
        return false;
    };
    let e = f.expr(d);
    e.op.is_creation()
        || e.inputs
            .iter()
            .any(|&i| f.val(i).is_tensor() && creates(f, i))
}

/// The fusion input tensors `v`'s computation reads.
fn cone_inputs(f: &Fusion, v: ValId, out: &mut Vec<ValId>) {
    if !f.val(v).is_tensor() {
        return;
    }
    if f.input_position(v).is_some() {
        out.push(v);
        return;
    }
    if let Some(d) = f.val(v).definition {
        for &i in &f.expr(d).inputs {
            cone_inputs(f, i, out);
        }
    }
}
