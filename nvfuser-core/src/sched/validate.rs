//! Schedule validation: every rule that makes a schedule impossible to lower correctly.
//!
//! Rules, each with its own [`ScheduleError`] variant:
//! - a parallel type appears at most once per tensor ([`ScheduleError::DuplicateParallelType`]);
//! - each grid/block type has one extent in the kernel ([`ScheduleError::ParallelTypeConflict`]);
//! - vectorize: innermost loop dim, split from the innermost logical dim
//!   ([`ScheduleError::VectorizeNotInnermost`]), a constant power-of-two width of at most
//!   16 bytes ([`ScheduleError::VectorizeWidth`]), a copy, a broadcast or squeeze that
//!   keeps the innermost dim, a permute that keeps it innermost, a slice whose
//!   innermost range has step 1 and a start the width divides, or an innermost cat of
//!   inputs and such slices whose piece offsets the width divides, or an index_select
//!   along an outer dim ([`ScheduleError::VectorizeNotCopy`])
//!   from/to a contiguous global tensor ([`ScheduleError::VectorizeNotContiguous`]) whose
//!   static innermost extent the width divides ([`ScheduleError::VectorizeNotDivisible`]);
//! - compute-at: never past a reduction dim of the producer
//!   ([`ScheduleError::InlinePastReduction`]), shared dims agree in extent and parallel
//!   type ([`ScheduleError::ComputeAtMismatch`]);
//! - reduction dims are reduced serially, over `threadIdx.x` (a block reduction, a warp
//!   multiple wide: [`ScheduleError::BlockReduceWidth`]) or over block indices (a grid
//!   reduction, whose iteration dims must all be bound to thread or block indices);
//!   anything else is [`ScheduleError::ReductionParallel`];
//! - register producers and their consumers agree on thread binding
//!   ([`ScheduleError::ThreadMismatch`]), shared-memory producers and their consumers on
//!   block binding ([`ScheduleError::BlockMismatch`]);
//! - register and shared buffers have constant sizes
//!   ([`ScheduleError::SymbolicAllocation`]), and shared tensors fit the 48 KiB of static
//!   shared memory of a block ([`ScheduleError::SharedMemoryTooLarge`]);
//! - the outputs of a multi-output expression share one loop domain
//!   ([`ScheduleError::SiblingMismatch`]);
//! - resize and indexing ops (slice, pad, cat, reshape, select, index_select, gather,
//!   take_along_axis) read their tensor inputs from global or shared memory
//!   ([`ScheduleError::ResizeInputInRegisters`]), or from tensors recomputed at each
//!   use, which only resize ops read and which read only global or shared tensors
//!   (`recompute::check_recomputed`).

use std::collections::BTreeMap;

use super::recompute::{check_recomputed, is_resize};
use super::{
    ComputeAt, MemoryType, ParallelType, SExpr, SchedResult, Schedule, ScheduleError,
    ScheduledFusion,
};
use crate::ir::{Extent, IterKind, Op, ValId};

/// Static shared memory one block can address (bytes).
pub const STATIC_SHARED_LIMIT: i64 = 48 * 1024;

/// Checks a compute-at of `producer` against its consumer.
pub(crate) fn check_compute_at(s: &Schedule, producer: ValId, ca: ComputeAt) -> SchedResult<()> {
    let p = &s.tensor("compute_at", producer)?.domain;
    let c = &s.tensor("compute_at", ca.consumer)?.domain;
    let max = p.loop_dims.len().min(c.loop_dims.len());
    if ca.pos > max {
        return Err(ScheduleError::AxisOutOfRange {
            op: "compute_at",
            tensor: producer,
            axis: ca.pos as i64,
            rank: max,
        });
    }
    if let Some(limit) = scan_thread_loop(s, producer) {
        if ca.pos > limit {
            return Err(ScheduleError::ComputeAtMismatch {
                producer,
                consumer: ca.consumer,
                pos: ca.pos,
                axis: limit,
                reason: "a block scan's values are final only after its threadIdx.x loop".into(),
            });
        }
    }
    for i in 0..ca.pos {
        let (pd, cd) = (p.loop_dom(i), c.loop_dom(i));
        if pd.kind == IterKind::Reduction {
            return Err(ScheduleError::InlinePastReduction {
                tensor: producer,
                pos: ca.pos,
                axis: i,
            });
        }
        let mismatch = |reason: String| ScheduleError::ComputeAtMismatch {
            producer,
            consumer: ca.consumer,
            pos: ca.pos,
            axis: i,
            reason,
        };
        if pd.parallel == ParallelType::Vectorize || cd.parallel == ParallelType::Vectorize {
            return Err(mismatch("a vectorized dim cannot be shared".into()));
        }
        if pd.kind == IterKind::Broadcast {
            continue;
        }
        if pd.extent != cd.extent {
            return Err(mismatch(format!("extent {} vs {}", pd.extent, cd.extent)));
        }
        if pd.parallel != cd.parallel {
            return Err(mismatch(format!(
                "parallel type {:?} vs {:?}",
                pd.parallel, cd.parallel
            )));
        }
    }
    Ok(())
}

/// The loop position of the `threadIdx.x` dim of a scan's scanned dim, when `tv` is a
/// block scan: its consumers share at most the loops before it.
fn scan_thread_loop(s: &Schedule, tv: ValId) -> Option<usize> {
    let e = &s.exprs[s.definition(tv)?];
    let crate::ir::Op::Scan { axis, .. } = e.op else {
        return None;
    };
    let d = &s.tensors.get(&tv)?.domain;
    let root = *d.logical.get(axis)?;
    if d.dom(root).kind == IterKind::Broadcast {
        return None;
    }
    let leaves = d.split_leaves(root)?;
    d.loop_dims
        .iter()
        .position(|l| leaves.contains(l) && d.dom(*l).parallel == ParallelType::TIDx)
}

/// Checks every rule listed in the module documentation.
pub fn validate(sf: &ScheduledFusion) -> SchedResult<()> {
    let s = sf.schedule();
    let mut bound: BTreeMap<ParallelType, (ValId, Extent)> = BTreeMap::new();
    let mut shared: Vec<(ValId, i64)> = Vec::new();
    for (&tv, t) in &s.tensors {
        if s.is_input(tv) {
            continue;
        }
        if s.is_output(tv) && t.memory != MemoryType::Global {
            return Err(ScheduleError::MemoryType {
                tensor: tv,
                found: t.memory,
                reason: "fusion outputs live in global memory",
            });
        }
        let d = &t.domain;
        let mut seen: BTreeMap<ParallelType, usize> = BTreeMap::new();
        for (axis, &l) in d.loop_dims.iter().enumerate() {
            let dom = d.dom(l);
            let pt = dom.parallel;
            if pt == ParallelType::Serial {
                continue;
            }
            if pt != ParallelType::Unroll {
                if let Some(first) = seen.insert(pt, axis) {
                    return Err(ScheduleError::DuplicateParallelType {
                        tensor: tv,
                        ptype: pt,
                        first,
                        second: axis,
                    });
                }
            }
            if pt.is_thread() && dom.kind != IterKind::Broadcast {
                match bound.get(&pt) {
                    Some((first, e)) if *e != dom.extent => {
                        return Err(ScheduleError::ParallelTypeConflict {
                            ptype: pt,
                            first: *first,
                            first_extent: e.clone(),
                            second: tv,
                            second_extent: dom.extent.clone(),
                        })
                    }
                    Some(_) => {}
                    None => {
                        bound.insert(pt, (tv, dom.extent.clone()));
                    }
                }
            }
            if dom.kind == IterKind::Reduction {
                check_reduction_dim(tv, axis, pt, &dom.extent, d)?;
                // A grouped reduction (kept across another tensor's loops,
                // `compute_with`) reduces its whole register array over the grid at
                // once, serial iteration dims included.
                if pt.is_bid() && !is_grouped(s, tv, t) {
                    check_grid_reduction(tv, axis, d)?;
                }
            }
            if pt == ParallelType::Vectorize {
                check_vectorize(s, tv, axis)?;
            }
        }
        check_reduction_order(s, tv, t)?;
        if let Some(ca) = t.compute_at {
            check_compute_at(s, tv, ca)?;
        }
        if let Some(cw) = t.compute_with {
            check_compute_with(s, tv, cw)?;
        }
        if t.memory == MemoryType::Local {
            check_thread_binding(s, tv)?;
        }
        if t.memory == MemoryType::Shared {
            check_block_binding(s, tv)?;
        }
        if t.memory != MemoryType::Global {
            let bytes = t.alloc_bytes(tv)?;
            if t.memory == MemoryType::Shared {
                shared.push((tv, bytes));
            }
        }
    }
    let total: i64 = shared.iter().map(|(_, b)| b).sum();
    if total > STATIC_SHARED_LIMIT {
        return Err(ScheduleError::SharedMemoryTooLarge {
            bytes: total,
            limit: STATIC_SHARED_LIMIT,
            detail: shared
                .iter()
                .map(|(tv, b)| format!("T{}: {b}", tv.id()))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    check_recomputed(s)?;
    for e in &s.exprs {
        check_siblings(s, e)?;
        if is_resize(&e.op) {
            for &p in &e.inputs {
                if s.tensors
                    .get(&p)
                    .is_some_and(|t| t.memory == MemoryType::Local)
                {
                    return Err(ScheduleError::ResizeInputInRegisters {
                        op: e.op.name(),
                        producer: p,
                        consumer: e.output,
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_siblings(s: &Schedule, e: &super::SExpr) -> SchedResult<()> {
    let first = &s.tensor("validate", e.output)?.domain;
    for &sib in &e.siblings {
        let other = &s.tensor("validate", sib)?.domain;
        let mismatch = |axis: usize, reason: String| ScheduleError::SiblingMismatch {
            op: e.op.name(),
            first: e.output,
            second: sib,
            axis,
            reason,
        };
        if first.loop_dims.len() != other.loop_dims.len() {
            return Err(mismatch(
                first.loop_dims.len().min(other.loop_dims.len()),
                format!(
                    "{} vs {} loop dims",
                    first.loop_dims.len(),
                    other.loop_dims.len()
                ),
            ));
        }
        for i in 0..first.loop_dims.len() {
            let (a, b) = (first.loop_dom(i), other.loop_dom(i));
            if a.extent != b.extent || a.parallel != b.parallel || a.kind != b.kind {
                return Err(mismatch(
                    i,
                    format!(
                        "{:?} {:?} {} vs {:?} {:?} {}",
                        a.kind, a.parallel, a.extent, b.kind, b.parallel, b.extent
                    ),
                ));
            }
        }
        let (ca, cb) = (s.tensors[&e.output].compute_at, s.tensors[&sib].compute_at);
        if ca.map(|c| c.pos) != cb.map(|c| c.pos) {
            return Err(mismatch(
                0,
                format!("computed at position {ca:?} vs {cb:?}"),
            ));
        }
    }
    Ok(())
}

/// A grid reduction combines one partial per block; every iteration dim of the tensor
/// must be bound to a thread or block index so that a block holds whole partials.
fn check_grid_reduction(tv: ValId, axis: usize, d: &super::TensorDomain) -> SchedResult<()> {
    let serial_iter = d.loop_dims.iter().any(|&l| {
        let x = d.dom(l);
        x.kind == IterKind::Iteration && !x.parallel.is_thread() && x.extent != Extent::Const(1)
    });
    if serial_iter {
        return Err(ScheduleError::ReductionParallel {
            tensor: tv,
            axis,
            ptype: d.loop_dom(axis).parallel,
            reason: "a grid reduction needs every iteration dim bound to a thread or block index",
        });
    }
    Ok(())
}

/// A shared-memory tensor split over a block index can only be read by consumers split
/// over the same block index.
fn check_block_binding(s: &Schedule, tv: ValId) -> SchedResult<()> {
    let d = &s.tensors[&tv].domain;
    for &l in &d.loop_dims {
        let dom = d.dom(l);
        if !dom.parallel.is_bid() || dom.kind != IterKind::Iteration {
            continue;
        }
        for u in s.uses(tv) {
            let c = s.exprs[u].output;
            let cd = &s.tensors[&c].domain;
            let has = cd
                .loop_dims
                .iter()
                .any(|&x| cd.dom(x).parallel == dom.parallel);
            if !has {
                return Err(ScheduleError::BlockMismatch {
                    producer: tv,
                    consumer: c,
                    ptype: dom.parallel,
                });
            }
        }
    }
    Ok(())
}

fn check_reduction_dim(
    tv: ValId,
    axis: usize,
    pt: ParallelType,
    extent: &Extent,
    d: &super::TensorDomain,
) -> SchedResult<()> {
    let reason = match pt {
        ParallelType::TIDy => {
            let x_too = d.loop_dims.iter().any(|&l| {
                let x = d.dom(l);
                x.kind == IterKind::Reduction && x.parallel == ParallelType::TIDx
            });
            match extent.as_const() {
                _ if x_too => "a tensor is block-reduced over one thread dim (threadIdx.x or threadIdx.y), not both",
                Some(c) if c > 0 && c <= 1024 && (c as u64).is_power_of_two() => return Ok(()),
                _ => "a block reduction over threadIdx.y needs a constant power-of-two extent of at most 1024",
            }
        }
        ParallelType::TIDz => {
            "block reductions run over threadIdx.x or threadIdx.y (threadIdx.z may index rows)"
        }
        ParallelType::Vectorize => "reduction dims cannot be vectorized",
        ParallelType::TIDx => {
            if let Some(c) = extent.as_const() {
                if c % 32 != 0 {
                    return Err(ScheduleError::BlockReduceWidth {
                        tensor: tv,
                        extent: c,
                    });
                }
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    Err(ScheduleError::ReductionParallel {
        tensor: tv,
        axis,
        ptype: pt,
        reason,
    })
}

/// Serial reduction loops must be inside every serial iteration loop of the tensor.
/// A serial reduction loop has no iteration loop inside it, except in a register
/// tensor that runs its reduction loops in another tensor's loops (`compute_with`, a
/// column sum inside a row loop): its accumulator then holds one element per inner
/// iteration, initialized before the reduction loop and combined after it. Welford
/// accumulators stay scalar.
fn check_reduction_order(s: &Schedule, tv: ValId, t: &super::TensorSchedule) -> SchedResult<()> {
    let d = &t.domain;
    let grouped = is_grouped(s, tv, t);
    let mut seen_red = false;
    for (axis, &l) in d.loop_dims.iter().enumerate() {
        let dom = d.dom(l);
        if dom.parallel.is_thread() || dom.extent.as_const() == Some(1) {
            continue;
        }
        match dom.kind {
            IterKind::Reduction => seen_red = true,
            IterKind::Iteration | IterKind::Expanded if seen_red && !grouped => {
                return Err(ScheduleError::InvalidArgument {
                    op: "validate",
                    tensor: tv,
                    reason: format!(
                        "loop axis {axis} is an iteration loop inside a serial reduction loop; reorder the reduction loops innermost"
                    ),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

/// A *grouped* reduction: a register tensor (not of the Welford family) that holds one
/// accumulator per element of its loops inside its reduction loop, combined over the
/// block and the grid at once. Either its loops run in another tensor's (`compute_with`:
/// a column sum inside a row loop, reduced over the grid by `nvf_grid_allreduce_group`),
/// or it has serial iteration loops, all of them inside its first serial reduction loop
/// (a thread's vector of columns in an outer reduction, reduced over the grid by
/// `nvf_grid_reduce_group`). Serial iteration dims inside its reduction loops and beside
/// its grid dims are then allowed.
pub(crate) fn is_grouped(s: &Schedule, tv: ValId, t: &super::TensorSchedule) -> bool {
    let welford = s.definition(tv).is_some_and(|e| {
        matches!(
            s.exprs[e].op,
            Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. }
        )
    });
    if t.memory != MemoryType::Local || welford {
        return false;
    }
    t.compute_with.is_some() || iteration_inside_reduction(&t.domain)
}

/// Whether `d` has a serial reduction loop and serial iteration loops, each of them
/// inside the first serial reduction loop.
fn iteration_inside_reduction(d: &super::TensorDomain) -> bool {
    let serial = |l: super::DomId| {
        let x = d.dom(l);
        !x.parallel.is_thread() && x.extent != Extent::Const(1)
    };
    let first_red = d
        .loop_dims
        .iter()
        .position(|&l| serial(l) && d.dom(l).kind == IterKind::Reduction);
    let Some(first_red) = first_red else {
        return false;
    };
    let mut inner = false;
    for (i, &l) in d.loop_dims.iter().enumerate() {
        if serial(l) && matches!(d.dom(l).kind, IterKind::Iteration | IterKind::Expanded) {
            if i < first_red {
                return false;
            }
            inner = true;
        }
    }
    inner
}

/// `tensor` runs its first `cw.pos` loops in those of `cw.consumer` (see
/// `ScheduledFusion::compute_with`): the dims agree in extent and parallel type, none is
/// vectorized, and `cw.consumer` is not computed from `tensor` (its loops would then
/// read a value before it is complete).
pub(crate) fn check_compute_with(s: &Schedule, tensor: ValId, cw: ComputeAt) -> SchedResult<()> {
    let op = "compute_with";
    let p = &s.tensor(op, tensor)?.domain;
    let c = &s.tensor(op, cw.consumer)?.domain;
    let max = p.loop_dims.len().min(c.loop_dims.len());
    if cw.pos > max {
        return Err(ScheduleError::AxisOutOfRange {
            op,
            tensor,
            axis: cw.pos as i64,
            rank: max,
        });
    }
    let mismatch = |axis: usize, reason: String| ScheduleError::ComputeAtMismatch {
        producer: tensor,
        consumer: cw.consumer,
        pos: cw.pos,
        axis,
        reason,
    };
    for i in 0..cw.pos {
        let (a, b) = (p.loop_dom(i), c.loop_dom(i));
        if a.parallel == ParallelType::Vectorize || b.parallel == ParallelType::Vectorize {
            return Err(mismatch(i, "a vectorized dim cannot be shared".into()));
        }
        if a.extent != b.extent {
            return Err(mismatch(i, format!("extent {} vs {}", a.extent, b.extent)));
        }
        if a.parallel != b.parallel {
            return Err(mismatch(
                i,
                format!("parallel type {:?} vs {:?}", a.parallel, b.parallel),
            ));
        }
    }
    // The loops of `cw.consumer` must not be `tensor`'s own (through the compute-at and
    // compute-with positions of the tensors it is computed in): the nest would contain
    // itself.
    for i in 0..cw.pos {
        let mut owner = cw.consumer;
        for _ in 0..=s.tensors.len() {
            if owner == tensor {
                return Err(mismatch(
                    i,
                    format!("the loop is T{}'s own (a compute-with cycle)", tensor.id()),
                ));
            }
            let t = &s.tensors[&owner];
            owner = match (t.compute_at, t.compute_with) {
                (Some(ca), _) if i < ca.pos => ca.consumer,
                (_, Some(cw)) if i < cw.pos => cw.consumer,
                _ => break,
            };
        }
    }
    // `cw.consumer` must not be computed from `tensor`.
    let mut stack = vec![tensor];
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if v == cw.consumer {
            return Err(mismatch(
                0,
                format!("T{} is computed from T{}", cw.consumer.id(), tensor.id()),
            ));
        }
        for u in s.uses(v) {
            for o in s.exprs[u].outputs() {
                if seen.insert(o) {
                    stack.push(o);
                }
            }
        }
    }
    Ok(())
}

fn check_vectorize(s: &Schedule, tv: ValId, axis: usize) -> SchedResult<()> {
    let t = &s.tensors[&tv];
    let d = &t.domain;
    if axis + 1 != d.loop_dims.len() {
        return Err(ScheduleError::VectorizeNotInnermost {
            tensor: tv,
            axis,
            expected: "the innermost loop dim",
        });
    }
    let id = d.loop_dims[axis];
    if !d.is_innermost_of_logical(id) {
        return Err(ScheduleError::VectorizeNotInnermost {
            tensor: tv,
            axis,
            expected: "the innermost logical dim or an inner split of it",
        });
    }
    let bytes = t.dtype.size_bytes();
    let width = d.dom(id).extent.as_const();
    match width {
        Some(w) if w >= 1 && (w as u64).is_power_of_two() && w as usize * bytes <= 16 => {}
        _ => {
            return Err(ScheduleError::VectorizeWidth {
                tensor: tv,
                width: width.unwrap_or(0),
                elem_bytes: bytes,
            })
        }
    }
    let w = width.unwrap_or(1);
    let Some(def) = s.definition(tv) else {
        return Err(ScheduleError::VectorizeNotCopy {
            tensor: tv,
            found: "a fusion input".into(),
        });
    };
    let e = &s.exprs[def];
    // A copy, or a broadcast that keeps the innermost dim (a `[H]` weight read as
    // `[1, H]`: the vector copies contiguous elements of the input's innermost dim).
    let copy = match &e.op {
        Op::Set => true,
        Op::Broadcast { mask } => mask.last() == Some(&false),
        // A squeeze that keeps the innermost dim (a `[N, 1, H]` input read as `[N, H]`).
        Op::Squeeze { axes } => s
            .tensor("vectorize", e.inputs[0])
            .is_ok_and(|p| !axes.contains(&p.contiguity.len().saturating_sub(1))),
        // A slice whose innermost range is contiguous and starts at a multiple of the
        // width (each vector is a contiguous, aligned run of the input's row).
        Op::Slice { ranges } => ranges.last().is_some_and(|r| {
            r.step == 1 && matches!(r.start, crate::ir::SizeArg::Const(c) if c >= 0 && c % w == 0)
        }),
        // A permute that keeps the innermost dim innermost (a head split: each vector
        // is a contiguous run of one row of the input).
        Op::Permute { perm } => perm.last().is_some_and(|&l| l + 1 == perm.len()),
        // A cat along the innermost dim of inputs and slices of them, each piece's
        // offset and slice start a multiple of the width (each vector lies in one piece,
        // a contiguous and aligned run of one input's row).
        Op::Cat { axis } => *axis + 1 == t.contiguity.len() && cat_vector_ok(s, e, *axis, w),
        // An index_select along an outer dim: each vector is a contiguous run of the
        // selected row.
        Op::IndexSelect { axis } => *axis + 1 < t.contiguity.len(),
        _ => false,
    };
    if !copy {
        return Err(ScheduleError::VectorizeNotCopy {
            tensor: tv,
            found: e.op.name().to_string(),
        });
    }
    let globals: Vec<ValId> = match e.op {
        Op::Cat { .. } => e
            .inputs
            .iter()
            .map(|&i| s.recomputed(i).map_or(i, |r| r.inputs[0]))
            .chain(std::iter::once(tv))
            .collect(),
        _ => vec![e.inputs[0], tv],
    };
    for g in globals {
        let gt = s.tensor("vectorize", g)?;
        if gt.memory != MemoryType::Global {
            continue;
        }
        let rank = gt.contiguity.len();
        let last = rank.checked_sub(1);
        let ok = last.is_some_and(|l| gt.contiguity[l] == Some(true) && gt.stride_order[l] == 0);
        if !ok {
            return Err(ScheduleError::VectorizeNotContiguous {
                tensor: tv,
                global: g,
            });
        }
        let inner = gt
            .domain
            .logical
            .iter()
            .map(|&l| gt.domain.dom(l))
            .rfind(|x| x.kind != IterKind::Reduction)
            .map(|x| x.extent.clone());
        if let Some(ext) = inner {
            if let Some(c) = ext.as_const() {
                if c % w != 0 {
                    return Err(ScheduleError::VectorizeNotDivisible {
                        tensor: tv,
                        extent: ext,
                        width: w,
                    });
                }
            }
        }
    }
    Ok(())
}

/// True when each piece of cat `e` (along the innermost `axis`) is a fusion input or a
/// recomputed slice of one with step 1 and constant bounds along the axis (the input's
/// extent there constant too), and every piece's offset and slice start is a multiple
/// of `w`.
fn cat_vector_ok(s: &Schedule, e: &SExpr, axis: usize, w: i64) -> bool {
    let const_extent = |t: ValId| -> Option<i64> {
        let ts = s.tensors.get(&t)?;
        let d = &ts.domain;
        let dims: Vec<_> = d
            .logical
            .iter()
            .filter(|&&l| d.dom(l).kind != IterKind::Reduction)
            .collect();
        d.dom(**dims.get(axis)?).extent.as_const()
    };
    let mut offset = 0i64;
    for &p in &e.inputs {
        let (start, len) = match s.recomputed(p) {
            None => (0, const_extent(p)),
            Some(r) => {
                let Op::Slice { ranges } = &r.op else {
                    return false;
                };
                let (Some(rg), Some(size)) = (ranges.get(axis), const_extent(r.inputs[0])) else {
                    return false;
                };
                let bound = |a: crate::ir::SizeArg| match a {
                    crate::ir::SizeArg::Const(c) if c < 0 => Some((size + c).max(0)),
                    crate::ir::SizeArg::Const(c) => Some(c.min(size)),
                    crate::ir::SizeArg::Input(_) => None,
                };
                match (rg.step, bound(rg.start), bound(rg.stop)) {
                    (1, Some(a), Some(b)) => (a, Some((b - a).max(0))),
                    _ => return false,
                }
            }
        };
        let Some(len) = len else {
            return false;
        };
        if start % w != 0 || offset % w != 0 {
            return false;
        }
        offset += len;
    }
    true
}

/// A register tensor split over a thread dim can only be read by consumers split over
/// the same thread dim (or by a reduction over it).
fn check_thread_binding(s: &Schedule, tv: ValId) -> SchedResult<()> {
    let d = &s.tensors[&tv].domain;
    for &l in &d.loop_dims {
        let dom = d.dom(l);
        if !dom.parallel.is_tid() || dom.kind != IterKind::Iteration {
            continue;
        }
        for u in s.uses(tv) {
            let c = s.exprs[u].output;
            let cd = &s.tensors[&c].domain;
            let has = cd.loop_dims.iter().any(|&x| {
                cd.dom(x).parallel == dom.parallel && cd.dom(x).kind != IterKind::Broadcast
            });
            if !has {
                return Err(ScheduleError::ThreadMismatch {
                    producer: tv,
                    consumer: c,
                    ptype: dom.parallel,
                });
            }
        }
    }
    Ok(())
}
