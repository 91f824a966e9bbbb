//! Recompute-per-use rewriting for the inner-reduction schedule (and per loop nest,
//! for the outer reduction's: [`recompute_per_nest`]).
//!
//! A one-row-per-block kernel with a serial loop over the row cannot keep a row's
//! intermediate values in registers when the row length is symbolic. So every pointwise
//! intermediate gets its own copy of its defining expressions for each use (the
//! expression is recomputed in the loop that needs it), and every read of an input
//! tensor other than by a broadcast or a data-movement/indexing op (which read global
//! memory at computed positions) goes through its own register copy (`set`), as
//! `cache_after` would make. Reduction results are shared: after the block reduction
//! every thread of the block holds them.
//!
//! The rewritten fusion has the same inputs and outputs (same ids), so arguments bind
//! to it exactly as to the original.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::{not_supported, DefaultScheduleError};
use crate::ir::{Expr, ExprId, Fusion, Op, ValId};

/// Upper bound on the expressions of a rewritten fusion.
const MAX_EXPRS: usize = 4096;

struct Rewrite<'a> {
    f: &'a Fusion,
    nf: Fusion,
    /// Each read of a fusion input goes through its own register copy (streaming);
    /// otherwise inputs are read as they are (a persistent kernel caches each once).
    copy_inputs: bool,
    is_output: Vec<bool>,
    /// Original reduction outputs, already emitted.
    shared: HashMap<ValId, ValId>,
    /// The loop nest of the anchor being resolved ([`recompute_per_nest`]): pointwise
    /// intermediates are computed once per nest (`memo`); `None` recomputes per use.
    nest: Option<usize>,
    /// (nest, original value) -> its copy in that nest.
    memo: HashMap<(usize, ValId), ValId>,
}

/// The fusion with pointwise intermediates recomputed per use.
pub(crate) fn recompute_per_use(f: &Fusion) -> Result<Fusion, DefaultScheduleError> {
    rewrite(f, true, &|_, _| None)
}

/// The fusion with pointwise intermediates computed once per loop nest: `nest_of`
/// gives each *anchor* (a reduction, or an expression defining a fusion output) its
/// nest; anchors of one nest share the intermediates they read (GELU backward's `dx`,
/// stored as an output and summed over the rows, is computed once), anchors of
/// different nests each get their own copies, as [`recompute_per_use`] makes them.
/// Reads of fusion inputs still go through a register copy per use (each load keeps
/// one reader, so it can be given its own loop of batched loads); so do reads of
/// another anchor's output (recomputed from the shared values, one op).
pub(crate) fn recompute_per_nest(
    f: &Fusion,
    nest_of: &dyn Fn(ExprId, &Expr) -> usize,
) -> Result<Fusion, DefaultScheduleError> {
    rewrite(f, true, &|id, e| Some(nest_of(id, e)))
}

/// The fusion with pointwise intermediates recomputed per use from the fusion inputs,
/// which are read as they are: a persistent kernel that caches each input row once
/// keeps only those rows (the projection of persistent buffers to inputs).
pub(crate) fn project_to_inputs(f: &Fusion) -> Result<Fusion, DefaultScheduleError> {
    rewrite(f, false, &|_, _| None)
}

fn rewrite(
    f: &Fusion,
    copy_inputs: bool,
    nest_of: &dyn Fn(ExprId, &Expr) -> Option<usize>,
) -> Result<Fusion, DefaultScheduleError> {
    let nf = f.without_exprs();
    let mut is_output = vec![false; f.num_vals()];
    for o in f.outputs() {
        is_output[o.val.index()] = true;
    }
    let mut rw = Rewrite {
        f,
        nf,
        copy_inputs,
        is_output,
        shared: HashMap::new(),
        nest: None,
        memo: HashMap::new(),
    };
    let live = f.live_exprs();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let anchor = super::analysis::reduction_axes(&e.op).is_some()
            || e.outputs.iter().any(|o| rw.is_output[o.index()]);
        if !anchor {
            continue;
        }
        rw.nest = nest_of(id, e);
        let inputs = rw.resolve_inputs(e)?;
        rw.push(Expr {
            op: e.op.clone(),
            inputs,
            outputs: e.outputs.clone(),
        })?;
        if super::analysis::reduction_axes(&e.op).is_some() {
            for &o in &e.outputs {
                rw.shared.insert(o, o);
            }
        }
    }
    Ok(rw.nf)
}

impl Rewrite<'_> {
    fn push(&mut self, e: Expr) -> Result<(), DefaultScheduleError> {
        if self.nf.exprs.len() >= MAX_EXPRS {
            return not_supported(format!(
                "recomputing intermediates per use needs more than {MAX_EXPRS} expressions"
            ));
        }
        self.nf.push_expr(e);
        Ok(())
    }

    fn resolve_inputs(&mut self, e: &Expr) -> Result<SmallVec<[ValId; 3]>, DefaultScheduleError> {
        // A broadcast reads its input directly; so do data-movement and indexing ops,
        // which compute where to read from the output index and must read global
        // memory (a register copy would hold another element).
        let direct = matches!(e.op, Op::Broadcast { .. } | Op::Squeeze { .. })
            || super::analysis::is_movement(&e.op);
        e.inputs.iter().map(|&i| self.resolve(i, direct)).collect()
    }

    /// A value holding `v` for one use; `direct`: a fusion input is read as it is, not
    /// through a register copy.
    fn resolve(&mut self, v: ValId, direct: bool) -> Result<ValId, DefaultScheduleError> {
        let val = self.f.val(v);
        if !val.is_tensor() {
            return Ok(v);
        }
        if let Some(&s) = self.shared.get(&v) {
            return Ok(s);
        }
        let Some(d) = val.definition else {
            // A fusion input: broadcasts and data movement read it directly, others
            // through a copy.
            if direct || !self.copy_inputs {
                return Ok(v);
            }
            return self.copy(v, Op::Set, SmallVec::from_elem(v, 1));
        };
        let e = self.f.expr(d);
        if e.outputs.len() != 1 {
            return not_supported(format!("the multi-output expression {}", e.op.name()));
        }
        // Within a nest, an intermediate is computed once; an anchor's output read by
        // another anchor is recomputed there (one op, from the shared values).
        let key = self
            .nest
            .filter(|_| !self.is_output[v.index()])
            .map(|n| (n, v));
        if let Some(&c) = key.and_then(|k| self.memo.get(&k)) {
            return Ok(c);
        }
        let inputs = self.resolve_inputs(e)?;
        let id = self.copy(v, e.op.clone(), inputs)?;
        if let Some(k) = key {
            self.memo.insert(k, id);
        }
        Ok(id)
    }

    /// A new value like `v` (its dtype and shape), defined by `op` of `inputs`.
    fn copy(
        &mut self,
        v: ValId,
        op: Op,
        inputs: SmallVec<[ValId; 3]>,
    ) -> Result<ValId, DefaultScheduleError> {
        let mut copy = self.f.val(v).clone();
        copy.definition = None;
        let id = self.nf.push_val(copy);
        self.push(Expr {
            op,
            inputs,
            outputs: SmallVec::from_elem(id, 1),
        })?;
        Ok(id)
    }
}

/// The fusion with broadcasts moved above pointwise math: `broadcast(f(a, b))`
/// becomes `f(broadcast(a), broadcast(b))` (nested broadcasts compose), down to fusion
/// inputs, reduction results and other ops. Values are unchanged; what changes is that
/// no computed tensor has fewer dims than the tensors it is combined with (a `[H]` weight
/// cast to f32 is cast after its broadcast to `[1, H]`), so one loop structure covers
/// every computed tensor. Fusion outputs keep their ids; a broadcast that is itself an
/// output is left as it is.
pub(crate) fn push_broadcasts(f: &Fusion) -> Fusion {
    let mut nf = f.without_exprs();
    let mut is_output = vec![false; f.num_vals()];
    for o in f.outputs() {
        is_output[o.val.index()] = true;
    }
    // Original value -> the value that replaces it in later expressions.
    let mut replace: HashMap<ValId, ValId> = HashMap::new();
    let live = f.live_exprs();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let remap = |v: ValId, replace: &HashMap<ValId, ValId>| *replace.get(&v).unwrap_or(&v);
        if let Op::Broadcast { mask } = &e.op {
            let out = e.outputs[0];
            if !is_output[out.index()] {
                let template = f.val(out).clone();
                let new = bcast(f, &mut nf, &replace, e.inputs[0], mask, &template);
                replace.insert(out, new);
                continue;
            }
        }
        let inputs = e.inputs.iter().map(|&i| remap(i, &replace)).collect();
        nf.push_expr(Expr {
            op: e.op.clone(),
            inputs,
            outputs: e.outputs.clone(),
        });
    }
    nf
}

/// `f` with each broadcast whose readers differ in which dims are broadcasts (an output
/// `[A, 1, C, 1]` computed from `t[A, C]` broadcast, beside `x[A, B, C, D] + t`
/// broadcast) given its own copy per reader (the broadcast pushed to its source again,
/// [`push_broadcasts`]' `bcast`). One tensor could only be computed inside the loops the
/// readers share, which do not cover its symbolic dims (GPU fuzz seed 10603257: "T6 in
/// Local memory spans loop axis 0 of symbolic extent"); a copy per reader is inlined
/// into its reader. Broadcasts read alike (a `[H]` weight in every row) stay shared.
pub(crate) fn broadcast_per_reader(f: &Fusion) -> Fusion {
    let uses = f.uses();
    let live = f.live_exprs();
    let pattern = |v: ValId| -> Vec<bool> {
        f.tensor_type(v).map_or_else(Vec::new, |t| {
            t.domain.iter().map(|d| d.is_broadcast_like()).collect()
        })
    };
    let mut split: HashMap<ValId, (ValId, Vec<bool>)> = HashMap::new();
    for (id, e) in f.exprs() {
        let Op::Broadcast { mask } = &e.op else {
            continue;
        };
        let out = e.outputs[0];
        if !live[id.index()] || f.outputs().iter().any(|o| o.val == out) {
            continue;
        }
        let mut patterns: Vec<Vec<bool>> = uses[out.index()]
            .iter()
            .filter(|u| live[u.index()])
            .flat_map(|&u| f.expr(u).outputs.iter().map(|&o| pattern(o)))
            .collect();
        patterns.sort();
        patterns.dedup();
        if patterns.len() > 1 {
            split.insert(out, (e.inputs[0], mask.clone()));
        }
    }
    if split.is_empty() {
        return f.clone();
    }
    let mut nf = f.without_exprs();
    let none = HashMap::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] || split.contains_key(&e.outputs[0]) {
            continue;
        }
        let inputs = e
            .inputs
            .iter()
            .map(|&i| match split.get(&i) {
                Some((src, mask)) => bcast(f, &mut nf, &none, *src, mask, f.val(i)),
                None => i,
            })
            .collect();
        nf.push_expr(Expr {
            op: e.op.clone(),
            inputs,
            outputs: e.outputs.clone(),
        });
    }
    nf
}

fn is_elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set | Op::SegmentSet
    )
}

/// `v` broadcast by `mask`, with its dtype and `template`'s dims.
fn bcast(
    f: &Fusion,
    nf: &mut Fusion,
    replace: &HashMap<ValId, ValId>,
    v: ValId,
    mask: &[bool],
    template: &crate::ir::Val,
) -> ValId {
    let val = f.val(v);
    let mut ty = template.clone();
    ty.dtype = val.dtype;
    ty.definition = None;
    let def = val.definition.map(|d| f.expr(d));
    match def {
        Some(e) if is_elementwise(&e.op) && e.outputs.len() == 1 => {
            let inputs = e
                .inputs
                .iter()
                .map(|&i| {
                    if f.val(i).is_tensor() {
                        bcast(f, nf, replace, i, mask, template)
                    } else {
                        i
                    }
                })
                .collect();
            let id = nf.push_val(ty);
            nf.push_expr(Expr {
                op: e.op.clone(),
                inputs,
                outputs: SmallVec::from_elem(id, 1),
            });
            id
        }
        Some(e) if matches!(e.op, Op::Broadcast { .. }) => {
            let Op::Broadcast { mask: inner } = &e.op else {
                unreachable!("matched above")
            };
            // Final dim i is new if the outer mask says so, else it is dim j of the inner
            // broadcast's output, new if the inner mask says so.
            let mut j = 0;
            let composed: Vec<bool> = mask
                .iter()
                .map(|&m| {
                    if m {
                        true
                    } else {
                        let n = inner.get(j).copied().unwrap_or(false);
                        j += 1;
                        n
                    }
                })
                .collect();
            bcast(f, nf, replace, e.inputs[0], &composed, template)
        }
        _ => {
            let src = *replace.get(&v).unwrap_or(&v);
            let id = nf.push_val(ty);
            nf.push_expr(Expr {
                op: Op::Broadcast {
                    mask: mask.to_vec(),
                },
                inputs: SmallVec::from_elem(src, 1),
                outputs: SmallVec::from_elem(id, 1),
            });
            id
        }
    }
}
