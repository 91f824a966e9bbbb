//! The tuned pointwise scheduler.
//!
//! Plan: broadcasts are pushed up to the inputs (so every computed tensor has the
//! reference output's rank), and the reference's dims are grouped: adjacent dims merge
//! when every tensor agrees on which of them are broadcast. The innermost group that is
//! not broadcast in the reference is the *inner* part; the group just outside it (if
//! any) is the *outer* part, bound to `blockIdx.x` (2-D schedule: a `[H]` bias added to
//! `[N, H]` is read once per block row instead of re-deriving `n` from a flat index);
//! groups further out are bound to `blockIdx.z` or left as serial loops.
//!
//! Schedule: inputs of full rank whose inner part is not broadcast are cached in
//! registers with vector loads (`cache_after`), outputs are written from a register
//! copy with vector stores (`cache_before`). The inner part is split into
//! `[blocks, unroll, threads, vectorize]`: `blocks` on `blockIdx.y` in the 2-D case and
//! `blockIdx.x` in the 1-D case, `unroll` an unrolled loop outside the thread dim (each
//! unrolled step of a warp reads one contiguous span), `threads` on `threadIdx.x`.

use super::{
    ceil_div, logical_kinds, mark_vector_dims, pow2_dividing, reference_output, tensor_inputs,
    vector_limit, vector_readable, Plan,
};
use crate::codegen::IndexType;
use crate::ir::{Fusion, IterKind, ValId};
use crate::sched::{
    is_recomputable, is_resize, reads_elsewhere, ParallelType, ScheduleError, ScheduledFusion,
};
use crate::scheduler::analysis::{is_creation, is_input_squeeze, is_pointwise};
use crate::scheduler::info::RuntimeInfo;
use crate::scheduler::params::{CompileParams, LaunchParams, PointwiseParams};
use crate::scheduler::recompute::{broadcast_per_reader, push_broadcasts};
use crate::scheduler::resize::recomputed_tensors;
use crate::scheduler::unfit::Unfit;

/// The fusion-level analysis.
pub(crate) struct PointwisePlan {
    /// The fusion with broadcasts pushed to the inputs (same inputs and outputs).
    pub fusion: Fusion,
    pub reference: ValId,
    /// Groups of adjacent reference dims, as (first dim, number of dims).
    pub groups: Vec<(usize, usize)>,
    /// Index into `groups` of the inner part, if the reference has a non-broadcast dim.
    pub inner: Option<usize>,
    /// Tensors computed inside the resize ops that read them (`recompute_at_use`), in
    /// topological order.
    pub recomputed: Vec<ValId>,
}

/// A fresh schedule of the plan's fusion with its recomputed tensors taken out of the
/// loop nests (consumers first).
fn new_schedule(f: &Fusion, recomputed: &[ValId]) -> Result<ScheduledFusion, ScheduleError> {
    let mut s = ScheduledFusion::new(f.clone())?;
    for &t in recomputed.iter().rev() {
        s.recompute_at_use(t)?;
    }
    Ok(s)
}

pub(crate) fn plan(fusion: &Fusion) -> Plan<PointwisePlan> {
    super::check_fusion(fusion)?;
    let live = fusion.live_exprs();
    if fusion.outputs().is_empty() {
        return Err(Unfit::NoOutputs);
    }
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        if !(is_pointwise(&e.op)
            || is_creation(&e.op)
            || is_input_squeeze(fusion, e)
            || is_recomputable(&e.op)
            // A scatter is computed in its loops, never recomputed elsewhere.
            || matches!(e.op, crate::ir::Op::Scatter { .. }))
        {
            return Err(Unfit::NotPointwise {
                op: e.op.name().into(),
            });
        }
    }
    // An innermost cat of math on slices becomes a cat of the slices (loaded with
    // vectors) and a select (`scheduler::cat`).
    let split = crate::scheduler::cat::split_inner_cats(fusion);
    // Broadcasts pushed above math that reach an iota or a full are folded into it
    // (`triu`'s mask of two iotas broadcast over a batch runs in this kernel).
    let pushed = push_broadcasts(split.as_ref().unwrap_or(fusion));
    let pushed = crate::scheduler::fold_creation_broadcasts(&pushed).unwrap_or(pushed);
    let pushed = broadcast_per_reader(&pushed);
    // Resize and indexing ops read fusion inputs, or values recomputed where they read.
    let recomputed = recomputed_tensors(&pushed)?;
    let live = pushed.live_exprs();
    for (id, e) in pushed.exprs() {
        let scheduled = live[id.index()] && !e.outputs.iter().any(|o| recomputed.contains(o));
        let kept = is_pointwise(&e.op)
            || is_creation(&e.op)
            || is_input_squeeze(&pushed, e)
            || reads_elsewhere(&e.op);
        if scheduled && !kept {
            return Err(Unfit::NotPointwise {
                op: e.op.name().into(),
            });
        }
    }
    let reference = reference_output(&pushed).ok_or(Unfit::NoOutputs)?;
    let s = new_schedule(&pushed, &recomputed).map_err(super::unschedulable)?;
    let ref_kinds = logical_kinds(&s, reference);
    let rank = ref_kinds.len();
    let mut classes: Vec<Vec<bool>> = (0..rank)
        .map(|i| vec![ref_kinds[i] == IterKind::Broadcast])
        .collect();
    for (&t, _) in s.schedule().tensors.iter() {
        if t == reference || s.schedule().is_input(t) {
            continue;
        }
        let k = logical_kinds(&s, t);
        if k.len() != rank {
            return Err(Unfit::OutputRanks {
                tensor: t,
                rank: k.len(),
                reference,
                reference_rank: rank,
            });
        }
        for i in 0..rank {
            if ref_kinds[i] == IterKind::Broadcast && k[i] != IterKind::Broadcast {
                return Err(Unfit::OutputShapes {
                    dim: i,
                    reference,
                    tensor: t,
                });
            }
            classes[i].push(k[i] == IterKind::Broadcast);
        }
    }
    // Every tensor takes the reference's loops, indexed by the reference's extents: a
    // dim of another extent (an output unrelated to the reference) is not this loop.
    let ref_t = pushed
        .tensor_type(reference)
        .ok_or(Unfit::NoReference { value: reference })?;
    let all: Vec<crate::ir::Extent> = ref_t.domain.iter().map(|d| d.extent.clone()).collect();
    crate::scheduler::analysis::check_exactly_mapped_except(&pushed, &all, &[], &recomputed)?;
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for i in 0..rank {
        match groups.last_mut() {
            Some((start, len)) if classes[*start] == classes[i] => *len += 1,
            _ => groups.push((i, 1)),
        }
    }
    let inner = (0..groups.len()).rev().find(|&g| !classes[groups[g].0][0]);
    Ok(PointwisePlan {
        fusion: pushed,
        reference,
        groups,
        inner,
        recomputed,
    })
}

/// Heuristics: the widest vector every vectorized tensor allows (16 bytes at most),
/// 128 threads, and two vectors per thread while there are at least four waves of
/// blocks.
pub(crate) fn heuristics(p: &PointwisePlan, info: &RuntimeInfo) -> Plan<PointwiseParams> {
    let f = &p.fusion;
    let ref_t = f
        .tensor_type(p.reference)
        .ok_or(Unfit::NoReference { value: p.reference })?;
    let dims: Vec<_> = ref_t.shape().cloned().collect();
    let size = |i: usize| -> Plan<i64> {
        info.eval(f, &dims[i].extent)
            .ok_or_else(|| Unfit::Unevaluated {
                extent: dims[i].extent.clone(),
            })
    };
    let mut numel: i64 = 1;
    for i in 0..dims.len() {
        numel = numel.saturating_mul(size(i)?);
    }
    let v = vector_width(p, info)?;
    let threads = 128i64;
    let sm = info.device.sm_count as i64;
    // Two vectors per thread (outside the thread dim) measured best on an H200 with the
    // rows on blockIdx.x: GELU-tanh [16384, 32768] bf16 3161 GB/s at unroll 2 vs 2759
    // at 1; SiLU-mul [8192, 14336] 4076 vs 3952. Four or more costs occupancy.
    let mut unroll = 2i64;
    while unroll > 1 && ceil_div(numel, v * threads * unroll) < 4 * sm {
        unroll /= 2;
    }
    // Break point: the inner part is the innermost dims of the inner group that still
    // hold two blocks' worth of elements; the rest of the group joins the outer part
    // (`blockIdx.x`), so rows are indexed by the block and not divided out of a flat
    // index per element. A short inner group stays whole (1-D over the group).
    let mut z_loops = 1i64;
    let (break_point, inner_elems, outer_elems, two_d) = match p.inner {
        Some(g) => {
            let (start, len) = p.groups[g];
            let mut bp = start;
            let mut inner = 1i64;
            for i in (start..start + len).rev() {
                inner = inner.saturating_mul(size(i)?);
                if inner >= 2 * v * threads * unroll {
                    // Its blocks go to blockIdx.y (at most 65535); a longer inner dim keeps
                    // the group whole (1-D, blocks on blockIdx.x).
                    if ceil_div(inner, v * threads * unroll) <= info.device.max_grid_dim[1] as i64 {
                        bp = i;
                    }
                    break;
                }
            }
            let mut inner = 1i64;
            for i in bp..start + len {
                inner = inner.saturating_mul(size(i)?);
            }
            let (groups, gi) = axis_groups(p, bp).ok_or(Unfit::NoInnerGroup)?;
            let mut outer = 1i64;
            if gi > 0 {
                let (os, ol) = groups[gi - 1];
                for i in os..os + ol {
                    outer = outer.saturating_mul(size(i)?);
                }
            }
            if gi > 1 {
                let (zs, zl) = groups[gi - 2];
                let mut z = 1i64;
                for i in zs..zs + zl {
                    z = z.saturating_mul(size(i)?);
                }
                // Past the grid's z limit, each block also loops over the group.
                z_loops = ceil_div(z, info.device.max_grid_dim[2].max(1) as i64);
            }
            (bp, inner, outer, gi > 0)
        }
        None => (0, 1, 1, false),
    };
    // A short inner part (rope's 128-wide heads: 16 vectors) leaves most of a block's
    // threads idle; the rest take rows of the outer part on threadIdx.y.
    let mut threads_y = 1i64;
    if two_d {
        let need = ceil_div(inner_elems, v).max(1);
        if need < threads {
            let tx = (need as u64).next_power_of_two() as i64;
            let rows = outer_elems.max(1);
            threads_y = threads / tx.min(threads);
            while threads_y > 1 && threads_y > rows {
                threads_y /= 2;
            }
            if threads_y > 1 {
                unroll = 1;
            }
        }
    }
    // With one vector per thread along the inner part, each thread takes several rows
    // of the outer part (their loads in flight together) while at least four waves of
    // blocks remain and no block gets rows past the end.
    let mut rows_per_thread = 1i64;
    if two_d && threads_y > 1 && ceil_div(inner_elems, v) <= threads / threads_y {
        for r in [4i64, 2] {
            let per_block = threads_y * r;
            if outer_elems % per_block == 0 && ceil_div(numel, v * threads * r) >= 4 * sm {
                rows_per_thread = r;
                break;
            }
        }
    }
    let threads_x = threads / threads_y;
    // Blocks along the inner part must fit the grid dim they are bound to.
    let inner_blocks = ceil_div(inner_elems, v * threads_x * unroll);
    if two_d && inner_blocks > info.device.max_grid_dim[1] as i64 {
        return Err(Unfit::GridLimit {
            count: inner_blocks,
            what: "blocks along the inner dims".into(),
            axis: 'y',
        });
    }
    let grid = if two_d {
        [
            ceil_div(outer_elems, threads_y * rows_per_thread).max(1),
            inner_blocks.max(1),
            1,
        ]
    } else {
        [inner_blocks.max(1), 1, 1]
    };
    Ok(PointwiseParams {
        break_point: break_point as i64,
        vectorize: v,
        unroll,
        threads,
        threads_y,
        z_loops,
        rows_per_thread,
        launch: LaunchParams {
            grid,
            block: [threads_x, threads_y, 1],
        },
        compile: CompileParams {
            index_type: index_type(f, info),
            min_blocks_per_sm: None,
        },
    })
}

/// The inputs loaded with vectors other than through a register cache: through a
/// squeeze, a broadcast or a slice, with the start every vector is offset by (the
/// slice's innermost start, else 0).
fn vector_loaded_inputs(p: &PointwisePlan) -> Vec<(ValId, i64)> {
    vector_squeeze_reads(p)
        .into_iter()
        .map(|r| (r.1, 0))
        .chain(vector_broadcast_reads(p).into_iter().map(|r| (r.1, 0)))
        .chain(vector_slice_reads(p).into_iter().map(|r| (r.1, r.2)))
        .chain(vector_permute_reads(p).into_iter().map(|r| (r.1, 0)))
        .chain(vector_cat_reads(p).into_iter().flat_map(|r| r.1))
        .chain(vector_index_select_reads(p).into_iter().map(|r| (r.1, 0)))
        .collect()
}

/// Vector width: 16 bytes of the widest tensor accessed with vectors (the outputs,
/// cached full-rank inputs, inputs loaded through squeezes, broadcasts and slices; an
/// index tensor or a weight read element by element does not narrow it), limited by
/// each of their sizes, alignments and pitches, and by every slice's start.
fn vector_width(p: &PointwisePlan, info: &RuntimeInfo) -> Plan<i64> {
    let f = &p.fusion;
    let loaded = vector_loaded_inputs(p);
    let cached: Vec<ValId> = f
        .inputs()
        .iter()
        .copied()
        .filter(|&i| cached_input(p, i))
        .collect();
    let widest = f
        .outputs()
        .iter()
        .map(|o| o.val)
        .chain(cached.iter().copied())
        .chain(loaded.iter().map(|l| l.0))
        .filter(|&v| f.val(v).is_tensor())
        .map(|v| f.val(v).dtype.size_bytes())
        .max()
        .unwrap_or(4);
    let max_v = (16 / widest as i64).max(1);
    let mut v = if p.inner.is_some() {
        pow2_dividing(innermost_size(p, info)?, max_v)
    } else {
        1
    };
    let rank = f.tensor_type(p.reference).map_or(0, |t| t.shape().count());
    let limit = |t: &crate::scheduler::info::TensorInfo, v: i64| {
        v.min(vector_limit(t, *t.sizes.last().unwrap_or(&1), max_v))
    };
    for (inp, t) in tensor_inputs(f, info) {
        if cached.contains(&inp) && t.sizes.len() == rank {
            v = limit(t, v);
        }
    }
    for (inp, start) in loaded {
        if let Some(t) = info.tensor(f, inp) {
            v = pow2_dividing(start, limit(t, v));
        }
    }
    Ok(v)
}

/// 64-bit index math when some tensor of the call has 2^31 elements or more.
pub(crate) fn index_type(f: &Fusion, info: &RuntimeInfo) -> IndexType {
    let mut wide = false;
    for (_, t) in tensor_inputs(f, info) {
        let n: i128 = t.sizes.iter().map(|&s| s as i128).product();
        wide |= n >= 1 << 31;
    }
    for o in f.outputs() {
        if let Some(t) = f.tensor_type(o.val) {
            let n: Option<i128> = t
                .shape()
                .map(|d| info.eval(f, &d.extent).map(|x| x as i128))
                .product();
            wide |= n.is_none_or(|n| n >= 1 << 31);
        }
    }
    if wide {
        IndexType::I64
    } else {
        IndexType::I32
    }
}

/// Runs every output's leading serial loops in the reference's. The groups left of the
/// two bound to blocks (`blockIdx.z`, then `blockIdx.x`) are serial loops of symbolic
/// extent; two outputs in loop nests of their own would each need the whole of a tensor
/// both read (`sigmoid(x)` read by `sigmoid(sigmoid(x))` and by `sigmoid(x) - w`, with
/// `w` broadcast over dims 0 and 2 of four: CPU fuzz seed 10902137) in registers across
/// those loops. Sharing them inlines it per iteration.
fn share_serial_loops(s: &mut ScheduledFusion, reference: ValId) -> Result<(), ScheduleError> {
    let dom = &s.schedule().tensors[&reference].domain;
    let serial = (0..dom.loop_dims.len())
        .take_while(|&i| !dom.loop_dom(i).parallel.is_thread())
        .count();
    if serial == 0 {
        return Ok(());
    }
    let leaves: Vec<ValId> = s
        .fusion()
        .outputs()
        .iter()
        .map(|o| o.val)
        .filter(|&o| o != reference && s.schedule().uses(o).is_empty())
        .collect();
    for o in leaves {
        s.compute_with(o, reference, serial)?;
    }
    Ok(())
}

/// The reference's dims grouped for scheduling with the inner part starting at dim
/// `bp`: the plan's groups with the inner group cut at `bp` (its dims before `bp` form
/// their own outer group), and the index of the inner part; `None` when `bp` is not
/// inside the inner group.
fn axis_groups(p: &PointwisePlan, bp: usize) -> Option<(Vec<(usize, usize)>, usize)> {
    let g = p.inner?;
    let (start, len) = p.groups[g];
    if bp < start || bp >= start + len {
        return None;
    }
    let mut groups = p.groups[..g].to_vec();
    if bp > start {
        groups.push((start, bp - start));
    }
    let gi = groups.len();
    groups.push((bp, start + len - bp));
    groups.extend_from_slice(&p.groups[g + 1..]);
    Some((groups, gi))
}

/// The size of the reference's innermost dim (vectors never cross it).
fn innermost_size(p: &PointwisePlan, info: &RuntimeInfo) -> Plan<i64> {
    let t = p
        .fusion
        .tensor_type(p.reference)
        .ok_or(Unfit::NoReference { value: p.reference })?;
    let last = t.shape().last().ok_or(Unfit::RankZero)?;
    info.eval(&p.fusion, &last.extent)
        .ok_or_else(|| Unfit::Unevaluated {
            extent: last.extent.clone(),
        })
}

/// True for inputs read through a vectorized register cache: full rank, with a
/// non-broadcast innermost dim, read by some expression other than a broadcast.
fn cached_input(p: &PointwisePlan, inp: ValId) -> bool {
    let f = &p.fusion;
    let Some(t) = f.tensor_type(inp) else {
        return false;
    };
    let Some(ref_t) = f.tensor_type(p.reference) else {
        return false;
    };
    if t.rank() != ref_t.rank() || t.shape().last().is_none_or(|d| d.is_broadcast_like()) {
        return false;
    }
    if !vector_readable(t) {
        return false;
    }
    // Readers in the kernel's loops (recomputed tensors read the input where their
    // resize op reads it); a resize op reads at other positions, so not from a cache.
    let live = f.live_exprs();
    let mut readers = f.exprs().filter(|(id, e)| {
        live[id.index()] && e.inputs.contains(&inp) && !p.recomputed.contains(&e.outputs[0])
    });
    let mut any = false;
    readers.all(|(_, e)| {
        any |= !matches!(e.op, crate::ir::Op::Broadcast { .. });
        !is_resize(&e.op) && !matches!(e.op, crate::ir::Op::Permute { .. })
    }) && any
}

/// The results of squeezes that read an input with vectors: the input's innermost dim
/// is kept, not broadcast, declared contiguous and innermost in memory, and the result
/// has no broadcast dim (a squeezed `[1, 1, H]` weight is read element by element: as a
/// vector load its loop placement failed the lowering's loop check).
fn vector_squeezes(p: &PointwisePlan) -> Vec<ValId> {
    vector_squeeze_reads(p)
        .into_iter()
        .map(|(out, _, _)| out)
        .collect()
}

/// [`vector_squeezes`] with the input each reads and the axes it removes.
fn vector_squeeze_reads(p: &PointwisePlan) -> Vec<(ValId, ValId, Vec<usize>)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, e)| live[id.index()] && crate::scheduler::analysis::is_input_squeeze(f, e))
        .filter_map(|(_, e)| {
            let crate::ir::Op::Squeeze { axes } = &e.op else {
                return None;
            };
            let t = f.tensor_type(e.inputs[0])?;
            let last = t.contiguity.len().checked_sub(1)?;
            // A squeeze written straight to an output is stored, not loaded; one only
            // resize ops read is recomputed inside them.
            if f.outputs().iter().any(|o| o.val == e.outputs[0])
                || p.recomputed.contains(&e.outputs[0])
            {
                return None;
            }
            let full = f
                .tensor_type(e.outputs[0])
                .is_some_and(|o| o.shape().all(|d| !d.is_broadcast_like()));
            let vector = full
                && !axes.contains(&last)
                && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
                && vector_readable(t);
            vector.then(|| (e.outputs[0], e.inputs[0], axes.clone()))
        })
        .collect()
}

/// The broadcasts of fusion inputs loaded with vectors, with the input each reads: the
/// input's innermost dim is kept (not a broadcast dim of the result), declared
/// contiguous and innermost in memory, and the result is not an output. Rope's `[T, D]`
/// cos/sin tables broadcast over heads, or a `[H]` bias added to `[N, H]`, load
/// 16 bytes at a time instead of one element.
fn vector_broadcast_reads(p: &PointwisePlan) -> Vec<(ValId, ValId)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(_, e)| {
            let crate::ir::Op::Broadcast { mask } = &e.op else {
                return None;
            };
            let (out, inp) = (e.outputs[0], e.inputs[0]);
            if f.input_position(inp).is_none()
                || p.recomputed.contains(&out)
                || f.outputs().iter().any(|o| o.val == out)
            {
                return None;
            }
            let t = f.tensor_type(inp)?;
            let vector = mask.last() == Some(&false)
                && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
                && vector_readable(t);
            vector.then_some((out, inp))
        })
        .collect()
}

/// The slices of fusion inputs loaded with vectors, with the input each reads and the
/// start of its innermost range: scheduled (not recomputed), not an output, no broadcast
/// dim in the result, the innermost range a constant start with step 1, and the input's
/// innermost dim declared contiguous and innermost in memory. (The vector width divides
/// the start: the heuristics see to it.)
fn vector_slice_reads(p: &PointwisePlan) -> Vec<(ValId, ValId, i64)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(_, e)| {
            let crate::ir::Op::Slice { ranges } = &e.op else {
                return None;
            };
            let (out, inp) = (e.outputs[0], e.inputs[0]);
            if p.recomputed.contains(&out)
                || f.input_position(inp).is_none()
                || f.outputs().iter().any(|o| o.val == out)
            {
                return None;
            }
            let t = f.tensor_type(inp)?;
            let r = ranges.last()?;
            let start = match r.start {
                crate::ir::SizeArg::Const(c) if c >= 0 => c,
                _ => return None,
            };
            let full = f
                .tensor_type(out)
                .is_some_and(|o| o.shape().all(|d| !d.is_broadcast_like()));
            let vector = full && r.step == 1 && vector_readable(t);
            vector.then_some((out, inp, start))
        })
        .collect()
}

/// True when `out`, the result of a read of fusion inputs, can be a vector load of its
/// own: scheduled (not recomputed inside a resize op), not a fusion output (an output is
/// stored, not loaded), and without broadcast dims.
fn loadable_result(p: &PointwisePlan, out: ValId) -> bool {
    let f = &p.fusion;
    !p.recomputed.contains(&out)
        && f.outputs().iter().all(|o| o.val != out)
        && f.tensor_type(out)
            .is_some_and(|o| o.shape().all(|d| !d.is_broadcast_like()))
}

/// The permutes of fusion inputs loaded with vectors, with the input each reads: the
/// innermost dim stays innermost (a head split `[B, S, H, D]` to `[B, H, S, D]`: each
/// vector is a contiguous run of the input's rows), the input's innermost dim is
/// declared contiguous and innermost in memory, and the result is scheduled (not
/// recomputed), not an output, and has no broadcast dim. Every outer stride of the
/// input is a multiple of the vector width (`vector_limit`), so each vector starts
/// aligned. A permute of elementwise math reaches the input first
/// (`scheduler::permute`).
fn vector_permute_reads(p: &PointwisePlan) -> Vec<(ValId, ValId)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(_, e)| {
            let crate::ir::Op::Permute { perm } = &e.op else {
                return None;
            };
            let (out, inp) = (e.outputs[0], e.inputs[0]);
            if !loadable_result(p, out) || f.input_position(inp).is_none() {
                return None;
            }
            let inner_kept = perm.last().is_some_and(|&l| l + 1 == perm.len());
            (inner_kept && vector_readable(f.tensor_type(inp)?)).then_some((out, inp))
        })
        .collect()
}

/// The innermost cats of fusion inputs and of slices of them loaded with vectors, each
/// with the inputs it reads and the multiples of the vector width they ask for (each
/// slice's start and each piece's offset): the result is scheduled (not recomputed),
/// not an output, has no broadcast dim, and every piece has a constant length, a step
/// of 1 and an input whose innermost dim is contiguous and innermost in memory. Rope's
/// rotate-half reaches this form through `scheduler::cat`.
fn vector_cat_reads(p: &PointwisePlan) -> Vec<(ValId, Vec<(ValId, i64)>)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(_, e)| {
            let crate::ir::Op::Cat { axis } = &e.op else {
                return None;
            };
            let out = e.outputs[0];
            if !loadable_result(p, out) || axis + 1 != f.tensor_type(out)?.rank() {
                return None;
            }
            let mut reads = Vec::new();
            let mut offset = 0i64;
            for &piece in &e.inputs {
                let len = f
                    .tensor_type(piece)?
                    .shape()
                    .nth(*axis)?
                    .extent
                    .as_const()?;
                let (inp, start) = if f.input_position(piece).is_some() {
                    (piece, 0)
                } else {
                    let d = f.expr(f.val(piece).definition?);
                    let crate::ir::Op::Slice { ranges } = &d.op else {
                        return None;
                    };
                    let r = ranges.get(*axis)?;
                    let start = match r.start {
                        crate::ir::SizeArg::Const(c) if c >= 0 && r.step == 1 => c,
                        _ => return None,
                    };
                    // The lowering's validation reads the slice's bounds against a
                    // constant input extent.
                    let x = f.tensor_type(d.inputs[0])?;
                    if f.input_position(d.inputs[0]).is_none()
                        || x.shape().nth(*axis)?.extent.as_const().is_none()
                    {
                        return None;
                    }
                    (d.inputs[0], start)
                };
                if !vector_readable(f.tensor_type(inp)?) {
                    return None;
                }
                reads.push((inp, start));
                reads.push((inp, offset));
                offset += len;
            }
            Some((out, reads))
        })
        .collect()
}

/// The `index_select`s of fusion inputs along an outer dim loaded with vectors, with
/// the input each reads (an embedding lookup: each vector is a contiguous run of the
/// selected row, its index checked once): the index is a fusion input, the input's
/// innermost dim is contiguous and innermost in memory, and the result is scheduled
/// (not recomputed), not an output, and has no broadcast dim.
fn vector_index_select_reads(p: &PointwisePlan) -> Vec<(ValId, ValId)> {
    let f = &p.fusion;
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .filter_map(|(_, e)| {
            let crate::ir::Op::IndexSelect { axis } = &e.op else {
                return None;
            };
            let (out, inp) = (e.outputs[0], e.inputs[0]);
            if !loadable_result(p, out)
                || f.input_position(inp).is_none()
                || f.input_position(e.inputs[1]).is_none()
                || axis + 1 >= f.tensor_type(out)?.rank()
            {
                return None;
            }
            vector_readable(f.tensor_type(inp)?).then_some((out, inp))
        })
        .collect()
}

/// The tensors accessed with vectors, for a vectorized schedule: loads (register caches
/// of inputs, and the squeezes, slices and broadcasts of inputs that load with vectors,
/// moved ahead of the math), outputs stored from register caches, and those caches.
type VectorAccesses = (Vec<ValId>, Vec<ValId>, Vec<ValId>);

fn vector_accesses(
    p: &PointwisePlan,
    s: &mut ScheduledFusion,
) -> Result<VectorAccesses, ScheduleError> {
    let f = &p.fusion;
    let mut loads = Vec::new();
    for &inp in f.inputs() {
        if cached_input(p, inp) {
            loads.push(s.cache_after(inp)?);
        }
    }
    loads.extend(vector_squeezes(p));
    for out in vector_slice_reads(p)
        .into_iter()
        .map(|r| r.0)
        .chain(vector_broadcast_reads(p).into_iter().map(|r| r.0))
        .chain(vector_permute_reads(p).into_iter().map(|r| r.0))
        .chain(vector_cat_reads(p).into_iter().map(|r| r.0))
        .chain(vector_index_select_reads(p).into_iter().map(|r| r.0))
    {
        s.hoist(out)?;
        loads.push(out);
    }
    let mut stores = Vec::new();
    let mut store_caches = Vec::new();
    for o in super::distinct_outputs(f) {
        // An output other tensors read is stored where it is computed, before its
        // readers (a vector store from a cache runs after all the math).
        if !s.schedule().uses(o).is_empty() {
            continue;
        }
        // An output broadcast in its innermost dim has no vector to store.
        if f.tensor_type(o)
            .is_none_or(|t| t.shape().last().is_none_or(|d| d.is_broadcast_like()))
        {
            continue;
        }
        store_caches.push(s.cache_before(o)?);
        stores.push(o);
    }
    Ok((loads, stores, store_caches))
}

/// Applies `params` to the plan.
pub(crate) fn schedule(
    p: &PointwisePlan,
    params: &PointwiseParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let f = &p.fusion;
    let mut s = new_schedule(f, &p.recomputed)?;
    let reference = p.reference;
    // An output other expressions read is computed in registers and stored from there
    // (its readers read the register copy): no thread reads back from global memory
    // what a store may not have written yet (a deferred vector store, or an output
    // with a broadcast dim where the reference iterates, stored by one thread).
    s.fork_read_outputs(|_| true)?;
    let v = params.vectorize;
    let (loads, stores, store_caches) = if v > 1 {
        vector_accesses(p, &mut s)?
    } else {
        Default::default()
    };
    if p.inner.is_some() {
        let bp = usize::try_from(params.break_point).unwrap_or(usize::MAX);
        let (groups, g) = axis_groups(p, bp).ok_or_else(|| ScheduleError::InvalidArgument {
            op: "pointwise schedule",
            tensor: reference,
            reason: format!(
                "break_point {} is not inside the inner group of dims",
                params.break_point
            ),
        })?;
        // The vector is an inner split of the innermost logical dim (vectors never
        // cross it), taken before the merges; with v > 1 the inner group is the last.
        let rank = logical_kinds(&s, reference).len() as i64;
        s.split(reference, rank - 1, v)?;
        // Merge each group from the last, so earlier axes keep their positions.
        for &(start, len) in groups.iter().rev() {
            for _ in 1..len {
                s.merge(reference, start as i64)?;
            }
        }
        let gi = g as i64;
        let ty = params.threads_y.max(1);
        s.split(reference, gi, params.threads / ty)?;
        s.split(reference, gi, params.unroll)?;
        // Axes: groups 0..g, then [blocks, unroll, threads, vectorize] (+ trailing
        // broadcast groups of the reference).
        let blocks = if g > 0 {
            ParallelType::BIDy
        } else {
            ParallelType::BIDx
        };
        s.parallelize(reference, gi, blocks)?;
        s.parallelize(reference, gi + 1, ParallelType::Unroll)?;
        s.parallelize(reference, gi + 2, ParallelType::TIDx)?;
        let mut zshift = 0;
        if g > 1 {
            if params.z_loops > 1 {
                // [z_loops serial, the rest on blockIdx.z]
                s.split_outer(reference, gi - 2, params.z_loops)?;
                zshift = 1;
            }
            s.parallelize(reference, gi - 2 + zshift, ParallelType::BIDz)?;
        }
        let gi = gi + zshift;
        // The vector dim must be innermost: move trailing broadcast groups out of the
        // way (they have extent 1).
        let n = s.schedule().tensors[&reference].domain.loop_dims.len() as i64;
        let vec_axis = gi + 3;
        if vec_axis != n - 1 {
            let mut order: Vec<i64> = (0..n).filter(|&a| a != vec_axis).collect();
            order.push(vec_axis);
            s.reorder(reference, &order)?;
        }
        // The outer part on blockIdx.x, `ty` of its rows per block on threadIdx.y: the
        // inner axes move one to the right.
        let mut shift = 0;
        if g > 0 {
            if ty > 1 {
                s.split(reference, gi - 1, ty)?;
                shift = 1;
            }
            let rows = params.rows_per_thread.max(1);
            if rows > 1 {
                // [outer, rows, (ty), blocks, ...] -> [outer, (ty), blocks, rows, ...]:
                // the rows loop sits below the axes the loads share with the math, so
                // the loads of every row are issued together, ahead of the math.
                s.split(reference, gi - 1, rows)?;
                let n = s.schedule().tensors[&reference].domain.loop_dims.len() as i64;
                let mut order: Vec<i64> = (0..gi).collect();
                order.extend(gi + 1..=gi + 1 + shift);
                order.push(gi);
                order.extend(gi + 2 + shift..n);
                s.reorder(reference, &order)?;
                s.parallelize(reference, gi + shift + 1, ParallelType::Unroll)?;
            }
            if ty > 1 {
                s.parallelize(reference, gi, ParallelType::TIDy)?;
            }
            s.parallelize(reference, gi - 1, ParallelType::BIDx)?;
        }
        let others: Vec<ValId> = s
            .schedule()
            .tensors
            .keys()
            .copied()
            .filter(|&t| t != reference && !s.schedule().is_input(t))
            .collect();
        if !others.is_empty() {
            s.transform_like(reference, &others)?;
            s.parallelize_like(reference, &others)?;
        }
        share_serial_loops(&mut s, reference)?;
        let computed: Vec<ValId> = others
            .iter()
            .copied()
            .chain(std::iter::once(reference))
            .filter(|t| !loads.contains(t) && !stores.contains(t))
            .collect();
        let vectorized: Vec<ValId> = loads.iter().chain(&stores).copied().collect();
        mark_vector_dims(&mut s, v, &vectorized, &computed)?;
        s.inline_most()?;
        // Loads get their own unrolled loop ahead of the math (every vector of the
        // thread in flight at once), and the results are stored in a loop after it.
        let pos = (gi + shift) as usize + 1;
        for &c in &loads {
            let Some(&first) = s.schedule().uses(c).first() else {
                continue;
            };
            let consumer = s.schedule().exprs[first].output;
            s.compute_at(c, consumer, pos)?;
        }
        for (&c, &o) in store_caches.iter().zip(&stores) {
            s.compute_at(c, o, pos)?;
        }
        // Those moves took loops away from tensors read by several consumers (`t4` read
        // by the store cache of one output and the math of another).
        s.settle_shared_producers()?;
        return Ok(s);
    }
    s.inline_most()?;
    Ok(s)
}
