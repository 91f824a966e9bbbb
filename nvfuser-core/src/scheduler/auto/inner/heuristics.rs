//! Heuristics of the inner reduction schedulers: the streaming reduction's params
//! ([`reduction_heuristics`]) and the persistent normalization's ([`persistent_heuristics`],
//! with the inner-outer grid when column sums ride along), from the plan and the call's
//! sizes, alignments and device.

use std::collections::BTreeSet;

use super::super::inner_outer;
use super::super::pointwise::index_type;
use super::super::{
    ceil_div, pow2_dividing, product_dims, round_up, tensor_inputs, vector_limit, vector_readable,
    Plan,
};
use super::{broadcast_vector_inputs, InnerPlan};
use crate::ir::{Extent, IterKind, ValId};
use crate::scheduler::analysis::reduction_axes;
use crate::scheduler::info::RuntimeInfo;
use crate::scheduler::params::{CompileParams, LaunchParams, PersistentParams, ReductionParams};
use crate::scheduler::unfit::Unfit;

fn eval_all(p: &InnerPlan, info: &RuntimeInfo, es: &[Extent]) -> Plan<i64> {
    let mut n = 1i64;
    for e in es {
        n = n.saturating_mul(
            info.eval(&p.fusion, e)
                .ok_or_else(|| Unfit::Unevaluated { extent: e.clone() })?,
        );
    }
    Ok(n)
}

/// The widest vector every full-rank input, every input read through a broadcast that
/// keeps the innermost dim (a `[H]` weight, loaded with vectors too) and the reduced
/// innermost size allow.
fn vector_width(p: &InnerPlan, info: &RuntimeInfo) -> Plan<i64> {
    let f = &p.fusion;
    let innermost = eval_all(p, info, &p.reduced[p.k - 1..])?;
    let max_v = (16 / vector_bytes(p) as i64).max(1);
    let mut v = pow2_dividing(innermost.max(1), max_v);
    for (input, t) in tensor_inputs(f, info) {
        if t.sizes.len() == p.rank {
            let last = *t.sizes.last().unwrap_or(&1);
            if last > 1 {
                v = v.min(vector_limit(t, last, max_v));
                if !f.tensor_type(input).is_some_and(vector_readable) {
                    v = 1;
                }
            }
        }
    }
    // (broadcast, input) pairs: the input's layout limits the vector.
    for (_, inp) in broadcast_vector_inputs(f) {
        if let Some(t) = info.tensor(f, inp) {
            v = v.min(vector_limit(t, *t.sizes.last().unwrap_or(&1), v));
        }
    }
    Ok(v)
}

/// The widest element of the tensors read or written with vectors: full-rank inputs
/// and outputs whose innermost dim is not a broadcast, and inputs read through a
/// broadcast that keeps their innermost dim. A per-row input (`rstd: [N, 1]` f32 beside
/// bf16 rows) is read one value per row and does not narrow the vectors.
fn vector_bytes(p: &InnerPlan) -> usize {
    let f = &p.fusion;
    let full = |v: ValId| {
        f.tensor_type(v).is_some_and(|t| {
            t.rank() == p.rank && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
        })
    };
    f.inputs()
        .iter()
        .copied()
        .chain(f.outputs().iter().map(|o| o.val))
        .filter(|&v| full(v))
        .chain(broadcast_vector_inputs(f).into_iter().map(|(_, i)| i))
        .map(|v| f.val(v).dtype.size_bytes())
        .max()
        .unwrap_or_else(|| super::super::widest_io_bytes(f))
}

/// Heuristics of the streaming (non-persistent) inner reduction.
pub(crate) fn reduction_heuristics(p: &InnerPlan, info: &RuntimeInfo) -> Plan<ReductionParams> {
    let h = eval_all(p, info, &p.reduced)?;
    let v = vector_width(p, info)?;
    let chunks = ceil_div(h.max(1), v);
    let threads_x = round_up(chunks, 32).clamp(32, 512);
    let rows_per_block = if p.rows.is_empty() {
        1
    } else {
        (128 / threads_x).max(1)
    };
    let serial = ceil_div(chunks, threads_x);
    let unroll = if serial >= 8 {
        4
    } else if serial >= 2 {
        2
    } else {
        1
    };
    let (blocks, grid_y) = row_grid(p, info, rows_per_block)?;
    let sm = info.device.sm_count as i64;
    let mut grid_split = 1;
    if p.grid_ok && blocks < 2 * sm && serial >= 4 * unroll {
        grid_split = ceil_div(4 * sm, blocks.max(1))
            .min(serial / (2 * unroll))
            .clamp(1, 65535);
    }
    Ok(ReductionParams {
        vectorize: v,
        threads_x,
        rows_per_block,
        unroll,
        grid_split,
        launch: LaunchParams {
            grid: [blocks.max(1), grid_split.max(grid_y), 1],
            block: [threads_x, rows_per_block, 1],
        },
        compile: CompileParams {
            index_type: index_type(&p.fusion, info),
            min_blocks_per_sm: None,
        },
    })
}

/// The blocks on `blockIdx.x` and on `blockIdx.y`: all rows on x, or with
/// [`InnerPlan::split_rows`] the last row dim on x and the others on y.
fn row_grid(p: &InnerPlan, info: &RuntimeInfo, rows_per_block: i64) -> Plan<(i64, i64)> {
    if !p.split_rows {
        return Ok((ceil_div(eval_all(p, info, &p.rows)?, rows_per_block), 1));
    }
    let (lead, last) = p.rows.split_at(p.rows.len() - 1);
    let y = eval_all(p, info, lead)?;
    let limit = info.device.max_grid_dim[1] as i64;
    if y > limit {
        return Err(Unfit::GridLimit {
            count: y,
            what: "rows of the leading row dims".into(),
            axis: 'y',
        });
    }
    Ok((ceil_div(eval_all(p, info, last)?, rows_per_block), y.max(1)))
}

/// Most vector chunks one thread keeps per row.
const MAX_BATCH: i64 = 16;

/// Heuristics of the persistent normalization; `Err` when the row is too long to keep
/// on chip (the caller then streams it with [`reduction_heuristics`]).
pub(crate) fn persistent_heuristics(p: &InnerPlan, info: &RuntimeInfo) -> Plan<PersistentParams> {
    let h = eval_all(p, info, &p.reduced)?;
    let mut dims = Vec::new();
    for e in &p.reduced {
        if !product_dims(e, &mut dims) {
            return Err(Unfit::ReducedNotProduct { extent: e.clone() });
        }
    }
    // `schedule_persistent` compiles the reduced extent in by binding its one input
    // dim; with several, the serial part of the row keeps a symbolic extent that no
    // register buffer can span (CPU fuzz seed 12801467: a `var` over all four dims of
    // `[A, B, C, D]` broadcast back beside a `uniform`, "T20 in Local memory spans
    // loop axis 0 of symbolic extent"). Such rows are streamed.
    if dims.len() > 1 {
        let extent = p
            .reduced
            .iter()
            .cloned()
            .reduce(|a, b| a * b)
            .unwrap_or(Extent::Const(1));
        return Err(Unfit::ReducedSymbolicDims {
            extent,
            dims: dims.len(),
        });
    }
    let v = vector_width(p, info)?;
    let chunks = ceil_div(h.max(1), v);
    // At most 512 threads per row, unless that leaves more than four vector chunks per
    // thread and 1024 threads hold the row in four: a 1024-thread block has 64
    // registers per thread (its `__launch_bounds__` makes the compiler keep to them,
    // spilling if it must; without them LayerNorm [*, 32768] failed to launch with
    // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an H200). H100 sweeps (`param_sweep`) at
    // [8192, 32768] bf16, 1024 threads x 4 chunks against 512 x 8: softmax 403.5 us
    // against 542.2, LayerNorm 388.5 against 442.1, RMSNorm 364.0 against 379.9. At
    // [4096, 65536] (8 chunks at 1024) 512 threads stay: LayerNorm 526.8 against 533.8,
    // RMSNorm 425.2 against more than 487.
    //
    // Rows that are only reduced (cross-entropy's log-sum-exp: per-row outputs, no
    // element of the row stored) keep 512 threads: a block's phases (load, reduce,
    // reduce again) leave the memory idle unless other blocks overlap them, and 1024
    // threads fit two blocks on an SM. H200 `param_sweep logsumexp bf16 4096 32000`:
    // 140.2 us at 512 x 8 against 174.4 at 1024 x 4.
    let wide = ceil_div(chunks, 512) > 4 && ceil_div(chunks, 1024) <= 4 && stores_rows(p);
    let max_tx = info
        .device
        .max_threads_per_block
        .min(if wide { 1024 } else { 512 }) as i64;
    // About four vector chunks per thread: enough independent loads in flight, few
    // enough registers that several blocks fit on an SM between the row's phases.
    let mut threads_x = round_up(ceil_div(chunks, 4), 32).clamp(32, max_tx);
    if threads_x < 128 {
        threads_x = round_up(chunks, 32).min(128);
    }
    let batch = ceil_div(chunks, threads_x);
    // Registers: the kept rows (batch × v elements each per thread) stay under half of
    // the thread's register budget. Kept as computed (f32 or wider) unless that is too
    // much; then only the input rows are kept, in their dtype, and the math recomputed
    // from them where it is used.
    let regs_per_thread = (info.device.registers_per_sm as i64 / (threads_x.max(256))).min(255);
    let (computed, projected) = kept_registers(p, batch * v);
    // An inner-outer kernel also keeps its column sums' accumulators.
    let acc = inner_outer::accumulator_registers(&p.fusion, &p.columns, batch * v);
    let project_to_inputs = computed + acc > regs_per_thread / 2;
    if batch > MAX_BATCH || (project_to_inputs && projected + acc > regs_per_thread / 2) {
        return Err(Unfit::RowTooLong {
            elements: h,
            batch,
            vector: v,
            threads: threads_x,
        });
    }
    let mut rows_per_block = if p.rows.is_empty() {
        1
    } else {
        (128 / threads_x).max(1)
    };
    let (mut blocks, grid_y) = row_grid(p, info, rows_per_block)?;
    let (mut row_blocks, mut min_blocks_per_sm) = (0, None);
    if !p.columns.is_empty() {
        // One row per block at a time; the rows in a serial loop over a resident grid.
        rows_per_block = 1;
        let kept = if project_to_inputs {
            projected
        } else {
            computed
        };
        let rows = eval_all(p, info, &p.rows)?;
        let (g, b) = inner_outer::resident_grid(info, threads_x, kept + acc, rows);
        inner_outer::check_shape(&p.columns, rows, g)?;
        (blocks, row_blocks, min_blocks_per_sm) = (g, g, Some(b));
    }
    Ok(PersistentParams {
        hidden: h,
        vectorize: v,
        threads_x,
        rows_per_block,
        batch,
        project_to_inputs,
        row_blocks,
        launch: LaunchParams {
            grid: [blocks.max(1), grid_y, 1],
            block: [threads_x, rows_per_block, 1],
        },
        compile: CompileParams {
            index_type: index_type(&p.fusion, info),
            min_blocks_per_sm,
        },
    })
}

/// True when some output has elements along the reduced dims (a softmax's or a norm's
/// rows); false when every output is per row.
fn stores_rows(p: &InnerPlan) -> bool {
    let f = &p.fusion;
    f.outputs().iter().any(|o| {
        f.tensor_type(o.val).is_some_and(|t| {
            t.domain.len() == p.rank
                && t.domain[p.rank - p.k..]
                    .iter()
                    .any(|d| d.kind != IterKind::Broadcast && !d.is_reduction())
        })
    })
}

/// Registers per thread the kept rows take, `elements` per row each: kept as computed
/// (one row per full-rank input, plus one per reduction after the first, as a softmax
/// keeps `exp(x - max)` beside `x`; 32-bit values, 64-bit for f64 math), and projected
/// to the inputs (one row per full-rank input, in its dtype).
fn kept_registers(p: &InnerPlan, elements: i64) -> (i64, i64) {
    let f = &p.fusion;
    let live = f.live_exprs();
    let read: BTreeSet<ValId> = f
        .exprs()
        .filter(|(id, _)| live[id.index()])
        .flat_map(|(_, e)| e.inputs.iter().copied())
        .collect();
    let inputs: Vec<ValId> = f
        .inputs()
        .iter()
        .copied()
        .filter(|v| read.contains(v))
        .filter(|&v| {
            f.tensor_type(v).is_some_and(|t| {
                t.rank() == p.rank && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
            })
        })
        .collect();
    let reductions = f
        .exprs()
        .filter(|(id, e)| live[id.index()] && reduction_axes(&e.op).is_some())
        .count() as i64;
    let wide = f
        .exprs()
        .filter(|(id, _)| live[id.index()])
        .any(|(_, e)| f.val(e.outputs[0]).dtype.size_bytes() > 4);
    let computed_rows = (inputs.len() as i64 + reductions - 1).max(1);
    let computed = computed_rows * elements * if wide { 2 } else { 1 };
    let projected_bytes: i64 = inputs
        .iter()
        .map(|&v| elements * f.val(v).dtype.size_bytes() as i64)
        .sum();
    (computed, ceil_div(projected_bytes, 4))
}
