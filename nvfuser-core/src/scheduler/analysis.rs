//! Checks shared by both default schedules: which ops, outputs and values they accept.

use super::unfit::Unfit;
use super::{not_supported, DefaultScheduleError};
use crate::ir::{Fusion, Op, ReductionOp, ValKind};

/// True for the ops the pointwise schedule handles (one output element per thread,
/// positional dims).
pub(crate) fn is_pointwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::Ternary(_)
            | Op::Cast
            | Op::Set
            | Op::SegmentSet
            | Op::Broadcast { .. }
            | Op::Expand { .. }
    )
}

/// True for the creation ops (full, iota, uniform/normal): tensors made from scalars,
/// computed per output element like pointwise math (the random streams are indexed by
/// the logical position, so any schedule gives the same values).
pub(crate) fn is_creation(op: &Op) -> bool {
    op.is_creation()
}

/// True for the data-movement and indexing ops the pointwise schedule takes when they
/// read fusion inputs (global memory), as the corpus resize and indexing entries do:
/// permute, pad, cat, slice, reshape, select, index_select, gather and
/// take_along_axis. Lowering computes the input's indices from the output's (resize
/// and reshape arithmetic, or the index tensor's values), so each output element reads
/// its own source element: the input must be in global memory (a fusion input), never
/// a register value computed by another thread's loop iteration. A to-the-end slice's
/// extent is the input's size (the builder never puts `i64::MAX` in an extent), so
/// 32-bit index math holds it. The runtime values that decide where these kernels read
/// (select indices, slice bounds from scalars, reshape sizes, index tensor sizes) are
/// checked by the launcher before every launch (`nvfuser_cuda::launch`), with the CPU
/// reference's rules; index values out of range read zero in the kernel.
pub(crate) fn is_movement(op: &Op) -> bool {
    crate::sched::is_resize(op) || matches!(op, Op::Permute { .. })
}

/// True for a squeeze of a fusion input: a view of global memory, read with index 0 in
/// the removed dims (see [`super::squeeze`], which moves every squeeze it can there).
pub(crate) fn is_input_squeeze(fusion: &Fusion, e: &crate::ir::Expr) -> bool {
    matches!(e.op, Op::Squeeze { .. }) && fusion.input_position(e.inputs[0]).is_some()
}

/// The reduced axes of a reduction-like op: a sum/max/min/mean/prod reduction, or a
/// Welford-style one (var, var_mean, welford).
pub(crate) fn reduction_axes(op: &Op) -> Option<&[usize]> {
    match op {
        Op::Reduction { axes, .. }
        | Op::Var { axes, .. }
        | Op::VarMean { axes, .. }
        | Op::Welford { axes } => Some(axes),
        _ => None,
    }
}

/// True for the Welford-style reductions (var, var_mean, welford): reduced serially and
/// across the block in one step, never rfactored.
pub(crate) fn is_welford(op: &Op) -> bool {
    matches!(op, Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. })
}

/// Fusion-level conditions of every default schedule.
pub(crate) fn check_common(fusion: &Fusion) -> Result<(), DefaultScheduleError> {
    if fusion.outputs().is_empty() {
        return not_supported("a fusion without outputs");
    }
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        if !val.is_tensor() {
            return not_supported(format!("the scalar output {}", o.val));
        }
        if o.alias_of.is_some() {
            return not_supported(format!(
                "the in-place output {} (it aliases an input)",
                o.val
            ));
        }
        if fusion.input_position(o.val).is_some() {
            return not_supported(format!(
                "the output {} is an input (nothing to compute)",
                o.val
            ));
        }
    }
    let live = fusion.live_exprs();
    let moves = fusion
        .exprs()
        .any(|(id, e)| live[id.index()] && is_movement(&e.op));
    if moves && fusion.outputs().len() > 1 {
        return not_supported(
            "data-movement or indexing ops in a fusion with more than one output (outputs may differ in shape)",
        );
    }
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        if let Some(&s) = e.outputs.iter().find(|&&o| !fusion.val(o).is_tensor()) {
            return not_supported(format!(
                "the scalar expression {} defining {s} (only tensor math runs in kernels)",
                e.op.name()
            ));
        }
        match &e.op {
            op if is_pointwise(op) => {}
            Op::Reduction { op, .. } => match op {
                ReductionOp::Sum
                | ReductionOp::Max
                | ReductionOp::Min
                | ReductionOp::Mean
                | ReductionOp::Prod => {}
            },
            op if is_welford(op) => {}
            op if is_creation(op) => {}
            _ if is_input_squeeze(fusion, e) => {}
            op if is_movement(op) => {
                if let Some(&t) = e
                    .inputs
                    .iter()
                    .find(|&&i| fusion.val(i).is_tensor() && fusion.input_position(i).is_none())
                {
                    return not_supported(format!(
                        "{} of the computed value {t} (data-movement and indexing ops must read fusion inputs)",
                        e.op.name()
                    ));
                }
            }
            other => {
                return not_supported(format!(
                    "the op {} (the default schedule handles pointwise ops, broadcasts, expands, full/iota/uniform/normal, permute/pad/cat/slice/reshape/select/index_select/gather/take_along_axis of fusion inputs, sum/max/min/mean/prod reductions and var/var_mean/welford over the innermost dims)",
                    other.name()
                ))
            }
        }
    }
    Ok(())
}

/// Number of logical dims of a tensor (reduction dims included), or `None` for a
/// scalar.
pub(crate) fn logical_rank(fusion: &Fusion, v: crate::ir::ValId) -> Option<usize> {
    match &fusion.val(v).kind {
        ValKind::Tensor(t) => Some(t.domain.len()),
        ValKind::Scalar(_) => None,
    }
}

/// The classes of extents a fusion makes equal: two extents are *exactly mapped* when
/// they are the same expression or a chain of pairings that the argument checks
/// enforce before any launch ([`crate::ir::bind::check_sizes`]: the operands of one
/// elementwise op, a reduction's input and output, a broadcast's kept dims, ...) joins
/// them. A broadcast dim is paired with nothing. The tuned schedulers give every tensor
/// the loop structure of one reference, compiled (or indexed) for the reference's
/// extents; a tensor dim placed on a reference dim must be exactly mapped to it, or the
/// kernel would cover the wrong number of elements (`t1[2, 128] + sum(t0[2, 32], -1,
/// keepdim)` would write 32 of each 128-element row).
pub(crate) struct ExactExtents {
    index: rustc_hash::FxHashMap<crate::ir::Extent, usize>,
    parent: Vec<usize>,
}

impl ExactExtents {
    pub(crate) fn new(fusion: &Fusion) -> Self {
        use crate::ir::bind::{collect_ties, Rel};
        use crate::ir::IterKind;
        let mut m = ExactExtents {
            index: Default::default(),
            parent: Vec::new(),
        };
        let live = fusion.live_exprs();
        let mut ties = Vec::new();
        for (id, e) in fusion.exprs() {
            if !live[id.index()] {
                continue;
            }
            ties.clear();
            collect_ties(fusion, e, &mut ties);
            for t in ties.iter().filter(|t| t.rel == Rel::Eq) {
                let Some(dim) = e
                    .inputs
                    .get(t.operand)
                    .and_then(|&v| fusion.tensor_type(v))
                    .and_then(|tt| tt.shape().nth(t.axis))
                else {
                    continue;
                };
                if dim.kind != IterKind::Broadcast {
                    let (a, b) = (m.id(&dim.extent), m.id(&t.other));
                    let (ra, rb) = (m.find(a), m.find(b));
                    m.parent[ra] = rb;
                }
            }
        }
        m
    }

    fn id(&mut self, e: &crate::ir::Extent) -> usize {
        if let Some(&i) = self.index.get(e) {
            return i;
        }
        let i = self.parent.len();
        self.parent.push(i);
        self.index.insert(e.clone(), i);
        i
    }

    fn find(&self, mut i: usize) -> usize {
        while self.parent[i] != i {
            i = self.parent[i];
        }
        i
    }

    /// True when `a` and `b` are equal for every accepted set of arguments.
    pub(crate) fn same(&self, a: &crate::ir::Extent, b: &crate::ir::Extent) -> bool {
        if a == b {
            return true;
        }
        match (self.index.get(a), self.index.get(b)) {
            (Some(&x), Some(&y)) => self.find(x) == self.find(y),
            _ => false,
        }
    }
}

/// Checks that every non-broadcast dim of every tensor computed by `fusion`
/// (reduction dims included) is exactly mapped to the reference dim it is scheduled as:
/// a tensor of rank `full.len()` position by position against `full`, one of rank
/// `slice.len()` against `slice` (the per-row or per-column values of a reduction: the
/// reference's kept dims). `Err` names the first dim that is not.
pub(crate) fn check_exactly_mapped(
    fusion: &Fusion,
    full: &[crate::ir::Extent],
    slice: &[crate::ir::Extent],
) -> Result<(), Unfit> {
    check_exactly_mapped_except(fusion, full, slice, &[])
}

/// [`check_exactly_mapped`] for every computed tensor but those in `skip` (tensors
/// recomputed inside the resize ops that read them: they have no loops).
pub(crate) fn check_exactly_mapped_except(
    fusion: &Fusion,
    full: &[crate::ir::Extent],
    slice: &[crate::ir::Extent],
    skip: &[crate::ir::ValId],
) -> Result<(), Unfit> {
    use crate::ir::IterKind;
    let map = ExactExtents::new(fusion);
    let live = fusion.live_exprs();
    // Inputs are read by the expressions, whose pairings tie them to their outputs.
    let tensors = fusion
        .exprs()
        .filter(|(id, _)| live[id.index()])
        .flat_map(|(_, e)| e.outputs.iter().copied());
    for tv in tensors {
        let Some(t) = fusion.tensor_type(tv).filter(|_| !skip.contains(&tv)) else {
            continue;
        };
        let r = t.domain.len();
        let against = if r == full.len() {
            full
        } else if r == slice.len() {
            slice
        } else {
            continue;
        };
        for (i, (d, e)) in t.domain.iter().zip(against).enumerate() {
            if d.kind != IterKind::Broadcast && !map.same(&d.extent, e) {
                return Err(Unfit::NotExactlyMapped {
                    tensor: tv,
                    dim: i,
                    extent: d.extent.clone(),
                    reference: e.clone(),
                });
            }
        }
    }
    Ok(())
}

/// [`check_exactly_mapped`] against the domain of the first live reduction of `fusion`
/// (per-row or per-column values against its dims other than `reduced`); `Ok`
/// without a reduction. For the default reduction schedules.
pub(crate) fn check_mapped_to_reduction(fusion: &Fusion, reduced: &[usize]) -> Result<(), Unfit> {
    let live = fusion.live_exprs();
    let Some(reference) = fusion
        .exprs()
        .find(|(id, e)| live[id.index()] && reduction_axes(&e.op).is_some())
        .map(|(_, e)| e.outputs[0])
    else {
        return Ok(());
    };
    let Some(t) = fusion.tensor_type(reference) else {
        return Ok(());
    };
    let full: Vec<crate::ir::Extent> = t.domain.iter().map(|d| d.extent.clone()).collect();
    let kept: Vec<crate::ir::Extent> = full
        .iter()
        .enumerate()
        .filter(|(i, _)| !reduced.contains(i))
        .map(|(_, e)| e.clone())
        .collect();
    check_exactly_mapped(fusion, &full, &kept)
}
