//! Inner-outer persistent normalizations: a norm backward's `dx` (inner reductions over
//! each row, the row kept in registers) and its `dw`/`db` (outer reductions over the
//! rows) in one kernel, each input read once.
//!
//! The rows run in a serial loop over a fixed grid of `row_blocks` blocks (`row =
//! serial * row_blocks + blockIdx.x`), every block resident at once. Each outer
//! reduction keeps one accumulator per element of the thread's share of the row
//! (`batch × vectorize`) in registers across that loop: it runs its reduction loops in
//! the reference's row loop (`compute_with`), so the column sums see each row while it
//! is in registers. After the loop a grid all-reduce (`nvf_grid_allreduce_group`:
//! partials to a work buffer, a grid barrier, every block combining a share of the
//! columns, a second barrier) gives every block the sums, and block 0 stores what the
//! column math computes from them (casts to bf16, sums of sums). No atomics: the result
//! does not depend on the order blocks run in. The kernel is launched cooperatively.
//!
//! *Column tensors* are the outer reductions' results and everything computed from
//! them; they must not flow back into the rows (batch norm's normalization of its own
//! statistics is not this shape).

use std::collections::BTreeSet;

use super::{ceil_div, Plan};
use crate::ir::{Fusion, Op, ValId};
use crate::sched::{ParallelType, ScheduleError, ScheduledFusion};
use crate::scheduler::analysis::{is_pointwise, reduction_axes};
use crate::scheduler::info::RuntimeInfo;

/// The outer reductions of a fusion with inner reductions, and the column tensors.
#[derive(Clone, Debug, Default)]
pub(crate) struct Columns {
    /// Reductions over the leading (row) dims of full-rank tensors.
    pub outer: Vec<ValId>,
    /// Tensors computed from them (rank `k`, the reduced dims of the inner reductions).
    pub derived: Vec<ValId>,
}

impl Columns {
    pub(crate) fn is_empty(&self) -> bool {
        self.outer.is_empty()
    }

    /// Whether `v` is an outer reduction or computed from one.
    pub(crate) fn contains(&self, v: ValId) -> bool {
        self.outer.contains(&v) || self.derived.contains(&v)
    }
}

/// Finds the outer reductions of `f` that an inner-outer schedule takes beside its
/// inner reductions: plain reductions (not the Welford family) of a full-rank tensor over
/// exactly the dims the inner reductions keep, whose results feed only elementwise math
/// of their own rank (with fusion inputs and scalars) up to fusion outputs. Empty when
/// there is no inner reduction or any of this does not hold (the caller's analysis then
/// refuses the fusion as before).
pub(crate) fn find_columns(f: &Fusion) -> Columns {
    let live = f.live_exprs();
    let rank_of = |v: ValId| f.tensor_type(v).map_or(0, |t| t.domain.len());
    let mut inner: Option<(usize, usize)> = None;
    let mut candidates: Vec<(ValId, usize, usize)> = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        // Not yet with creation ops (dropout's mask beside a column sum failed on the
        // GPU when first tried): such fusions are segmented as before.
        if e.op.is_creation() {
            return Columns::default();
        }
        let Some(axes) = reduction_axes(&e.op) else {
            continue;
        };
        let r = rank_of(e.outputs[0]);
        let k = axes.len();
        let suffix = k > 0 && axes.iter().enumerate().all(|(i, &a)| a + k == r + i);
        let prefix = k > 0 && axes.iter().enumerate().all(|(i, &a)| a == i);
        if suffix {
            inner.get_or_insert((r, k));
        } else if prefix && matches!(e.op, Op::Reduction { .. }) {
            candidates.push((e.outputs[0], r, k));
        } else {
            return Columns::default();
        }
    }
    let Some((rank, k)) = inner else {
        return Columns::default();
    };
    if candidates.is_empty()
        || candidates
            .iter()
            .any(|&(_, r, m)| r != rank || m + k != rank)
    {
        return Columns::default();
    }
    let outer: Vec<ValId> = candidates.iter().map(|c| c.0).collect();
    // A column sum of something computed from a row's reduction (the sum of `dx`) would
    // run the row's loops inside its own: not taken.
    if outer.iter().any(|&o| depends_on_reduction(f, o)) {
        return Columns::default();
    }
    let uses = f.uses();
    let outputs: BTreeSet<ValId> = f.outputs().iter().map(|o| o.val).collect();
    let mut derived: Vec<ValId> = Vec::new();
    let mut stack = outer.clone();
    while let Some(v) = stack.pop() {
        for u in &uses[v.index()] {
            if !live[u.index()] {
                continue;
            }
            let e = f.expr(*u);
            let o = e.outputs[0];
            if derived.contains(&o) {
                continue;
            }
            // Elementwise math of the columns' rank whose other operands are fusion
            // inputs (a `[H]` tensor or a scalar) or columns.
            let fits = is_pointwise(&e.op)
                && e.outputs.len() == 1
                && rank_of(o) == k
                && e.inputs.iter().all(|&i| {
                    outer.contains(&i)
                        || derived.contains(&i)
                        || stack.contains(&i)
                        || (f.input_position(i).is_some() && rank_of(i) <= k)
                        || !f.val(i).is_tensor()
                });
            if !fits {
                return Columns::default();
            }
            derived.push(o);
            stack.push(o);
        }
    }
    // An output that column math reads again would be stored and read back.
    for &v in outer.iter().chain(&derived) {
        if outputs.contains(&v) && uses[v.index()].iter().any(|u| live[u.index()]) {
            return Columns::default();
        }
    }
    Columns { outer, derived }
}

/// Whether the input of reduction `o` is computed from another reduction.
fn depends_on_reduction(f: &Fusion, o: ValId) -> bool {
    let mut defs = std::collections::HashMap::new();
    for (_, e) in f.exprs() {
        for &out in &e.outputs {
            defs.insert(out, e);
        }
    }
    let Some(def) = defs.get(&o) else {
        return false;
    };
    let mut stack: Vec<ValId> = def.inputs.to_vec();
    let mut seen = BTreeSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let Some(e) = defs.get(&v) {
            if reduction_axes(&e.op).is_some() {
                return true;
            }
            stack.extend(e.inputs.iter().copied());
        }
    }
    false
}

/// Registers per thread the outer reductions' accumulators take.
pub(crate) fn accumulator_registers(f: &Fusion, cols: &Columns, elements: i64) -> i64 {
    cols.outer
        .iter()
        .map(|&v| elements * ceil_div(f.val(v).dtype.size_bytes() as i64, 4))
        .sum()
}

/// The grid of an inner-outer kernel: `(row_blocks, blocks_per_sm)`. Blocks per SM from
/// the registers a thread needs (`regs`, kept rows and accumulators, plus the math's
/// own), at most 8 and at most 2048 threads per SM; never more blocks than rows.
pub(crate) fn row_grid(info: &RuntimeInfo, threads: i64, regs: i64, rows: i64) -> (i64, i64) {
    let d = &info.device;
    let per_thread = (regs + 40).clamp(32, 255);
    let by_regs = d.registers_per_sm as i64 / (per_thread * threads).max(1);
    let by_threads = d.max_threads_per_sm as i64 / threads.max(1);
    let b = by_regs.min(by_threads).clamp(1, 8);
    let sm = (d.sm_count as i64).max(1);
    let g = (sm * b).min(rows.max(1));
    (g, b)
}

/// Rows per block below which the segmented plan (row kernel, then column kernel) was
/// faster on an H200 (RMSNorm backward [8192, 4096], 15 rows per block: 157 us).
const MIN_ROWS_PER_BLOCK: i64 = 32;

/// Refuses shapes where the inner-outer kernel loses to two kernels: more than one
/// column sum (LayerNorm backward's `dw` and `db`: [8192, 4096] took 294 us on an H200,
/// [65536, 4096] 860 us, where two kernels take about 158 and 860), or fewer than
/// [`MIN_ROWS_PER_BLOCK`] rows per block (the grid all-reduce is not amortized).
pub(crate) fn check_shape(cols: &Columns, rows: i64, blocks: i64) -> Plan<()> {
    if cols.outer.len() > 1 || rows < MIN_ROWS_PER_BLOCK * blocks {
        return Err(crate::scheduler::unfit::Unfit::InnerOuterShape {
            sums: cols.outer.len(),
            rows,
            blocks,
            min_rows: MIN_ROWS_PER_BLOCK,
        });
    }
    Ok(())
}

/// Schedules the column tensors as the reduced part of the reference (`[batch, tx, v]`
/// over the `k` dims merged, no row loops): `threadIdx.x` and a serial, unrolled
/// remainder, so each thread reads the accumulators it owns.
pub(crate) fn schedule_columns(
    s: &mut ScheduledFusion,
    cols: &[ValId],
    k: usize,
    v: i64,
    tx: i64,
) -> Result<(), ScheduleError> {
    for &tv in cols {
        if !s.schedule().tensors.contains_key(&tv) {
            continue;
        }
        s.split(tv, k as i64 - 1, v)?;
        for _ in 1..k {
            s.merge(tv, 0)?;
        }
        s.split(tv, 0, tx)?;
        s.parallelize(tv, 0, ParallelType::Unroll)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
        s.parallelize(tv, 2, ParallelType::Unroll)?;
    }
    Ok(())
}

/// The outer reductions as the schedule keeps them, in registers (an output's
/// definition writes a register copy, `cache_before`, and the output stores it), and
/// the column tensors to schedule as columns (those outputs and the derived tensors).
pub(crate) fn cache_outputs(
    f: &Fusion,
    s: &mut ScheduledFusion,
    cols: &Columns,
) -> Result<(Vec<ValId>, Vec<ValId>), ScheduleError> {
    let mut reds = Vec::new();
    let mut columns = Vec::new();
    for &o in &cols.outer {
        if f.outputs().iter().any(|x| x.val == o) {
            reds.push(s.cache_before(o)?);
            columns.push(o);
        } else {
            reds.push(o);
        }
    }
    columns.extend(cols.derived.iter().copied());
    Ok((reds, columns))
}

/// Checks the plan's extra conditions: no split rows (the row grid takes `blockIdx.x`
/// alone), and outer reductions present.
pub(crate) fn check(cols: &Columns, split_rows: bool) -> Plan<()> {
    if !cols.is_empty() && split_rows {
        return Err(crate::scheduler::unfit::Unfit::MixedRowBroadcast {
            tensor: cols.outer[0],
        });
    }
    Ok(())
}
