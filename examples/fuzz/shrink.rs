//! Greedy shrinking: keep any edit after which the case still fails the same way.

use crate::gen::{operands, shrink_to_cap, Recipe, Step};
use crate::run::{FailKind, Verdict};

/// Shrinks `recipe` while `check` still reports a failure of `kind`: fewer calls, fewer
/// outputs, steps bypassed (a step's value replaced by its first operand), steps dropped,
/// smaller sizes. At most 80 checks.
pub fn shrink(
    recipe: &Recipe,
    kind: FailKind,
    check: &mut dyn FnMut(&Recipe) -> Verdict,
) -> Recipe {
    let mut best = recipe.clone();
    let mut budget = 80usize;
    let mut still = |r: &Recipe, budget: &mut usize| -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        matches!(check(r), Verdict::Fail(k, _) if k == kind)
    };
    let mut progress = true;
    while progress && budget > 0 {
        progress = false;
        // One call at a time.
        for c in 0..best.calls.len() {
            if best.calls.len() == 1 {
                break;
            }
            let mut r = best.clone();
            r.calls = vec![best.calls[c].clone()];
            if still(&r, &mut budget) {
                best = r;
                progress = true;
                break;
            }
        }
        // Fewer outputs.
        let mut k = 0;
        while k < best.outputs.len() && best.outputs.len() > 1 {
            let mut r = best.clone();
            r.outputs.remove(k);
            if still(&r, &mut budget) {
                best = r;
                progress = true;
            } else {
                k += 1;
            }
        }
        // Steps bypassed: uses of step s read its first operand instead; then the step
        // is dead.
        let n_in = best.inputs.len();
        for s in (0..best.steps.len()).rev() {
            let Some(src) = first_operand(&best.steps[s]) else {
                continue;
            };
            let mut r = best.clone();
            let slot = n_in + s;
            for st in &mut r.steps[s + 1..] {
                remap(st, slot, src);
            }
            for o in &mut r.outputs {
                if *o == slot {
                    *o = src;
                }
            }
            if let Some((v, _)) = &mut r.in_place {
                if *v == slot {
                    *v = src;
                }
            }
            r.outputs.dedup();
            if still(&r, &mut budget) {
                best = r;
                progress = true;
            }
        }
        // Smaller sizes.
        for c in 0..best.calls.len() {
            for d in 0..best.universe.len() {
                if best.universe[d].is_some() {
                    continue;
                }
                let n = best.calls[c].sizes[d];
                for smaller in [1usize, 2, n / 2] {
                    if smaller >= n || smaller == 0 {
                        continue;
                    }
                    let mut r = best.clone();
                    r.calls[c].sizes[d] = smaller;
                    shrink_to_cap(&mut r.calls[c].sizes, &r.universe);
                    if still(&r, &mut budget) {
                        best = r;
                        progress = true;
                        break;
                    }
                }
            }
        }
    }
    // Drop steps nothing reads any more (keeps numbering: replaced by no-ops is not
    // possible, so leave them; the builder's dead-code handling ignores them).
    best
}

/// The operand a bypassed step's uses read instead (none for creation ops, whose
/// operand only gives a shape).
fn first_operand(s: &Step) -> Option<usize> {
    match s {
        Step::FullLike(..) | Step::Iota(..) | Step::UniformLike(..) => None,
        _ => operands(s).first().copied(),
    }
}

fn remap(s: &mut Step, from: usize, to: usize) {
    let f = |v: &mut usize| {
        if *v == from {
            *v = to;
        }
    };
    match s {
        Step::Unary(_, a) | Step::Clamp(a, ..) | Step::Cast(a, _) | Step::Reduce(_, a, ..) => f(a),
        Step::Var(a, ..) | Step::VarMean(a, ..) | Step::Welford(a, ..) | Step::Broadcast(a, _) => {
            f(a)
        }
        Step::Scan(_, a, _) | Step::Sort { a, .. } => f(a),
        Step::Permute(a, _)
        | Step::Slice(a, ..)
        | Step::SliceToSize(a, ..)
        | Step::Pad(a, ..)
        | Step::PadScalar(a, ..) => f(a),
        Step::MergeDims(a, _) | Step::SplitDim(a, ..) | Step::Squeeze(a, _) | Step::Set(a) => f(a),
        Step::SegmentSet(a) | Step::Select(a, ..) | Step::ScaleBySize(a, _) => f(a),
        Step::Triangle(a, ..) => f(a),
        Step::FullLike(a, ..) | Step::Iota(a, ..) | Step::UniformLike(a, ..) => f(a),
        Step::Binary(_, a, b)
        | Step::Cat(a, b, _)
        | Step::ExpandLike(a, b)
        | Step::WithScalar(_, a, b) => {
            f(a);
            f(b);
        }
        Step::IndexSelect(a, _, b) | Step::TakeAlongAxis(a, b, _) | Step::Gather(a, b, _) => {
            f(a);
            f(b);
        }
        Step::Where(a, b, c) => {
            f(a);
            f(b);
            f(c);
        }
        Step::Scatter { x, index, src, .. } => {
            f(x);
            f(index);
            if let Some(s) = src {
                f(s);
            }
        }
    }
}
