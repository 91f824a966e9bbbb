//! The default pointwise schedule.
//!
//! The reference is the output with the most non-broadcast dims. Adjacent dims of the
//! reference are merged when every scheduled tensor agrees on which of them are
//! broadcast (a broadcast dim merged with an iteration dim would lose its mapping to the
//! consumer's loop). The innermost group that is not broadcast in the reference is split
//! by [`THREADS`]: the outer part is bound to `blockIdx.x`, the inner part to
//! `threadIdx.x`; remaining groups are serial loops. Every other non-input tensor takes
//! the reference's transforms and parallel types, then everything is inlined.

use super::recompute::push_broadcasts;
use super::{not_supported, DefaultScheduleError, THREADS};
use crate::ir::{Fusion, IterKind, ValId};
use crate::sched::{ParallelType, ScheduledFusion};

/// Schedules a fusion of pointwise ops (see the module documentation).
pub fn schedule(fusion: &Fusion) -> Result<ScheduledFusion, DefaultScheduleError> {
    let pushed = push_broadcasts(fusion);
    let fusion = &pushed;
    let mut s = ScheduledFusion::new(pushed.clone())?;
    let reference = fusion
        .outputs()
        .iter()
        .map(|o| o.val)
        .max_by_key(|&v| {
            // Most non-broadcast dims; the first such output on ties.
            let n = fusion.tensor_type(v).map_or(0, |t| {
                t.shape().filter(|d| d.kind != IterKind::Broadcast).count()
            });
            (n, std::cmp::Reverse(v))
        })
        .ok_or_else(|| DefaultScheduleError::NotSupported {
            reason: "a fusion without outputs".into(),
        })?;
    let kinds = |s: &ScheduledFusion, tv: ValId| -> Vec<IterKind> {
        s.schedule().tensors[&tv]
            .domain
            .logical
            .iter()
            .map(|&l| s.schedule().tensors[&tv].domain.dom(l).kind)
            .collect()
    };
    // An output with a broadcast dim where the reference iterates is stored by one
    // thread along that dim: its readers take a register copy (`cache_fork`), which
    // gets the reference's transforms like every other computed tensor.
    let ref_kinds = kinds(&s, reference);
    s.fork_read_outputs(|o| broadcast_where_not(&pushed, o, &ref_kinds))?;
    let rank = ref_kinds.len();
    let targets: Vec<ValId> = s
        .schedule()
        .tensors
        .keys()
        .copied()
        .filter(|&t| t != reference && !s.schedule().is_input(t))
        .collect();
    // Per dim: which tensors hold it as a broadcast dim.
    let mut classes: Vec<Vec<bool>> = vec![Vec::with_capacity(targets.len() + 1); rank];
    for (i, c) in classes.iter_mut().enumerate() {
        c.push(ref_kinds[i] == IterKind::Broadcast);
    }
    for &t in &targets {
        let k = kinds(&s, t);
        if k.len() != rank {
            return not_supported(format!(
                "{t} has {} dims but the output {reference} has {rank}: a value computed before a broadcast (only inputs may have fewer dims)",
                k.len()
            ));
        }
        for (i, c) in classes.iter_mut().enumerate() {
            if ref_kinds[i] == IterKind::Broadcast && k[i] != IterKind::Broadcast {
                return not_supported(format!(
                    "outputs of different shapes: dim {i} is broadcast in {reference} but not in {t}"
                ));
            }
            c.push(k[i] == IterKind::Broadcast);
        }
    }
    // Every tensor takes the reference's loops, indexed by the reference's extents: a
    // dim of another extent (an output unrelated to the reference) is not this loop.
    if let Some(t) = fusion.tensor_type(reference) {
        let all: Vec<crate::ir::Extent> = t.domain.iter().map(|d| d.extent.clone()).collect();
        super::analysis::check_exactly_mapped(fusion, &all, &[])
            .map_err(|u| u.to_string())
            .or_else(not_supported)?;
    }
    if rank > 0 {
        // Groups of adjacent dims with equal classes, as (start, len).
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for i in 0..rank {
            match groups.last_mut() {
                Some((start, len)) if classes[*start] == classes[i] => *len += 1,
                _ => groups.push((i, 1)),
            }
        }
        // Merge from the last group so earlier axes keep their positions.
        for &(start, len) in groups.iter().rev() {
            for _ in 1..len {
                s.merge(reference, start as i64)?;
            }
        }
        // Group g is now loop axis g. Split the innermost one that is not broadcast.
        if let Some(g) = (0..groups.len()).rev().find(|&g| !classes[groups[g].0][0]) {
            let g = g as i64;
            s.split(reference, g, THREADS)?;
            s.parallelize(reference, g, ParallelType::BIDx)?;
            s.parallelize(reference, g + 1, ParallelType::TIDx)?;
        }
        if !targets.is_empty() {
            s.transform_like(reference, &targets)?;
            s.parallelize_like(reference, &targets)?;
        }
    }
    s.inline_most()?;
    Ok(s)
}

/// True when `tv` has a broadcast dim where `reference` (its kinds) has another kind:
/// one thread stores that output along the dim, so other threads must not read it
/// back from global memory.
pub(crate) fn broadcast_where_not(f: &Fusion, tv: ValId, reference: &[IterKind]) -> bool {
    f.tensor_type(tv).is_some_and(|t| {
        t.shape()
            .zip(reference)
            .any(|(d, &k)| d.kind == IterKind::Broadcast && k != IterKind::Broadcast)
    })
}
