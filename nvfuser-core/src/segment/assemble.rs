//! From groups to segments: outputs, boundary forwarding, assembly.
//!
//! Forwarding: a boundary value that is cheap to recompute from another tensor crosses
//! as that tensor, and each consumer recomputes it:
//! - `broadcast(u)`: `u` crosses (the producer writes the reduction result, not a
//!   broadcast view of it; the bytes are the same);
//! - `cast(u)` from half precision, when some fusion output is half and `u` is held in
//!   half (see `half_source`): `u` crosses, halving the traffic without changing a value.
//!
//! A rewrite is kept only if the scheduler still accepts every segment it changes.

use rustc_hash::{FxHashMap, FxHashSet};

use super::build::{build, prune, Built};
use super::graph::Graph;
use super::merge::Segmenter;
use super::{HalfBoundary, Segment, SegmentError};
use crate::ir::{ExprId, Op, ValId};
use crate::scheduler::SchedulerKind;
use crate::DataType;

/// Per segment: the expressions it owns and the ones it recomputes (owned elsewhere).
pub(crate) type Lists = Vec<(Vec<ExprId>, Vec<ExprId>)>;

fn all_exprs(own: &[ExprId], rec: &[ExprId]) -> Vec<ExprId> {
    let mut all: Vec<ExprId> = own.iter().chain(rec).copied().collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Per segment, the values it must output: fusion outputs it owns and values other
/// segments read. Also prunes expressions that feed no output (repeating until stable)
/// and returns the pruned lists.
pub(crate) fn outputs_and_pruned(
    g: &Graph<'_>,
    lists: &[(Vec<ExprId>, Vec<ExprId>)],
) -> (Lists, Vec<Vec<ValId>>) {
    let f = g.fusion;
    let mut lists = lists.to_vec();
    loop {
        let mut owner: FxHashMap<ValId, usize> = FxHashMap::default();
        for (s, (own, _)) in lists.iter().enumerate() {
            for &e in own {
                for &o in &f.expr(e).outputs {
                    owner.insert(o, s);
                }
            }
        }
        let mut outs: Vec<FxHashSet<ValId>> = vec![FxHashSet::default(); lists.len()];
        for o in f.outputs() {
            if let Some(&s) = owner.get(&o.val) {
                outs[s].insert(o.val);
            }
        }
        for (own, rec) in lists.iter() {
            let mut produced: FxHashSet<ValId> = FxHashSet::default();
            for &e in own.iter().chain(rec) {
                produced.extend(f.expr(e).outputs.iter().copied());
            }
            for &e in own.iter().chain(rec) {
                for &v in &g.reads[g.node_of[e.index()] as usize] {
                    if !produced.contains(&v) {
                        if let Some(&o) = owner.get(&v) {
                            outs[o].insert(v);
                        }
                    }
                }
            }
        }
        let outs: Vec<Vec<ValId>> = outs
            .into_iter()
            .map(|set| {
                let mut v: Vec<ValId> = set.into_iter().collect();
                v.sort_unstable();
                v
            })
            .collect();
        let pruned: Lists = lists
            .iter()
            .zip(&outs)
            .map(|((own, rec), out)| {
                let kept: FxHashSet<ExprId> =
                    prune(g, &all_exprs(own, rec), out).into_iter().collect();
                (
                    own.iter().copied().filter(|e| kept.contains(e)).collect(),
                    rec.iter().copied().filter(|e| kept.contains(e)).collect(),
                )
            })
            .collect();
        if pruned == lists {
            return (lists, outs);
        }
        lists = pruned;
    }
}

/// The computed tensors that the expressions `own` and `rec` read but do not produce.
fn outside_reads(g: &Graph<'_>, own: &[ExprId], rec: &[ExprId]) -> FxHashSet<ValId> {
    let mut produced: FxHashSet<ValId> = FxHashSet::default();
    for &e in own.iter().chain(rec) {
        produced.extend(g.fusion.expr(e).outputs.iter().copied());
    }
    let mut reads = FxHashSet::default();
    for &e in own.iter().chain(rec) {
        for &v in &g.reads[g.node_of[e.index()] as usize] {
            if !produced.contains(&v) {
                reads.insert(v);
            }
        }
    }
    reads
}

/// The outputs of one list of owned expressions (no recomputation), for the
/// whole-fusion check.
pub(crate) fn outputs_of(g: &Graph<'_>, lists: &[(Vec<ExprId>, Vec<ExprId>)]) -> Vec<Vec<ValId>> {
    outputs_and_pruned(g, lists).1
}

/// Whether boundary value `v` is an upcast of a tensor held in half precision:
/// `v = cast(u)` with `v` f32/f64 and `u` f16/bf16 that is a fusion input or the result
/// of an explicit cast or `segment_set` (so its value is exactly representable in
/// half, and storing `u` instead of `v` loses nothing).
fn half_source(g: &Graph<'_>, v: ValId) -> Option<ValId> {
    let f = g.fusion;
    let val = f.val(v);
    if !val.is_tensor() || !matches!(val.dtype, DataType::F32 | DataType::F64) {
        return None;
    }
    let expr = f.expr(val.definition?);
    if expr.op != Op::Cast {
        return None;
    }
    let u = expr.inputs[0];
    let uval = f.val(u);
    if !uval.is_tensor() || !uval.dtype.is_half() {
        return None;
    }
    let held = g.is_input[u.index()]
        || uval
            .definition
            .is_some_and(|d| matches!(f.expr(d).op, Op::Cast | Op::SegmentSet));
    held.then_some(u)
}

/// Segments under forwarding: their expression lists and outputs, what each reads from
/// the others, who reads each value, and who owns (computes for the others) each value.
#[derive(Clone)]
struct State {
    lists: Lists,
    outs: Vec<Vec<ValId>>,
    seg_reads: Vec<FxHashSet<ValId>>,
    readers: FxHashMap<ValId, Vec<usize>>,
    owner: FxHashMap<ValId, usize>,
}

impl State {
    fn new(g: &Graph<'_>, lists: Lists, outs: Vec<Vec<ValId>>) -> State {
        let mut owner: FxHashMap<ValId, usize> = FxHashMap::default();
        for (s, (own, _)) in lists.iter().enumerate() {
            for &e in own {
                for &o in &g.fusion.expr(e).outputs {
                    owner.insert(o, s);
                }
            }
        }
        let seg_reads: Vec<FxHashSet<ValId>> = lists
            .iter()
            .map(|(own, rec)| outside_reads(g, own, rec))
            .collect();
        let mut readers: FxHashMap<ValId, Vec<usize>> = FxHashMap::default();
        for (s, r) in seg_reads.iter().enumerate() {
            for &v in r {
                readers.entry(v).or_default().push(s);
            }
        }
        State {
            lists,
            outs,
            seg_reads,
            readers,
            owner,
        }
    }

    /// Makes every segment that reads `v` from another recompute it (its definition
    /// goes into their recomputed lists); returns those segments.
    fn forward(&mut self, g: &Graph<'_>, v: ValId) -> Vec<usize> {
        let Some(def) = g.fusion.val(v).definition else {
            return Vec::new();
        };
        let consumers: Vec<usize> = self.readers.get(&v).cloned().unwrap_or_default();
        for &s in &consumers {
            let (own, rec) = &mut self.lists[s];
            if !rec.contains(&def) && !own.contains(&def) {
                rec.push(def);
                rec.sort_unstable();
            }
        }
        consumers
    }

    /// After the lists of `dirty` segments changed: recomputes what they read, then the
    /// outputs of every segment whose readers changed (pruning what feeds nothing),
    /// until nothing changes. Returns every segment whose list or outputs changed.
    fn refresh(&mut self, g: &Graph<'_>, dirty: Vec<usize>) -> Vec<usize> {
        let mut changed: FxHashSet<usize> = dirty.iter().copied().collect();
        let mut dirty: FxHashSet<usize> = dirty.into_iter().collect();
        while !dirty.is_empty() {
            let mut recompute: FxHashSet<usize> = FxHashSet::default();
            for &s in &dirty {
                let (own, rec) = &self.lists[s];
                let new_reads = outside_reads(g, own, rec);
                for x in self.seg_reads[s].difference(&new_reads) {
                    if let Some(rs) = self.readers.get_mut(x) {
                        rs.retain(|&r| r != s);
                    }
                    recompute.extend(self.owner.get(x));
                }
                for &x in new_reads.difference(&self.seg_reads[s]) {
                    self.readers.entry(x).or_default().push(s);
                    recompute.extend(self.owner.get(&x));
                }
                self.seg_reads[s] = new_reads;
                recompute.insert(s);
            }
            dirty.clear();
            let mut recompute: Vec<usize> = recompute.into_iter().collect();
            recompute.sort_unstable();
            for s in recompute {
                let (own, rec) = &self.lists[s];
                let mut out: Vec<ValId> = Vec::new();
                for &e in own {
                    for &o in &g.fusion.expr(e).outputs {
                        let read_elsewhere = self
                            .readers
                            .get(&o)
                            .is_some_and(|rs| rs.iter().any(|&r| r != s));
                        if g.is_output[o.index()] || read_elsewhere {
                            out.push(o);
                        }
                    }
                }
                out.sort_unstable();
                let kept: FxHashSet<ExprId> =
                    prune(g, &all_exprs(own, rec), &out).into_iter().collect();
                let own: Vec<ExprId> = own.iter().copied().filter(|e| kept.contains(e)).collect();
                let rec: Vec<ExprId> = rec.iter().copied().filter(|e| kept.contains(e)).collect();
                let list_changed =
                    (own.len(), rec.len()) != (self.lists[s].0.len(), self.lists[s].1.len());
                if list_changed {
                    self.lists[s] = (own, rec);
                    dirty.insert(s);
                }
                if list_changed || out != self.outs[s] {
                    self.outs[s] = out;
                    changed.insert(s);
                }
            }
        }
        let mut changed: Vec<usize> = changed.into_iter().collect();
        changed.sort_unstable();
        changed
    }
}

/// The tensor a boundary value `v` can be recomputed from by its consumers, and
/// whether that is a half-precision upcast (see the module documentation).
fn forward_source(g: &Graph<'_>, v: ValId, wants_half: bool) -> Option<(ValId, bool)> {
    let expr = g.fusion.expr(g.fusion.val(v).definition?);
    match expr.op {
        Op::Broadcast { .. } if g.fusion.val(expr.inputs[0]).is_tensor() => {
            Some((expr.inputs[0], false))
        }
        Op::Cast if wants_half => half_source(g, v).map(|u| (u, true)),
        _ => None,
    }
}

fn describe(g: &Graph<'_>, exprs: &[ExprId]) -> String {
    let f = g.fusion;
    let parts: Vec<String> = exprs
        .iter()
        .map(|&e| {
            let expr = f.expr(e);
            let name = |v: &ValId| crate::print::val_name(f, *v, true);
            let ins: Vec<String> = expr.inputs.iter().map(name).collect();
            let outs: Vec<String> = expr.outputs.iter().map(name).collect();
            format!(
                "{} = {}({})",
                outs.join(", "),
                expr.op.name(),
                ins.join(", ")
            )
        })
        .collect();
    parts.join("; ")
}

/// Builds the final segments from the groups (`owned`, topological order), checks the
/// ones whose scheduler is not known yet, forwards broadcasts (and half-precision
/// upcasts when `wants_half`) across boundaries, and drops segments left without
/// outputs.
pub(crate) fn assemble(
    g: &Graph<'_>,
    seg: &mut Segmenter<'_, '_, '_>,
    owned: &[Vec<ExprId>],
    kinds: &mut [Option<SchedulerKind>],
    wants_half: bool,
) -> Result<(Vec<Segment>, Vec<HalfBoundary>), SegmentError> {
    let lists: Lists = owned.iter().map(|o| (o.clone(), Vec::new())).collect();
    let (mut lists, outs) = outputs_and_pruned(g, &lists);
    let mut built: Vec<Built> = lists
        .iter()
        .zip(&outs)
        .map(|((own, rec), out)| build(g, &all_exprs(own, rec), out))
        .collect();
    for (k, b) in built.iter().enumerate() {
        if kinds[k].is_none() && !b.outputs.is_empty() {
            match seg.check(&b.fusion) {
                Ok(kind) => kinds[k] = Some(kind),
                Err(rejections) => {
                    return Err(SegmentError::Unschedulable {
                        exprs: b.exprs.clone(),
                        what: describe(g, &lists[k].0),
                        rejections,
                    })
                }
            }
        }
    }

    // Forwarding, in rounds: every forwardable boundary value of a round at once, then
    // the changed segments are rebuilt and checked once.
    let mut half = Vec::new();
    if !lists.is_empty() {
        let mut state = State::new(g, lists, outs);
        let mut tried: FxHashSet<ValId> = FxHashSet::default();
        loop {
            let mut candidates: Vec<(ValId, ValId, bool)> = state
                .readers
                .iter()
                .filter(|(v, rs)| !rs.is_empty() && !tried.contains(*v))
                .filter_map(|(&v, _)| forward_source(g, v, wants_half).map(|(u, h)| (v, u, h)))
                .collect();
            if candidates.is_empty() {
                break;
            }
            candidates.sort_unstable();
            tried.extend(candidates.iter().map(|c| c.0));
            // A segment the scheduler refuses after the rewrite drops the candidates that
            // touch it; a few retries, then the round's rest is given up.
            for _attempt in 0..4 {
                if candidates.is_empty() {
                    break;
                }
                let mut trial = state.clone();
                let mut direct: Vec<Vec<usize>> = Vec::new();
                for &(v, _, _) in &candidates {
                    direct.push(trial.forward(g, v));
                }
                let changed = trial.refresh(g, direct.iter().flatten().copied().collect());
                let mut rebuilt: Vec<(usize, Built, Option<SchedulerKind>)> = Vec::new();
                let mut refused: FxHashSet<usize> = FxHashSet::default();
                for s in changed {
                    let (own, rec) = &trial.lists[s];
                    let b = build(g, &all_exprs(own, rec), &trial.outs[s]);
                    if b.outputs.is_empty() {
                        rebuilt.push((s, b, kinds[s]));
                        continue;
                    }
                    match seg.check(&b.fusion) {
                        Ok(kind) => rebuilt.push((s, b, Some(kind))),
                        Err(_) => {
                            refused.insert(s);
                        }
                    }
                }
                if refused.is_empty() {
                    for (s, b, kind) in rebuilt {
                        built[s] = b;
                        kinds[s] = kind;
                    }
                    state = trial;
                    half.extend(
                        candidates
                            .iter()
                            .filter(|c| c.2)
                            .map(|&(v, u, _)| HalfBoundary {
                                value: v,
                                stored: u,
                            }),
                    );
                    break;
                }
                let before = candidates.len();
                candidates = candidates
                    .into_iter()
                    .zip(direct)
                    .filter(|(_, d)| !d.iter().any(|s| refused.contains(s)))
                    .map(|(c, _)| c)
                    .collect();
                if candidates.len() == before {
                    // The refusal follows from a knock-on change: give the round up.
                    break;
                }
            }
        }
        lists = state.lists;
    }

    let segments = built
        .into_iter()
        .zip(lists)
        .zip(kinds.iter())
        .filter(|((b, _), _)| !b.outputs.is_empty())
        .map(|((b, (_, rec)), kind)| Segment {
            fusion: b.fusion,
            scheduler: kind.unwrap_or(SchedulerKind::Default),
            exprs: b.exprs,
            recomputed: rec,
            inputs: b.inputs,
            outputs: b.outputs,
            map: b.map,
        })
        .collect();
    Ok((segments, half))
}
