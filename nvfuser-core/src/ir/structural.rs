//! Structural identity of fusions.
//!
//! Two fusions are structurally equal when, after renumbering their values in a
//! canonical order (inputs in declaration order, then every value in the order the
//! expressions first mention it), their values, expressions, inputs and outputs are
//! identical. So constants, pad widths, fill values, axes and dtypes are all part of
//! identity, while the point at which an input was declared is not.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

use super::{Expr, Fusion, Output, Val, ValId, ValKind};

/// A fusion renumbered into canonical order; derived equality is structural equality.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Canonical {
    vals: Vec<Val>,
    exprs: Vec<Expr>,
    inputs: Vec<ValId>,
    outputs: Vec<Output>,
    /// Offsets per call of the generator-fed inputs (which are the last two inputs).
    generator_draws: Option<u64>,
}

impl Fusion {
    /// The canonical renumbering of this fusion (the basis of `==` and `Hash`).
    pub fn canonical(&self) -> Canonical {
        const UNSET: u32 = u32::MAX;
        let mut map = vec![UNSET; self.vals.len()];
        let mut order: Vec<ValId> = Vec::with_capacity(self.vals.len());
        let number = |v: ValId, map: &mut Vec<u32>, order: &mut Vec<ValId>| {
            if let Some(slot) = map.get_mut(v.index()) {
                if *slot == UNSET {
                    *slot = order.len() as u32;
                    order.push(v);
                }
            }
        };
        for &i in &self.inputs {
            number(i, &mut map, &mut order);
        }
        for e in &self.exprs {
            for &i in &e.inputs {
                number(i, &mut map, &mut order);
            }
            for &o in &e.outputs {
                number(o, &mut map, &mut order);
            }
        }
        for o in &self.outputs {
            number(o.val, &mut map, &mut order);
        }
        // Extents may mention scalars that no expression reads; number them last.
        let mut k = 0;
        while k < order.len() {
            if let ValKind::Tensor(t) = &self.vals[order[k].index()].kind {
                for d in &t.domain {
                    d.extent
                        .for_each_val(&mut |v| number(v, &mut map, &mut order));
                }
            }
            k += 1;
        }
        let remap = |v: ValId| ValId::new(map.get(v.index()).copied().unwrap_or(UNSET));
        let vals = order
            .iter()
            .map(|&v| {
                let mut val = self.vals[v.index()].clone();
                if let ValKind::Tensor(t) = &mut val.kind {
                    for d in &mut t.domain {
                        d.extent = d.extent.remap(&remap);
                    }
                }
                val
            })
            .collect();
        let exprs = self
            .exprs
            .iter()
            .map(|e| Expr {
                op: e.op.clone(),
                inputs: e.inputs.iter().map(|&v| remap(v)).collect(),
                outputs: e.outputs.iter().map(|&v| remap(v)).collect(),
            })
            .collect();
        Canonical {
            vals,
            exprs,
            inputs: self.inputs.iter().map(|&v| remap(v)).collect(),
            outputs: self
                .outputs
                .iter()
                .map(|o| Output {
                    val: remap(o.val),
                    alias_of: o.alias_of.map(remap),
                })
                .collect(),
            generator_draws: self.generator.map(|g| g.draws),
        }
    }

    /// A 64-bit structural hash (stable within a build of this crate).
    pub fn structural_hash(&self) -> u64 {
        let mut h = FxHasher::default();
        self.canonical().hash(&mut h);
        h.finish()
    }
}

impl PartialEq for Fusion {
    fn eq(&self, other: &Self) -> bool {
        self.exprs.len() == other.exprs.len() && self.canonical() == other.canonical()
    }
}

impl Eq for Fusion {}

impl Hash for Fusion {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical().hash(state);
    }
}
