//! Predicates: bounds checks of root indices where a split is not provably divisible,
//! and the thread and block guards of global writes.

use std::collections::{HashMap, HashSet};

use super::reductions::red_parallel;
use super::{ext, Lower};
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, Expr};
use crate::ir::{IterKind, ValId};
use crate::sched::{DomId, DomTransform, TensorDomain};

impl Lower<'_> {
    /// Bounds checks of the root indices of `tv` (reduction roots only if `with_red`).
    pub(super) fn predicates(
        &self,
        tv: ValId,
        cidx: &HashMap<DomId, Idx>,
        with_red: bool,
    ) -> Vec<Expr> {
        let d = &self.t(tv).domain;
        let mut out = Vec::new();
        for &r in &d.root {
            let dom = d.dom(r);
            if dom.kind == IterKind::Broadcast || (!with_red && dom.kind == IterKind::Reduction) {
                continue;
            }
            if needs_predicate(d, r) {
                // On the outer dim of exact inner splits when it has an index: one
                // check per vector of a row whose length the vector divides.
                let (at, extent) = exact_outer(d, r);
                match (cidx.get(&at), extent) {
                    (Some(i), Some(e)) if at != r => {
                        out.push(Expr::from(i.clone()).bin(BinOp::Lt, Expr::int(e)));
                    }
                    _ => {
                        if let Some(i) = cidx.get(&r) {
                            out.push(Expr::from(i.clone()).bin(BinOp::Lt, ext(&dom.extent).into()));
                        }
                    }
                }
            }
        }
        out
    }

    /// `threadIdx.x == 0`-style guards for a global write of `tv`.
    pub(super) fn thread_guards(&self, tv: ValId) -> Vec<Expr> {
        let d = &self.t(tv).domain;
        let sources = self.grid_sources(tv);
        let mut out = Vec::new();
        for &p in self.bound.keys() {
            let used = d.loop_dims.iter().any(|&l| {
                let x = d.dom(l);
                x.parallel == p && x.kind != IterKind::Broadcast && x.kind != IterKind::Reduction
            });
            // A grid reduction's result (and what is computed from it) is written by the
            // last block, whichever it is.
            let grid_reduced = p.is_bid()
                && (red_parallel(d, p)
                    || sources.iter().any(|r| red_parallel(&self.t(*r).domain, p)));
            if !used && !grid_reduced {
                let index = Expr::var(p.cuda_index().unwrap_or("0"));
                out.push(index.bin(BinOp::Eq, Expr::int(0)));
            }
        }
        out
    }
}

/// The outermost dim reached from root dim `r` through inner splits of constant factors
/// that divide constant extents, with nothing below their inner dims that needs a
/// predicate, and its extent (`r` and its constant extent when no such split applies).
/// `r < E` is `outer < E / f` there: `r = outer * f + inner` with `0 <= inner < f` and
/// `f` dividing `E`. A persistent row of 32000 in vectors of 8 is checked per vector
/// (`i * 1024 + tid < 4000`), not per element (`(i * 1024 + tid) * 8 + j < 32000`).
fn exact_outer(d: &TensorDomain, r: DomId) -> (DomId, Option<i64>) {
    let mut at = r;
    let mut extent = d.dom(r).extent.as_const();
    while let Some(e) = extent {
        let next = d.transforms.iter().find_map(|tr| match tr {
            DomTransform::Split {
                input,
                outer,
                inner,
                factor,
                inner_split: true,
            } if *input == at => Some((*outer, *inner, factor.as_const())),
            _ => None,
        });
        match next {
            Some((outer, inner, Some(f))) if f > 0 && e % f == 0 && !needs_predicate(d, inner) => {
                at = outer;
                extent = Some(e / f);
            }
            _ => break,
        }
    }
    (at, extent)
}

/// True when some split below root dim `r` is not provably divisible.
fn needs_predicate(d: &TensorDomain, r: DomId) -> bool {
    let mut below: HashSet<DomId> = HashSet::from([r]);
    for tr in &d.transforms {
        match tr {
            DomTransform::Split {
                input,
                outer,
                inner,
                factor,
                ..
            } => {
                if !below.contains(input) {
                    continue;
                }
                let e = &d.dom(*input).extent;
                let divisible = match (e.as_const(), factor.as_const()) {
                    (Some(a), Some(b)) => b != 0 && a % b == 0,
                    _ => false,
                };
                if !divisible && d.dom(*input).kind != IterKind::Broadcast {
                    return true;
                }
                below.insert(*outer);
                below.insert(*inner);
            }
            DomTransform::Merge { outer, inner, out } => {
                if below.contains(outer) || below.contains(inner) {
                    below.insert(*out);
                }
            }
        }
    }
    false
}
