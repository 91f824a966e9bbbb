//! The propagation primitives, as methods of [`ScheduledFusion`]: `transform_like`
//! and `parallelize_like` copy a reference tensor's loop transforms or parallel types
//! to other tensors.

use super::domain::{DomId, DomTransform, TensorDomain};
use super::{ParallelType, Primitive, SchedResult, ScheduleError, ScheduledFusion};
use crate::ir::{IterKind, ValId};

impl ScheduledFusion {
    /// Replays `reference`'s transforms (from its root) on each target's logical dims,
    /// which must match the reference's root dims in number. The target's own loop
    /// transforms are replaced; parallel types are not copied (see
    /// [`ScheduledFusion::parallelize_like`]).
    pub fn transform_like(&mut self, reference: ValId, targets: &[ValId]) -> SchedResult<()> {
        let op = "transform_like";
        let r = self.schedule.tensor(op, reference)?.domain.clone();
        for tv in self.with_siblings(targets) {
            let t = self.schedule.tensor_mut(op, tv)?;
            if t.domain.root != t.domain.logical {
                return Err(ScheduleError::Unsupported(format!(
                    "transform_like onto T{}, the result of an rfactor",
                    tv.id()
                )));
            }
            if t.domain.logical.len() != r.root.len() {
                return Err(ScheduleError::InvalidArgument {
                    op,
                    tensor: tv,
                    reason: format!(
                        "{} logical dims; expected {} to match the root dims of T{}",
                        t.domain.logical.len(),
                        r.root.len(),
                        reference.id()
                    ),
                });
            }
            // The fusion guarantees that positionally mapped iteration dims have equal
            // sizes (the builder checked broadcasting), so targets take the reference's
            // extent expressions: equal extents are then also structurally equal.
            // A broadcast dim the reference resolves takes the reference's extent too
            // and stays a broadcast (index 0, no loop of its own): merged with other
            // dims, it spans the loop the reference runs (merge(i{2}, b{1}) would
            // count 2 elements where the reference's loop counts 2N, and the loop's
            // index would be split back by the wrong extent).
            let logical: Vec<_> = t
                .domain
                .logical
                .iter()
                .zip(&r.root)
                .map(|(&l, &rr)| {
                    let mut d = t.domain.dom(l).clone();
                    let rd = r.dom(rr);
                    if rd.kind != IterKind::Broadcast {
                        d.extent = rd.extent.clone();
                    }
                    d
                })
                .collect();
            let mut nd = TensorDomain::from_logical(&[]);
            nd.doms = logical;
            nd.root = (0..nd.doms.len() as u32).map(DomId).collect();
            nd.logical = nd.root.clone();
            nd.loop_dims = nd.root.clone();
            let mut map = std::collections::HashMap::new();
            for (i, &rr) in r.root.iter().enumerate() {
                map.insert(rr, nd.root[i]);
            }
            for tr in &r.transforms {
                match tr {
                    DomTransform::Split {
                        input,
                        outer,
                        inner,
                        factor,
                        inner_split,
                    } => {
                        let Some(&m) = map.get(input) else { continue };
                        let axis = nd.loop_dims.iter().position(|&l| l == m).unwrap_or(0);
                        let (o, i) = nd.split(axis, factor.clone(), *inner_split);
                        map.insert(*outer, o);
                        map.insert(*inner, i);
                    }
                    DomTransform::Merge { outer, inner, out } => {
                        let (Some(&a), Some(&b)) = (map.get(outer), map.get(inner)) else {
                            continue;
                        };
                        let pa = nd.loop_dims.iter().position(|&l| l == a);
                        let pb = nd.loop_dims.iter().position(|&l| l == b);
                        let (Some(pa), Some(pb)) = (pa, pb) else {
                            continue;
                        };
                        // Bring b right after a, then merge.
                        let mut order: Vec<i64> = (0..nd.loop_dims.len() as i64)
                            .filter(|&x| x != pb as i64)
                            .collect();
                        let at = order.iter().position(|&x| x == pa as i64).unwrap_or(0);
                        order.insert(at + 1, pb as i64);
                        nd.reorder(tv, &order)?;
                        let axis = nd.loop_dims.iter().position(|&l| l == a).unwrap_or(0);
                        let m = nd.merge(tv, axis)?;
                        map.insert(*out, m);
                    }
                }
            }
            let mut order = Vec::new();
            for l in &r.loop_dims {
                if let Some(&m) = map.get(l) {
                    if let Some(p) = nd.loop_dims.iter().position(|&x| x == m) {
                        order.push(p as i64);
                    }
                }
            }
            if order.len() == nd.loop_dims.len() {
                nd.reorder(tv, &order)?;
            }
            t.domain = nd;
        }
        self.schedule.history.push(Primitive::TransformLike {
            reference,
            targets: targets.to_vec(),
        });
        Ok(())
    }

    /// Copies `reference`'s parallel types (except vectorize) to each target's loop dims,
    /// position by position, where the extents agree (broadcast dims of a target take
    /// any extent).
    pub fn parallelize_like(&mut self, reference: ValId, targets: &[ValId]) -> SchedResult<()> {
        let op = "parallelize_like";
        let r = self.schedule.tensor(op, reference)?.domain.clone();
        for tv in self.with_siblings(targets) {
            let t = &mut self.schedule.tensor_mut(op, tv)?.domain;
            for (i, &rl) in r.loop_dims.iter().enumerate() {
                let Some(&tl) = t.loop_dims.get(i) else { break };
                let rd = r.dom(rl);
                if rd.parallel == ParallelType::Vectorize {
                    continue;
                }
                let td = t.dom(tl).clone();
                if td.extent == rd.extent || td.kind == IterKind::Broadcast {
                    t.dom_mut(tl).parallel = rd.parallel;
                }
            }
        }
        self.schedule.history.push(Primitive::ParallelizeLike {
            reference,
            targets: targets.to_vec(),
        });
        Ok(())
    }
}
