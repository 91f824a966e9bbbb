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

use super::loops::nest;
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
    let first_loop: Vec<Option<(ValId, usize)>> = s
        .exprs
        .iter()
        .map(|e| nest(s, e.output).first().copied())
        .collect();
    let mut order = Vec::with_capacity(n);
    let mut emitted = vec![false; n];
    for (ei, _) in pulled.iter().enumerate().filter(|(_, &p)| !p) {
        emit(ei, &producers, &first_loop, &mut emitted, &mut order);
    }
    // Whatever nothing pulled (not reachable from an expression kept in place).
    for ei in 0..n {
        emit(ei, &producers, &first_loop, &mut emitted, &mut order);
    }
    order
}

/// Emits `ei` after its unemitted producers. Producers computed outside `ei`'s
/// outermost loop go first, each with its own producers in the same way; then the
/// producers inside that loop and `ei` itself, in schedule order. A consumer of two
/// chains that each end inside its loop (`dx = g - a - xhat * b`, with `g` and `xhat`
/// kept rows and `a`, `b` row reductions) thus gets both chains' reductions before the
/// loop opens, rather than the first chain's in-loop part before the second chain's
/// reduction, which would need the loop again after it closed.
fn emit(
    ei: usize,
    producers: &[Vec<usize>],
    first_loop: &[Option<(ValId, usize)>],
    emitted: &mut [bool],
    order: &mut Vec<usize>,
) {
    enum Task {
        Visit(usize),
        Emit(Vec<usize>),
    }
    // An explicit stack: producer chains of long fusions would recurse deeply.
    let mut stack = vec![Task::Visit(ei)];
    // The visit that last classified each expression (so each is classified once).
    let mut seen = vec![usize::MAX; producers.len()];
    let mut visit = 0;
    while let Some(task) = stack.pop() {
        match task {
            Task::Emit(list) => {
                for e in list {
                    if !emitted[e] {
                        emitted[e] = true;
                        order.push(e);
                    }
                }
            }
            Task::Visit(e) => {
                if emitted[e] {
                    continue;
                }
                // The unemitted producers inside `e`'s outermost loop, transitively.
                visit += 1;
                seen[e] = visit;
                let mut inside = vec![e];
                let mut outside: Vec<usize> = Vec::new();
                let mut k = 0;
                while k < inside.len() {
                    let x = inside[k];
                    k += 1;
                    for &p in &producers[x] {
                        if emitted[p] || seen[p] == visit {
                            continue;
                        }
                        seen[p] = visit;
                        if first_loop[e].is_some() && first_loop[p] == first_loop[e] {
                            inside.push(p);
                        } else {
                            outside.push(p);
                        }
                    }
                }
                inside.sort_unstable();
                outside.sort_unstable();
                stack.push(Task::Emit(inside));
                stack.extend(outside.into_iter().rev().map(Task::Visit));
            }
        }
    }
}

/// What the grouped orders read of each expression: its position in the base order,
/// the expressions that produce its inputs, and its loop nest.
struct Ranked {
    rank: Vec<usize>,
    producers: Vec<Vec<usize>>,
    nests: Vec<Vec<(ValId, usize)>>,
}

fn ranked(s: &Schedule, base: &[usize]) -> Ranked {
    let mut rank = vec![0usize; base.len()];
    for (r, &e) in base.iter().enumerate() {
        rank[e] = r;
    }
    let producers = s
        .exprs
        .iter()
        .map(|e| e.inputs.iter().filter_map(|&v| s.definition(v)).collect())
        .collect();
    let nests = s.exprs.iter().map(|e| nest(s, e.output)).collect();
    Ranked {
        rank,
        producers,
        nests,
    }
}

/// [`emission_order`], with the expressions of each loop kept together: a topological
/// order that, among the expressions whose producers are all emitted, takes one that
/// shares the most open loops with the last emitted expression (the earliest of them in
/// [`emission_order`] on ties). A column sum computed with a row loop (`compute_with`)
/// then stays inside it, ahead of the math that reads its result after the loop, and a
/// load inlined into its cast inside the row loop stays next to the cast.
pub(super) fn grouped_order(s: &Schedule, base: &[usize]) -> Vec<usize> {
    let n = base.len();
    let Ranked {
        rank,
        producers,
        nests,
    } = ranked(s, base);
    let mut emitted = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut open: &[(ValId, usize)] = &[];
    while order.len() < n {
        let ready = (0..n).filter(|&e| !emitted[e] && producers[e].iter().all(|&p| emitted[p]));
        let mut best: Option<(std::cmp::Reverse<usize>, usize, usize)> = None;
        for e in ready {
            let shared = open
                .iter()
                .zip(&nests[e])
                .take_while(|(a, b)| a == b)
                .count();
            let key = (std::cmp::Reverse(shared), rank[e], e);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        let Some((_, _, e)) = best else { break };
        emitted[e] = true;
        order.push(e);
        open = &nests[e];
    }
    order
}

/// A topological order that keeps every loop's expressions together at every depth,
/// when one exists (tried last): the expressions that share loops `0..d` are split
/// into those computed at that depth and groups by their loop `d`; the groups and
/// single expressions are ordered by their dependencies (the earliest in `base` first
/// among the ready ones), and each group is ordered the same way one loop deeper.
/// Values with several readers in different inner loops of one row (an output's
/// vector loop and a column sum's, GELU's `x` and sigmoid read by both) get loops of
/// their own that the two orders above can interleave with an inlined chain (a cast
/// placed inside the sum's vector loop before the loop of a value it reads opened and
/// closed it). `None` when the groups depend on each other both ways.
pub(super) fn nested_order(s: &Schedule, base: &[usize]) -> Option<Vec<usize>> {
    let n = base.len();
    let Ranked {
        rank,
        producers,
        nests,
    } = ranked(s, base);
    let mut out = Vec::with_capacity(n);
    let all: Vec<usize> = (0..n).collect();
    order_level(&all, 0, &nests, &producers, &rank, &mut out)?;
    Some(out)
}

/// A loop of the kernel: the tensor that owns it and its position (`loops::loop_key`).
type LoopKey = (ValId, usize);

/// Orders `members` (which share their first `depth` loops) into `out`; see
/// [`nested_order`].
fn order_level(
    members: &[usize],
    depth: usize,
    nests: &[Vec<(ValId, usize)>],
    producers: &[Vec<usize>],
    rank: &[usize],
    out: &mut Vec<usize>,
) -> Option<()> {
    // Units: one per expression computed at this depth, one per loop at this depth.
    let mut units: Vec<(Option<LoopKey>, Vec<usize>)> = Vec::new();
    let mut unit_of = std::collections::HashMap::new();
    for &e in members {
        let key = nests[e].get(depth).copied();
        let u = match key {
            Some(k) => match units.iter().position(|(uk, _)| *uk == Some(k)) {
                Some(u) => u,
                None => {
                    units.push((Some(k), Vec::new()));
                    units.len() - 1
                }
            },
            None => {
                units.push((None, Vec::new()));
                units.len() - 1
            }
        };
        units[u].1.push(e);
        unit_of.insert(e, u);
    }
    // Dependencies between units (producers outside `members` are ordered elsewhere).
    let m = units.len();
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (u, (_, es)) in units.iter().enumerate() {
        for &e in es {
            for p in &producers[e] {
                if let Some(&pu) = unit_of.get(p) {
                    if pu != u && !deps[u].contains(&pu) {
                        deps[u].push(pu);
                    }
                }
            }
        }
    }
    let first = |u: usize| {
        units[u]
            .1
            .iter()
            .map(|&e| rank[e])
            .min()
            .unwrap_or(usize::MAX)
    };
    let mut done = vec![false; m];
    for _ in 0..m {
        let next = (0..m)
            .filter(|&u| !done[u] && deps[u].iter().all(|&d| done[d]))
            .min_by_key(|&u| first(u))?;
        done[next] = true;
        let (key, es) = &units[next];
        if key.is_some() {
            order_level(es, depth + 1, nests, producers, rank, out)?;
        } else {
            out.extend(es.iter().copied());
        }
    }
    Some(())
}
