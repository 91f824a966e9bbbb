//! Transpose: `permute` of a 2-D input that moves its innermost dim, followed by
//! pointwise math on the permuted value.
//!
//! Read along the input's innermost dim and written along the output's, through a
//! shared-memory tile: the input is copied tile by tile into shared memory
//! (`cache_after` + `set_memory_type(Shared)`) by threads laid out along the input's
//! rows, and the permute reads the tile back by threads laid out along the output's
//! rows. Both loop nests bind the same tile coordinates to `blockIdx.x` (the input's
//! row tiles) and `blockIdx.y` (its column tiles), so a block reads exactly the tile it
//! writes; `__syncthreads()` separates the two.

use super::pointwise::index_type;
use super::{ceil_div, Plan};
use crate::ir::{Fusion, Op, ValId};
use crate::sched::{MemoryType, ParallelType, ScheduleError, ScheduledFusion};
use crate::scheduler::analysis::is_pointwise;
use crate::scheduler::info::RuntimeInfo;
use crate::scheduler::params::{CompileParams, LaunchParams, TransposeParams};
use crate::scheduler::unfit::{Takes, Unfit};

pub(crate) struct TransposePlan {
    pub fusion: Fusion,
    /// The transposed input.
    pub input: ValId,
    pub output: ValId,
}

pub(crate) fn plan(fusion: &Fusion) -> Plan<TransposePlan> {
    super::check_fusion(fusion)?;
    if fusion.outputs().len() != 1 {
        return Err(Unfit::SeveralOutputs);
    }
    let output = fusion.outputs()[0].val;
    if fusion.outputs()[0].alias_of.is_some() {
        return Err(Unfit::InPlaceOutput { value: output });
    }
    let live = fusion.live_exprs();
    let mut permute = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        match &e.op {
            Op::Permute { perm } => {
                if permute.is_some() {
                    return Err(Unfit::SeveralPermutes);
                }
                let x = e.inputs[0];
                if fusion.input_position(x).is_none() {
                    return Err(Unfit::PermuteOfComputed);
                }
                let rank = fusion.tensor_type(x).map_or(0, |t| t.rank());
                if rank != 2 || perm.as_slice() != [1, 0] {
                    return Err(Unfit::PermuteShape {
                        perm: perm.to_vec(),
                        rank,
                    });
                }
                if fusion
                    .tensor_type(x)
                    .is_some_and(|t| t.shape().any(|d| d.is_broadcast_like()))
                {
                    return Err(Unfit::BroadcastTranspose);
                }
                permute = Some(x);
            }
            op if is_pointwise(op)
                && !matches!(
                    op,
                    Op::Broadcast { .. } | Op::Expand { .. } | Op::SegmentSet
                ) =>
            {
                // Only math on the permuted value: every tensor operand must come from
                // the permute (checked below through ranks and the single input).
            }
            other => {
                return Err(Unfit::Op {
                    op: other.name().into(),
                    takes: Takes::PermuteThenPointwise,
                })
            }
        }
    }
    let Some(input) = permute else {
        return Err(Unfit::NoPermute);
    };
    // Every other tensor input would be read untransposed: not handled.
    for &i in fusion.inputs() {
        if i != input && fusion.val(i).is_tensor() {
            return Err(Unfit::OtherInput { input: i });
        }
    }
    Ok(TransposePlan {
        fusion: fusion.clone(),
        input,
        output,
    })
}

pub(crate) fn heuristics(p: &TransposePlan, info: &RuntimeInfo) -> Plan<TransposeParams> {
    let t = info.tensor(&p.fusion, p.input).ok_or(Unfit::Unbound)?;
    if t.strides.get(1) != Some(&1) {
        return Err(Unfit::StridedTransposeInput);
    }
    let (a, b) = (t.sizes[0], t.sizes[1]);
    // 64 × 64 tiles with 4 rows of 64 threads: 3998 GB/s on an H200 for [8192, 8192]
    // f32 (32 × 32 tiles with 8 rows: 3718).
    let (tile, threads_y) = if a >= 64 && b >= 64 { (64, 4) } else { (32, 8) };
    Ok(TransposeParams {
        tile,
        threads_y,
        launch: LaunchParams {
            grid: [ceil_div(a, tile).max(1), ceil_div(b, tile).max(1), 1],
            block: [tile, threads_y, 1],
        },
        compile: CompileParams {
            index_type: index_type(&p.fusion, info),
            min_blocks_per_sm: None,
        },
    })
}

pub(crate) fn schedule(
    p: &TransposePlan,
    params: &TransposeParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let mut s = ScheduledFusion::new(p.fusion.clone())?;
    let (t, ty) = (params.tile, params.threads_y);
    let xs = s.cache_after(p.input)?;
    s.set_memory_type(xs, MemoryType::Shared)?;
    // Input tile: [A, B] -> [A/t, B/t, t(a) -> (t/ty, ty), t(b)].
    s.split(xs, 0, t)?;
    s.split(xs, 2, t)?;
    s.reorder(xs, &[0, 2, 1, 3])?;
    s.split(xs, 2, ty)?;
    s.parallelize(xs, 0, ParallelType::BIDx)?;
    s.parallelize(xs, 1, ParallelType::BIDy)?;
    s.parallelize(xs, 3, ParallelType::TIDy)?;
    s.parallelize(xs, 4, ParallelType::TIDx)?;
    // Output tile: [B, A] -> [B/t, A/t, t(b) -> (t/ty, ty), t(a)].
    let z = p.output;
    s.split(z, 0, t)?;
    s.split(z, 2, t)?;
    s.reorder(z, &[0, 2, 1, 3])?;
    s.split(z, 2, ty)?;
    s.parallelize(z, 0, ParallelType::BIDy)?;
    s.parallelize(z, 1, ParallelType::BIDx)?;
    s.parallelize(z, 3, ParallelType::TIDy)?;
    s.parallelize(z, 4, ParallelType::TIDx)?;
    let others: Vec<ValId> = s
        .schedule()
        .tensors
        .keys()
        .copied()
        .filter(|&v| v != z && v != xs && !s.schedule().is_input(v))
        .collect();
    if !others.is_empty() {
        s.transform_like(z, &others)?;
        s.parallelize_like(z, &others)?;
    }
    s.inline_most()?;
    Ok(s)
}
