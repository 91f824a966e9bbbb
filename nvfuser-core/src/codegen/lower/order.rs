//! The order expressions are emitted in: a topological order in which every expression
//! computed at a consumer (inlined below a compute-at position) comes right before the
//! first expression that reads it, with its own unemitted producers right before it.
//!
//! The schedule keeps its expressions in the fusion's topological order, which can put
//! an unrelated expression between a producer and the consumer whose loops it shares.
//! Two inputs of a persistent kernel, each loaded inside the loops of its own cast
//! (`load dy; load y; cast dy; cast y`), then close the first cast's loops before the
//! cast itself needs them. Pulling each inlined producer to its reader
//! (`load dy; cast dy; load y; cast y`) keeps every shared loop open from the first
//! expression inside it to the last, which is what the loop tree needs. Expressions
//! that are not inlined keep their relative order.
//!
//! Pulling is not always better: a per-row value inlined at the row loop of a consumer
//! that comes after another loop nest of the row would be moved past it. So
//! [`super::lower`] builds the loop tree in the schedule's own order first and takes
//! this order only when that fails (every kernel that lowered before lowers the same).

use crate::ir::ValId;
use crate::sched::Schedule;

/// The expressions of `s` in emission order (indices into `s.exprs`).
pub(super) fn emission_order(s: &Schedule) -> Vec<usize> {
    let n = s.exprs.len();
    // The defining expression of every value an expression reads.
    let producers: Vec<Vec<usize>> = s
        .exprs
        .iter()
        .map(|e| {
            let mut p: Vec<usize> = e.inputs.iter().filter_map(|&v| s.definition(v)).collect();
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect();
    let read = |v: ValId| s.exprs.iter().any(|e| e.inputs.contains(&v));
    // Inlined and read: emitted when first needed rather than at its own position.
    let pulled: Vec<bool> = s
        .exprs
        .iter()
        .map(|e| {
            s.tensors
                .get(&e.output)
                .and_then(|t| t.compute_at)
                .is_some_and(|ca| ca.pos > 0)
                && e.outputs().into_iter().any(read)
        })
        .collect();
    let mut order = Vec::with_capacity(n);
    let mut emitted = vec![false; n];
    for (ei, _) in pulled.iter().enumerate().filter(|(_, &p)| !p) {
        emit(ei, &producers, &mut emitted, &mut order);
    }
    // Whatever nothing pulled (not reachable from an expression kept in place).
    for ei in 0..n {
        emit(ei, &producers, &mut emitted, &mut order);
    }
    order
}

/// Emits `ei` after its unemitted producers (each after its own, oldest first).
fn emit(ei: usize, producers: &[Vec<usize>], emitted: &mut [bool], order: &mut Vec<usize>) {
    if emitted[ei] {
        return;
    }
    // An explicit stack: producer chains of long fusions would recurse deeply.
    let mut stack: Vec<(usize, usize)> = vec![(ei, 0)];
    emitted[ei] = true;
    while let Some((e, next)) = stack.pop() {
        match producers[e][next..].iter().position(|&p| !emitted[p]) {
            Some(k) => {
                let p = producers[e][next + k];
                stack.push((e, next + k + 1));
                emitted[p] = true;
                stack.push((p, 0));
            }
            None => order.push(e),
        }
    }
}
