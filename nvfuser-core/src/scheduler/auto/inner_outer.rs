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
/// inner reductions: plain reductions (not the Welford family) over exactly the dims
/// the inner reductions keep, of a tensor not computed from any reduction, whose results
/// feed only elementwise math of their own rank (with fusion inputs and scalars) up to
/// fusion outputs that nothing else reads. Empty when there is no inner reduction, a
/// creation op, or any of this does not hold (the caller's analysis then refuses the
/// fusion as before). One pass in the fusion's (topological) expression order.
pub(crate) fn find_columns(f: &Fusion) -> Columns {
    let live = f.live_exprs();
    let rank_of = |v: ValId| f.tensor_type(v).map_or(0, |t| t.domain.len());
    let mut inner: Option<(usize, usize)> = None;
    let mut outer: Vec<(ValId, usize, usize)> = Vec::new();
    let mut derived: Vec<ValId> = Vec::new();
    // Values computed from some reduction (their column sums would run a row's loops
    // inside their own: the sum of `dx`).
    let mut reduced: BTreeSet<ValId> = BTreeSet::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        // Not yet with creation ops (dropout's mask beside a column sum failed on the
        // GPU when first tried): such fusions are segmented as before.
        if e.op.is_creation() {
            return Columns::default();
        }
        let column_input = e
            .inputs
            .iter()
            .any(|i| derived.contains(i) || outer.iter().any(|o| o.0 == *i));
        let from_reduction = e.inputs.iter().any(|i| reduced.contains(i));
        let out = e.outputs[0];
        if let Some(axes) = reduction_axes(&e.op) {
            let (r, k) = (rank_of(out), axes.len());
            let suffix = k > 0 && axes.iter().enumerate().all(|(i, &a)| a + k == r + i);
            let prefix = k > 0 && axes.iter().enumerate().all(|(i, &a)| a == i);
            if column_input {
                return Columns::default();
            } else if suffix {
                inner.get_or_insert((r, k));
            } else if prefix && matches!(e.op, Op::Reduction { .. }) && !from_reduction {
                outer.push((out, r, k));
            } else {
                return Columns::default();
            }
            reduced.extend(e.outputs.iter().copied());
        } else if column_input {
            // Elementwise math of the columns' rank whose other operands are fusion
            // inputs (a `[H]` tensor, a scalar) or columns.
            let operands_ok = e.inputs.iter().all(|&i| {
                derived.contains(&i)
                    || outer.iter().any(|o| o.0 == i)
                    || (f.input_position(i).is_some() && rank_of(i) <= rank_of(out))
                    || !f.val(i).is_tensor()
            });
            if !is_pointwise(&e.op) || e.outputs.len() != 1 || !operands_ok {
                return Columns::default();
            }
            derived.push(out);
        } else if from_reduction {
            reduced.extend(e.outputs.iter().copied());
        }
    }
    let Some((rank, k)) = inner else {
        return Columns::default();
    };
    let shapes_ok = outer.iter().all(|&(_, r, m)| r == rank && m + k == rank)
        && derived.iter().all(|&d| rank_of(d) == k);
    if outer.is_empty() || !shapes_ok {
        return Columns::default();
    }
    // An output that column math reads again would be stored and read back.
    let uses = f.uses();
    let outer: Vec<ValId> = outer.into_iter().map(|o| o.0).collect();
    for &v in outer.iter().chain(&derived) {
        let read = uses[v.index()].iter().any(|u| live[u.index()]);
        if read && f.outputs().iter().any(|o| o.val == v) {
            return Columns::default();
        }
    }
    Columns { outer, derived }
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
pub(crate) fn resident_grid(info: &RuntimeInfo, threads: i64, regs: i64, rows: i64) -> (i64, i64) {
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

/// Column sums need the rows merged into one dim (the row grid takes `blockIdx.x`
/// alone): not beside rows split over `blockIdx.x` and `blockIdx.y`.
pub(crate) fn check(cols: &Columns, split_rows: bool) -> Plan<()> {
    if !cols.is_empty() && split_rows {
        return Err(crate::scheduler::unfit::Unfit::ColumnsWithSplitRows { sum: cols.outer[0] });
    }
    Ok(())
}
