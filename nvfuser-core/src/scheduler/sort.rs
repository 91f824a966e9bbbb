//! The sort scheduler: a fusion of one `sort`/`argsort`/`topk` of a fusion input, with
//! its values and/or indices as the outputs (the segmenter puts pointwise math before
//! and after it in segments of their own). Any sorted dim and any layout: the kernel
//! addresses each row through the input's and the outputs' strides.
//!
//! Each block sorts `rows_per_block` rows in dynamic shared memory as (key, index)
//! pairs padded to `pad`, a power of two at least the row's length, with a bitonic
//! network ([`crate::codegen::sort_support`]); short rows share a block (a tile of at
//! least 1024 elements). The index is u16 for rows of at most 65536 elements, so an
//! f32 row of 32768 takes 192 KiB and fits an H100's 227 KiB. A row whose pairs do not
//! fit the device's shared memory per block is refused
//! ([`Unfit::SortRowTooLong`]): no kernel runs, and the plan's error says why (a
//! global-memory sort is not built yet).
//!
//! A `topk` of rows of at least 2048 with `k` up to 1024 does not sort the row: one
//! block per row finds the k-th (key, index) pair by radix select (8 bits a pass over
//! per-warp shared histograms; the row's keys in registers when 1024 threads hold
//! them, else read from global memory each pass), gathers the pairs
//! up to it and sorts only those (`SortParams::select` slots), so any row length
//! works (an LLM vocabulary of 128256) and the work is a few passes over the row.
//! Shorter rows, and a larger `k`, sort whole rows and store the first `k`.

use super::auto::pointwise::index_type;
use super::auto::{check_fusion, Plan};
use super::contract::{Analysis, Refusal, Scheduler, SchedulerError, SchedulerKind};
use super::info::RuntimeInfo;
use super::params::{CompileParams, HeuristicParams, LaunchParams, SortParams};
use super::unfit::Unfit;
use crate::codegen::sort_support::{sort_shared_bytes, topk_shared_bytes};
use crate::ir::{Fusion, IterKind, Op, ValId};
use crate::sched::{ScheduledFusion, SortLayout};

/// What the analysis found: the sort and its operand.
#[derive(Clone, Debug)]
pub(crate) struct SortPlan {
    fusion: Fusion,
    input: ValId,
    axis: usize,
    k: Option<i64>,
}

fn not_a_sort(why: impl Into<String>) -> Unfit {
    Unfit::NotASort { why: why.into() }
}

/// The compile-time check.
pub(crate) fn plan(fusion: &Fusion) -> Plan<SortPlan> {
    check_fusion(fusion)?;
    let live = fusion.live_exprs();
    let exprs: Vec<_> = fusion
        .exprs()
        .filter(|(id, _)| live[id.index()])
        .map(|(_, e)| e)
        .collect();
    let [e] = exprs.as_slice() else {
        return Err(not_a_sort(format!(
            "{} expressions (the sort kernel computes one sort)",
            exprs.len()
        )));
    };
    let Op::Sort { axis, k, .. } = e.op else {
        return Err(not_a_sort(format!("{} is not a sort", e.op.name())));
    };
    let input = e.inputs[0];
    if fusion.input_position(input).is_none() {
        return Err(not_a_sort("the sorted tensor is not a fusion input"));
    }
    if fusion.val(input).dtype.is_fp8() {
        return Err(not_a_sort("fp8 values"));
    }
    for o in fusion.outputs() {
        if !e.outputs.contains(&o.val) {
            return Err(not_a_sort(format!(
                "the output {} is not the sort's values or indices",
                o.val
            )));
        }
    }
    Ok(SortPlan {
        fusion: fusion.clone(),
        input,
        axis,
        k,
    })
}

/// The largest `k` a radix-select topk takes (its pairs are sorted in shared memory).
const MAX_SELECT: i64 = 1024;
/// The shortest row a topk selects in rather than sorting whole (shorter rows share a
/// block in the sort).
const SELECT_FROM: i64 = 2048;

/// Threads of a block sorting `tile` elements: one per pair, 32 to 1024.
fn threads_for(tile: i64) -> i64 {
    ((tile / 2).max(32) as u64).next_power_of_two().min(1024) as i64
}

/// The run-time check and the layout for these sizes.
pub(crate) fn heuristics(p: &SortPlan, info: &RuntimeInfo) -> Plan<SortParams> {
    let f = &p.fusion;
    let t = f
        .tensor_type(p.input)
        .ok_or(Unfit::NoReference { value: p.input })?;
    let mut sizes = Vec::new();
    for d in t.shape() {
        if d.kind == IterKind::Broadcast {
            sizes.push(1);
            continue;
        }
        sizes.push(info.eval(f, &d.extent).ok_or_else(|| Unfit::Unevaluated {
            extent: d.extent.clone(),
        })?);
    }
    let n = sizes[p.axis];
    let rows: i64 = sizes
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != p.axis)
        .map(|(_, &s)| s)
        .product();
    if n <= 0 || rows <= 0 {
        return Err(not_a_sort("an empty sort (the no-op scheduler takes it)"));
    }
    let pad = (n as u64).next_power_of_two() as i64;
    let key_bytes = if f.val(p.input).dtype.size_bytes() == 8 {
        8
    } else {
        4
    };
    let limit = i64::from(info.device.shared_memory_per_block);
    let compile = CompileParams {
        index_type: index_type(f, info),
        min_blocks_per_sm: None,
    };
    // A topk of a long row: radix select, one row per block, any length.
    if let Some(k) =
        p.k.filter(|&k| (1..=MAX_SELECT).contains(&k) && n >= SELECT_FROM)
    {
        let select = (k as u64).next_power_of_two() as i64;
        // Enough threads to keep the row's keys in registers (32 a thread, 16 for
        // 64-bit keys) where 1024 can.
        let items = if key_bytes == 8 { 16 } else { 32 };
        let threads = ((n + items - 1) / items).clamp(256, 1024);
        let threads = (threads as u64).next_power_of_two().min(1024) as i64;
        if rows > i64::from(info.device.max_grid_dim[0]) {
            return Err(Unfit::GridLimit {
                count: rows,
                what: "blocks of a topk".into(),
                axis: 'x',
            });
        }
        if topk_shared_bytes(key_bytes, select) <= limit {
            return Ok(SortParams {
                pad,
                rows_per_block: 1,
                threads,
                select,
                launch: LaunchParams {
                    grid: [rows, 1, 1],
                    block: [threads, 1, 1],
                },
                compile,
            });
        }
    }
    let rows_per_block = (1024 / pad).max(1);
    let threads = threads_for(pad * rows_per_block);
    let bytes = sort_shared_bytes(key_bytes, pad, rows_per_block);
    if bytes > limit {
        return Err(Unfit::SortRowTooLong {
            elements: n,
            bytes,
            limit,
        });
    }
    let blocks = super::auto::ceil_div(rows, rows_per_block);
    if blocks > i64::from(info.device.max_grid_dim[0]) {
        return Err(Unfit::GridLimit {
            count: blocks,
            what: "blocks of a sort".into(),
            axis: 'x',
        });
    }
    Ok(SortParams {
        pad,
        rows_per_block,
        threads,
        select: 0,
        launch: LaunchParams {
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
        },
        compile,
    })
}

/// The schedule: the fusion as it is, with the block-sort layout.
pub(crate) fn schedule(
    p: &SortPlan,
    params: &SortParams,
) -> Result<ScheduledFusion, SchedulerError> {
    let mut sf = ScheduledFusion::new(p.fusion.clone())?;
    sf.sort_layout(SortLayout {
        pad: params.pad,
        rows_per_block: params.rows_per_block,
        threads: params.threads,
        select: params.select,
    })?;
    Ok(sf)
}

/// One sort of a fusion input (see the module docs).
pub(crate) struct Sort;

impl Scheduler for Sort {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Sort
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        plan(fusion)
            .map(Analysis::new)
            .map_err(|reason| Refusal::Fusion { reason })
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        let p: &SortPlan = a.get().ok_or(Refusal::WrongAnalysis)?;
        heuristics(p, info)
            .map(HeuristicParams::Sort)
            .map_err(|reason| Refusal::Inputs { reason })
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Sort(_))
    }

    fn fits(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
        info: &RuntimeInfo,
    ) -> Result<(), SchedulerError> {
        let mismatch = |reason: String| SchedulerError::Mismatch {
            kind: SchedulerKind::Sort,
            reason,
        };
        let (Some(p), HeuristicParams::Sort(sp)) = (a.get::<SortPlan>(), params) else {
            return Err(mismatch(
                "the analysis or params of another scheduler".into(),
            ));
        };
        let t = p.fusion.tensor_type(p.input);
        let dim = t.and_then(|t| t.shape().nth(p.axis).cloned());
        if let Some(n) = dim.and_then(|d| info.eval(&p.fusion, &d.extent)) {
            if sp.select == 0 && n > sp.pad {
                return Err(mismatch(format!(
                    "rows of {n} elements, but the kernel holds rows of at most {}",
                    sp.pad
                )));
            }
        }
        Ok(())
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get::<SortPlan>(), params) {
            (Some(p), HeuristicParams::Sort(sp)) => schedule(p, sp),
            _ => Err(SchedulerError::NotApplicable {
                kind: SchedulerKind::Sort,
                reason: "the analysis or params of another scheduler".into(),
            }),
        }
    }
}
