//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) with pointwise math before and after
//! them, in one kernel.
//!
//! Accepted: every live scan scans the same axis `a` of rank-`r` tensors; every other
//! live expression is pointwise math, a cast, or a broadcast/expand of a fusion input;
//! every computed tensor has rank `r`. Two forms (see `codegen::lower::scan` for the
//! code they lower to):
//! - **row scan** (`a` is the innermost dim): the kept dims are merged onto
//!   `blockIdx.x`, one row per block; the row is cut into tiles of
//!   `threads_x × chunk` elements, `[rows, tiles, threadIdx.x, chunk]`. Full-rank
//!   inputs are loaded into registers a chunk at a time (16-byte vectors when the
//!   layout allows), each thread scans its chunk, a block scan joins the threads, and
//!   a carry joins the tiles. Consumers of a scan are computed per tile after it, and
//!   outputs are stored from registers (vectors when allowed).
//! - **column scan** (any other axis): the kept dims are merged onto
//!   `[blockIdx.x, threadIdx.x]`, one scan per thread over a serial loop innermost, so
//!   consecutive threads read consecutive elements when the innermost dim is kept.
//!   Everything is inlined into that loop.

use super::pointwise::index_type;
use super::{ceil_div, check_fusion, pow2_dividing, round_up, tensor_inputs, vector_limit, Plan};
use crate::ir::{Fusion, Op, ValId};
use crate::sched::{ParallelType, ScheduleError, ScheduledFusion};
use crate::scheduler::analysis::is_pointwise;
use crate::scheduler::info::RuntimeInfo;
use crate::scheduler::params::{CompileParams, LaunchParams, ScanParams};
use crate::scheduler::unfit::{Takes, Unfit};

/// Threads per block of the column scan.
const COLUMN_THREADS: i64 = 128;

/// Bytes the column scan keeps in flight across the GPU (a few MiB cover an H100's
/// latency-bandwidth product).
const COLUMN_BYTES_IN_FLIGHT: i64 = 4 << 20;

pub(crate) struct ScanPlan {
    pub fusion: Fusion,
    /// The rank of every computed tensor.
    pub rank: usize,
    /// The scanned axis.
    pub axis: usize,
    /// The output: the schedule's reference, whose sizes the heuristics read (a scan may
    /// be broadcast in dims the output has).
    pub output: ValId,
}

pub(crate) fn plan(fusion: &Fusion) -> Plan<ScanPlan> {
    check_fusion(fusion)?;
    let live = fusion.live_exprs();
    let mut shape: Option<(usize, usize)> = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let rank = fusion.tensor_type(out).map_or(0, |t| t.rank());
        match &e.op {
            Op::Scan { axis, .. } => match shape {
                None => shape = Some((rank, *axis)),
                Some(s) if s != (rank, *axis) => {
                    return Err(Unfit::ScanAxes {
                        tensor: out,
                        axis: *axis,
                        rank,
                        first: s,
                    })
                }
                Some(_) => {}
            },
            Op::Broadcast { .. } | Op::Expand { .. }
                if fusion.input_position(e.inputs[0]).is_none() =>
            {
                return Err(Unfit::Op {
                    op: format!("{} of the computed value {}", e.op.name(), e.inputs[0]),
                    takes: Takes::PointwiseAndScans,
                });
            }
            op if is_pointwise(op) && !matches!(op, Op::SegmentSet) => {}
            other => {
                return Err(Unfit::Op {
                    op: other.name().into(),
                    takes: Takes::PointwiseAndScans,
                })
            }
        }
    }
    let Some((rank, axis)) = shape else {
        return Err(Unfit::NoScan);
    };
    // One loop nest: every tensor is computed inside the serial loop of the tiles (rows)
    // or of the scanned dim (columns), which two outputs would each have their own of.
    let [output] = super::distinct_outputs(fusion)[..] else {
        return Err(Unfit::SeveralOutputs);
    };
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let r = fusion.tensor_type(out).map_or(0, |t| t.rank());
        if r != rank {
            return Err(Unfit::TensorRank {
                tensor: out,
                rank: r,
                full: rank,
                reduced: rank,
            });
        }
    }
    Ok(ScanPlan {
        fusion: fusion.clone(),
        rank,
        axis,
        output,
    })
}

/// True when the scanned axis is the innermost dim: the row scan.
fn is_row_scan(p: &ScanPlan) -> bool {
    p.axis + 1 == p.rank
}

/// The sizes of the reference (the first scan's output) for this call.
fn sizes(p: &ScanPlan, info: &RuntimeInfo) -> Plan<Vec<i64>> {
    let t = p
        .fusion
        .tensor_type(p.output)
        .ok_or(Unfit::NoReference { value: p.output })?;
    t.shape()
        .map(|d| {
            if d.kind == crate::ir::IterKind::Broadcast {
                return Ok(1);
            }
            info.eval(&p.fusion, &d.extent)
                .ok_or_else(|| Unfit::Unevaluated {
                    extent: d.extent.clone(),
                })
        })
        .collect()
}

/// The widest vector every full-rank input and output allows along the scanned row.
fn vector_width(p: &ScanPlan, info: &RuntimeInfo, row: i64) -> i64 {
    let f = &p.fusion;
    let full = |v: ValId| f.tensor_type(v).is_some_and(|t| t.rank() == p.rank);
    let bytes = f
        .inputs()
        .iter()
        .copied()
        .chain(f.outputs().iter().map(|o| o.val))
        .filter(|&v| full(v))
        .map(|v| f.val(v).dtype.size_bytes() as i64)
        .max()
        .unwrap_or(4);
    let mut v = pow2_dividing(row.max(1), (16 / bytes).max(1));
    for (i, t) in tensor_inputs(f, info) {
        if full(i) && t.sizes.last().is_some_and(|&s| s > 1) {
            v = v.min(vector_limit(t, row, v));
            // The declaration, not only this call, must promise a dense innermost dim.
            if !f.tensor_type(i).is_some_and(super::vector_readable) {
                v = 1;
            }
        }
    }
    // Outputs are allocated dense and aligned by the executor.
    v
}

pub(crate) fn heuristics(p: &ScanPlan, info: &RuntimeInfo) -> Plan<ScanParams> {
    let sizes = sizes(p, info)?;
    let scanned = sizes[p.axis];
    let kept: i64 = sizes
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != p.axis)
        .map(|(_, &s)| s)
        .product();
    let compile = CompileParams {
        index_type: index_type(&p.fusion, info),
        min_blocks_per_sm: None,
    };
    if !is_row_scan(p) {
        let blocks = ceil_div(kept, COLUMN_THREADS).max(1);
        check_grid(blocks, info)?;
        return Ok(ScanParams {
            threads_x: 1,
            chunk: column_unroll(p, kept, scanned),
            vectorize: false,
            launch: LaunchParams {
                grid: [blocks, 1, 1],
                block: [COLUMN_THREADS, 1, 1],
            },
            compile,
        });
    }
    let v = vector_width(p, info, scanned);
    // Four elements per thread even where vectors are not allowed (scalar loads, still
    // several in flight); 16 bytes per thread where they are.
    let chunk = v.max(4);
    let threads_x = round_up(ceil_div(scanned.max(1), chunk), 32).clamp(32, 512);
    let rows = kept.max(1);
    check_grid(rows, info)?;
    Ok(ScanParams {
        threads_x,
        chunk,
        vectorize: v == chunk && v > 1,
        launch: LaunchParams {
            grid: [rows, 1, 1],
            block: [threads_x, 1, 1],
        },
        compile,
    })
}

/// Elements of its column a thread loads ahead of scanning them: 8, or up to 32 where
/// few columns (threads) would keep too few bytes in flight; 1 for a short column.
fn column_unroll(p: &ScanPlan, columns: i64, scanned: i64) -> i64 {
    let bytes = p
        .fusion
        .inputs()
        .iter()
        .filter(|&&i| p.fusion.val(i).is_tensor())
        .map(|&i| p.fusion.val(i).dtype.size_bytes() as i64)
        .max()
        .unwrap_or(4);
    let want = ceil_div(COLUMN_BYTES_IN_FLIGHT, columns.max(1).saturating_mul(bytes));
    let mut u = 8;
    while u < 32 && u < want {
        u *= 2;
    }
    if scanned < u {
        u = if scanned >= 8 { 8 } else { 1 };
    }
    u
}

fn check_grid(blocks: i64, info: &RuntimeInfo) -> Plan<()> {
    if blocks > i64::from(info.device.max_grid_dim[0]) {
        return Err(Unfit::GridLimit {
            count: blocks,
            what: "blocks of a scan".into(),
            axis: 'x',
        });
    }
    Ok(())
}

/// The tensors the schedule treats alike.
struct Roles {
    /// Register copies of full-rank inputs, loaded a chunk at a time.
    loads: Vec<ValId>,
    /// Register tensors outputs are stored from.
    stores: Vec<ValId>,
    /// Every computed tensor (the caches included).
    all: Vec<ValId>,
}

fn roles(
    p: &ScanPlan,
    params: &ScanParams,
    s: &mut ScheduledFusion,
) -> Result<Roles, ScheduleError> {
    let f = &p.fusion;
    let row = is_row_scan(p);
    let mut loads = Vec::new();
    let mut stores = Vec::new();
    // Outputs other expressions read: those readers take a register copy.
    s.fork_read_outputs(|_| true)?;
    if row || params.chunk > 1 {
        for &i in f.inputs() {
            let full = f.tensor_type(i).is_some_and(|t| {
                t.rank() == p.rank && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
            });
            if full && !s.schedule().uses(i).is_empty() {
                loads.push(s.cache_after(i)?);
            }
        }
    }
    if row {
        let outs: Vec<ValId> = super::distinct_outputs(f);
        for o in outs {
            // The output becomes the store; its definition moves to a register copy.
            s.cache_before(o)?;
            stores.push(o);
        }
    }
    let all: Vec<ValId> = s
        .schedule()
        .tensors
        .keys()
        .copied()
        .filter(|&v| !s.schedule().is_input(v))
        .collect();
    Ok(Roles { loads, stores, all })
}

pub(crate) fn schedule(
    p: &ScanPlan,
    params: &ScanParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let mut s = ScheduledFusion::new(p.fusion.clone())?;
    let Roles { loads, stores, all } = roles(p, params, &mut s)?;
    // The reference: the output, which every computed tensor feeds and which has every
    // dim they have; a scan of a value broadcast in some kept dims would give the
    // merged rows too few elements (fuzz seed 477 of CI's run).
    let reference = p.output;
    let rank = p.rank;
    let a = p.axis;
    // Kept dims first (in order), the scanned dim last.
    let order: Vec<i64> = (0..rank)
        .filter(|&i| i != a)
        .chain([a])
        .map(|i| i as i64)
        .collect();
    if a + 1 != rank {
        s.reorder(reference, &order)?;
    }
    let kept = rank - 1;
    for _ in 1..kept {
        s.merge(reference, 0)?;
    }
    let lead = usize::from(kept > 0);
    if params.threads_x > 1 {
        // [K, C] -> [K, C/chunk, chunk] -> [K, tiles, threadIdx.x, chunk].
        s.split(reference, lead as i64, params.chunk)?;
        s.split(reference, lead as i64, params.threads_x)?;
        if lead == 1 {
            s.parallelize(reference, 0, ParallelType::BIDx)?;
        }
        s.parallelize(reference, lead as i64 + 1, ParallelType::TIDx)?;
    } else {
        // [K, C] -> [K/threads, threads, C/unroll, unroll], one scan per thread.
        if lead == 1 {
            s.split(reference, 0, params.launch.block[0].max(1))?;
            s.parallelize(reference, 0, ParallelType::BIDx)?;
            s.parallelize(reference, 1, ParallelType::TIDx)?;
        }
        if params.chunk > 1 {
            s.split(reference, -1, params.chunk)?;
            s.parallelize(reference, -1, ParallelType::Unroll)?;
        }
    }
    let others: Vec<ValId> = all.iter().copied().filter(|&t| t != reference).collect();
    if !others.is_empty() {
        s.transform_like(reference, &others)?;
        s.parallelize_like(reference, &others)?;
    }
    if params.threads_x > 1 && params.chunk > 1 {
        let last = |s: &ScheduledFusion, t: ValId| s.schedule().tensors[&t].domain.loop_dims.len();
        for &t in &all {
            let n = last(&s, t) as i64 - 1;
            let vector = params.vectorize && (loads.contains(&t) || stores.contains(&t));
            let pt = if vector {
                ParallelType::Vectorize
            } else {
                ParallelType::Unroll
            };
            s.parallelize(t, n, pt)?;
        }
    }
    s.inline_most()?;
    if params.threads_x > 1 {
        // Each load fills its chunk in a loop of its own (as a vector load does): one
        // inlined into the chunk loop of the math after the scan would open that loop
        // before the scan's, which the scan then closes (fuzz seed 12838).
        let thread_pos = lead + 2;
        for &load in &loads {
            let ca = s.schedule().tensors[&load].compute_at;
            if let Some(ca) = ca.filter(|c| c.pos > thread_pos) {
                s.compute_at(load, ca.consumer, thread_pos)?;
            }
        }
    }
    if params.threads_x == 1 && params.chunk > 1 {
        load_columns_ahead(&mut s, &loads)?;
    }
    Ok(s)
}

/// The column scan's loads of each unrolled group of elements in a loop of their own,
/// ahead of the scan (the scan's running value depends on the previous element; the
/// loads do not, so they are all in flight at once). A load read by more than one
/// expression stays inlined.
fn load_columns_ahead(s: &mut ScheduledFusion, loads: &[ValId]) -> Result<(), ScheduleError> {
    for &load in loads {
        let sched = s.schedule();
        let uses = sched.uses(load);
        let [u] = uses[..] else {
            continue;
        };
        let consumer = sched.exprs[u].output;
        let unroll_axis = sched.tensors[&consumer].domain.loop_dims.len() - 1;
        s.compute_at(load, consumer, unroll_axis)?;
        s.hoist(load)?;
    }
    Ok(())
}
