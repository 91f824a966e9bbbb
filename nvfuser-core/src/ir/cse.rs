//! Common tensor expressions computed once.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::{ExprId, Fusion, Op, ValId};

impl Fusion {
    /// The fusion with each repeated tensor expression computed once: a live expression
    /// with the same op and (after earlier replacements) the same inputs as an earlier
    /// one, whose outputs have the same types, reads through the earlier one's outputs
    /// instead. Every op is a function of its attributes and inputs (random ops too:
    /// their stream is given by attributes), so no value changes. An expression that
    /// defines a fusion output is kept, as are scalar expressions (their values appear
    /// in extents). Inputs, outputs and the value arena keep their ids; with the
    /// rewrite comes the replacement of each dropped value. `None` when nothing repeats.
    pub fn dedup_exprs(&self) -> Option<(Fusion, FxHashMap<ValId, ValId>)> {
        let live = self.live_exprs();
        let mut is_output = vec![false; self.num_vals()];
        for o in self.outputs() {
            is_output[o.val.index()] = true;
        }
        let mut first: FxHashMap<(&Op, SmallVec<[ValId; 4]>), ExprId> = FxHashMap::default();
        let mut replaced: FxHashMap<ValId, ValId> = FxHashMap::default();
        let mut inputs_of: Vec<SmallVec<[ValId; 4]>> = Vec::with_capacity(self.num_exprs());
        for (id, e) in self.exprs() {
            let ins: SmallVec<[ValId; 4]> = e
                .inputs
                .iter()
                .map(|i| *replaced.get(i).unwrap_or(i))
                .collect();
            inputs_of.push(ins.clone());
            let tensors = e.outputs.iter().all(|&o| self.val(o).is_tensor());
            if !live[id.index()] || !tensors {
                continue;
            }
            match first.get(&(&e.op, ins.clone())) {
                Some(&earlier) => {
                    let keep = &self.expr(earlier).outputs;
                    let same = keep.len() == e.outputs.len()
                        && keep.iter().zip(&e.outputs).all(|(&a, &b)| {
                            !is_output[b.index()]
                                && self.val(a).dtype == self.val(b).dtype
                                && self.val(a).kind == self.val(b).kind
                        });
                    if same {
                        for (&a, &b) in keep.iter().zip(&e.outputs) {
                            replaced.insert(b, a);
                        }
                    }
                }
                None => {
                    first.insert((&e.op, ins), id);
                }
            }
        }
        if replaced.is_empty() {
            return None;
        }
        let mut nf = self.without_exprs();
        for (id, e) in self.exprs() {
            if e.outputs.iter().any(|o| replaced.contains_key(o)) {
                continue;
            }
            let mut e = e.clone();
            e.inputs = inputs_of[id.index()].iter().copied().collect();
            nf.push_expr(e);
        }
        Some((nf, replaced))
    }
}
