//! Heuristic parameters: what each scheduler decided, as plain serde data.
//!
//! [`compute_heuristics`](super::compute_heuristics) returns them for a fusion and its
//! inputs; a user may print them, edit any field or load them from JSON, and
//! [`schedule_with`](super::schedule_with) applies them. [`HeuristicParams::validate`]
//! turns a field out of range into an error before anything is scheduled, so edited
//! params never produce a broken kernel: either they schedule, or they are refused with
//! the field named.

use serde::{Deserialize, Serialize};

use super::kind::SchedulerKind;
use crate::codegen::IndexType;

/// Options of the generated kernel that are not part of the schedule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileParams {
    /// Index arithmetic width: 32-bit unless a tensor has 2^31 elements or more.
    pub index_type: IndexType,
    /// Blocks that must fit on one SM at once (see
    /// [`crate::codegen::KernelOptions::min_blocks_per_sm`]); set by schedules that
    /// synchronize the grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_blocks_per_sm: Option<i64>,
}

/// The launch the parameters were computed for (informative: the kernel derives its
/// grid from the sizes of each call).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaunchParams {
    /// Blocks (x, y, z).
    pub grid: [i64; 3],
    /// Threads per block (x, y, z).
    pub block: [i64; 3],
}

/// Pointwise: the reference output's dims are merged into an outer and an inner part
/// around `break_point` (adjacent dims merge only where every tensor agrees on which are
/// broadcast); the inner part is split into `[blocks, unroll, threads, vectorize]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PointwiseParams {
    /// The first reference dim of the inner part: dims before it (merged where the
    /// tensors agree on broadcasts) are the outer part on `blockIdx.x`; it must lie in
    /// the innermost group of dims that merge.
    pub break_point: i64,
    /// Elements per vector load/store (1, 2, 4, 8 or 16; at most 16 bytes).
    pub vectorize: i64,
    /// Vector accesses per thread, outside the thread dim (1 to 16).
    pub unroll: i64,
    /// Threads per block (a multiple of 32, at most 1024).
    pub threads: i64,
    /// Of `threads`, how many take rows of the outer part (`threadIdx.y`, a power of
    /// two dividing `threads`): a block covers `threads_y` outer indices when the inner
    /// part is too short to keep `threads` threads busy (rope's 128-wide heads).
    #[serde(default = "one")]
    pub threads_y: i64,
    /// Serial steps over the group of dims bound to `blockIdx.z` (more than 1 when the
    /// group has more elements than the grid's z limit).
    #[serde(default = "one")]
    pub z_loops: i64,
    /// Rows of the outer part each thread takes, one after the other in an unrolled
    /// loop with their loads issued together (1 to 16): with a short inner part (rope's
    /// 128-wide heads, one vector per thread) a thread otherwise has one load in flight.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub rows_per_thread: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

fn one() -> i64 {
    1
}

fn is_one(v: &i64) -> bool {
    *v == 1
}

/// Inner reduction and inner persistent normalization: rows (the outer dims, merged)
/// onto blocks, the reduced innermost dims (merged) split into
/// `[grid_split, serial, threads_x, vectorize]`, `rows_per_block` rows per block on
/// `threadIdx.y`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReductionParams {
    /// Elements per vector load (1 to 16; at most 16 bytes).
    pub vectorize: i64,
    /// Threads along a row (`threadIdx.x`; a multiple of 32, at most 1024).
    pub threads_x: i64,
    /// Rows per block (`threadIdx.y`); `threads_x * rows_per_block` at most 1024.
    pub rows_per_block: i64,
    /// Serial iterations unrolled together (1 to 16).
    pub unroll: i64,
    /// Blocks that share one row (`blockIdx.y`); more than 1 is a grid reduction.
    pub grid_split: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// Outer reduction: the kept innermost dims split into `[blocks, threads_x]`, the
/// reduced outer dims reduced serially per thread in `unroll`-deep steps, split over
/// `grid_split` blocks (`blockIdx.y`) when there are too few columns.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OuterReductionParams {
    /// Threads per block over the kept dims (a multiple of 32, at most 1024).
    pub threads_x: i64,
    /// Threads per block over the reduced rows (`threadIdx.y`, a power of two; more
    /// than 1 is a block reduction over them). Absent in older serialized params: 1.
    #[serde(default = "one")]
    pub threads_y: i64,
    /// Serial reduced rows unrolled together (1 to 16).
    pub unroll: i64,
    /// Blocks that share one column (`blockIdx.y`); more than 1 is a grid reduction.
    pub grid_split: i64,
    /// Adjacent columns per thread (1, 2, 4, 8 or 16), read with one vector load per
    /// row and input, each with its own accumulator. Absent in older serialized params: 1.
    #[serde(default = "one")]
    pub vectorize: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// Inner persistent normalization: each row is read once into registers and kept there
/// across the reductions and the epilogue. The reduced extent is compiled in
/// (`hidden`), so the per-thread buffer (`batch × vectorize` elements) has a constant
/// size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PersistentParams {
    /// The reduced extent the kernel is compiled for (the product of the reduced dims).
    pub hidden: i64,
    /// Elements per vector access (1 to 16; at most 16 bytes).
    pub vectorize: i64,
    /// Threads along a row (a multiple of 32, at most 1024).
    pub threads_x: i64,
    /// Rows per block (`threadIdx.y`).
    pub rows_per_block: i64,
    /// Vector chunks each thread keeps: `ceil(hidden / (vectorize × threads_x))`.
    pub batch: i64,
    /// Keep only the rows of the inputs, in their own dtype, and recompute every
    /// intermediate from them where it is used (nvFuser's projection of persistent
    /// buffers to inputs): fewer registers than keeping the f32 intermediates (a bf16
    /// softmax row at 32K: one bf16 row instead of the f32 input and its `exp`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub project_to_inputs: bool,
    /// Inner-outer (outer reductions beside the rows'): the rows run in a serial loop
    /// over this many blocks, all resident at once (`compile.min_blocks_per_sm` per
    /// SM), and the outer reductions end in a grid all-reduce. 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_blocks: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// Transpose: output tiles of `tile × tile` staged through shared memory, read along the
/// input's innermost dim and written along the output's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TransposeParams {
    /// Tile edge (a multiple of 32, at most 64).
    pub tile: i64,
    /// Rows of threads per tile (`threadIdx.y`; divides `tile`).
    pub threads_y: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// Scan: rows (the scanned dim innermost) in tiles of `threads_x × chunk` elements,
/// one row per block; or, with `threads_x` 1, one serial scan per thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScanParams {
    /// Threads along the scanned dim (`threadIdx.x`, a multiple of 32); 1 for the
    /// column scan (one serial scan per thread).
    pub threads_x: i64,
    /// Consecutive elements each thread scans per tile.
    pub chunk: i64,
    /// Full-rank inputs and outputs move a chunk as one vector.
    pub vectorize: bool,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// Sort: each block sorts `rows_per_block` rows of up to `pad` elements (a power of
/// two) with `threads` threads in dynamic shared memory (see `scheduler::sort`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SortParams {
    /// Elements a row may hold: a power of two, at least the sorted dim's size.
    pub pad: i64,
    /// Rows sorted by one block.
    pub rows_per_block: i64,
    /// Threads of a block, 32 to 1024.
    pub threads: i64,
    /// Nonzero: a `topk` by radix select, one row per block, its `k` pairs sorted in a
    /// power of two `select` (see `sched::SortLayout::select`); 0: whole rows sorted.
    #[serde(default)]
    pub select: i64,
    /// Launch the parameters were computed for.
    pub launch: LaunchParams,
    /// Kernel options.
    pub compile: CompileParams,
}

/// The parameters of whichever scheduler took the fusion.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HeuristicParams {
    /// Nothing runs: outputs are inputs or views of them, or empty.
    NoOp,
    /// See [`PointwiseParams`].
    Pointwise(PointwiseParams),
    /// Inner reduction (see [`ReductionParams`]).
    Reduction(ReductionParams),
    /// Outer reduction (see [`OuterReductionParams`]).
    OuterReduction(OuterReductionParams),
    /// See [`PersistentParams`].
    InnerPersistent(PersistentParams),
    /// See [`TransposeParams`].
    Transpose(TransposeParams),
    /// See [`ScanParams`].
    Scan(ScanParams),
    /// See [`SortParams`].
    Sort(SortParams),
    /// The default (untuned) schedule.
    Default,
}

/// A parameter out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {scheduler} params: {field} = {value}; expected {expected}")]
pub struct InvalidParams {
    /// The scheduler whose params these are.
    pub scheduler: SchedulerKind,
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: i64,
    /// What it must be.
    pub expected: &'static str,
}

fn check(
    scheduler: SchedulerKind,
    field: &'static str,
    value: i64,
    ok: bool,
    expected: &'static str,
) -> Result<(), InvalidParams> {
    if ok {
        Ok(())
    } else {
        Err(InvalidParams {
            scheduler,
            field,
            value,
            expected,
        })
    }
}

/// The ranges fields of several schedulers share.
#[derive(Clone, Copy)]
enum Range {
    /// A vector width: a power of two up to 16 elements.
    Vector,
    /// Threads along x: a multiple of 32 up to 1024.
    Threads,
    /// An unroll factor: 1 to 16.
    Unroll,
    /// Blocks sharing a reduction: 1 to 65535 (a grid y dim).
    GridSplit,
}

impl Range {
    fn check(self, k: SchedulerKind, field: &'static str, v: i64) -> Result<(), InvalidParams> {
        let (ok, expected) = match self {
            Range::Vector => (
                (1..=16).contains(&v) && v & (v - 1) == 0,
                "1, 2, 4, 8 or 16",
            ),
            Range::Threads => (
                (32..=1024).contains(&v) && v % 32 == 0,
                "a multiple of 32 from 32 to 1024",
            ),
            Range::Unroll => ((1..=16).contains(&v), "1 to 16"),
            Range::GridSplit => ((1..=65535).contains(&v), "1 to 65535"),
        };
        check(k, field, v, ok, expected)
    }
}

impl HeuristicParams {
    /// The scheduler these params belong to.
    pub fn kind(&self) -> SchedulerKind {
        match self {
            HeuristicParams::NoOp => SchedulerKind::NoOp,
            HeuristicParams::Pointwise(_) => SchedulerKind::Pointwise,
            HeuristicParams::Reduction(_) | HeuristicParams::OuterReduction(_) => {
                SchedulerKind::Reduction
            }
            HeuristicParams::InnerPersistent(_) => SchedulerKind::InnerPersistent,
            HeuristicParams::Transpose(_) => SchedulerKind::Transpose,
            HeuristicParams::Scan(_) => SchedulerKind::Scan,
            HeuristicParams::Sort(_) => SchedulerKind::Sort,
            HeuristicParams::Default => SchedulerKind::Default,
        }
    }

    /// The same scheduler's most conservative params for the same call, tried before
    /// the default schedule when these fail to schedule or lower: for a scan, one
    /// serial scan per thread (no tiles, block scan, caches or unrolling), which lowers
    /// for any fusion the scan scheduler takes. `None` when there is nothing simpler.
    pub fn simplest(&self) -> Option<HeuristicParams> {
        match self {
            HeuristicParams::Scan(p) if p.threads_x > 1 || p.chunk > 1 => {
                Some(HeuristicParams::Scan(ScanParams {
                    threads_x: 1,
                    chunk: 1,
                    vectorize: false,
                    launch: LaunchParams {
                        grid: [0; 3],
                        block: [128, 1, 1],
                    },
                    compile: p.compile.clone(),
                }))
            }
            _ => None,
        }
    }

    /// True when both generate the same kernel: equal in every field but the
    /// informative launch dims (which follow the sizes of each call).
    pub fn same_kernel(&self, other: &HeuristicParams) -> bool {
        fn strip(p: &HeuristicParams) -> HeuristicParams {
            let mut p = p.clone();
            let none = LaunchParams {
                grid: [0; 3],
                block: [0; 3],
            };
            match &mut p {
                HeuristicParams::Pointwise(x) => x.launch = none,
                HeuristicParams::Reduction(x) => x.launch = none,
                HeuristicParams::OuterReduction(x) => x.launch = none,
                HeuristicParams::InnerPersistent(x) => x.launch = none,
                HeuristicParams::Transpose(x) => x.launch = none,
                HeuristicParams::Scan(x) => x.launch = none,
                HeuristicParams::Sort(x) => x.launch = none,
                HeuristicParams::NoOp | HeuristicParams::Default => {}
            }
            p
        }
        strip(self) == strip(other)
    }

    /// The kernel options, where the scheduler has any.
    pub fn compile(&self) -> Option<&CompileParams> {
        match self {
            HeuristicParams::Pointwise(p) => Some(&p.compile),
            HeuristicParams::Reduction(p) => Some(&p.compile),
            HeuristicParams::OuterReduction(p) => Some(&p.compile),
            HeuristicParams::InnerPersistent(p) => Some(&p.compile),
            HeuristicParams::Transpose(p) => Some(&p.compile),
            HeuristicParams::Scan(p) => Some(&p.compile),
            HeuristicParams::Sort(p) => Some(&p.compile),
            HeuristicParams::NoOp | HeuristicParams::Default => None,
        }
    }

    /// Checks every field's range (not yet whether they fit a fusion and its inputs:
    /// see [`check_fits`](super::check_fits)).
    pub fn validate(&self) -> Result<(), InvalidParams> {
        use Range::*;
        let k = self.kind();
        let at = |field, value, range: Range| range.check(k, field, value);
        let rows = |rows: i64, tx: i64| {
            check(
                k,
                "rows_per_block",
                rows,
                rows >= 1 && rows.checked_mul(tx).is_some_and(|n| n <= 1024),
                "at least 1, with threads_x × rows_per_block at most 1024",
            )
        };
        match self {
            HeuristicParams::Pointwise(p) => {
                check(
                    k,
                    "break_point",
                    p.break_point,
                    p.break_point >= 0,
                    "at least 0",
                )?;
                at("vectorize", p.vectorize, Vector)?;
                at("unroll", p.unroll, Unroll)?;
                at("threads", p.threads, Threads)?;
                check(
                    k,
                    "threads_y",
                    p.threads_y,
                    p.threads_y >= 1
                        && (p.threads_y as u64).is_power_of_two()
                        && p.threads % p.threads_y == 0,
                    "a power of two dividing threads",
                )?;
                check(k, "z_loops", p.z_loops, p.z_loops >= 1, "at least 1")?;
                check(
                    k,
                    "rows_per_thread",
                    p.rows_per_thread,
                    (1..=16).contains(&p.rows_per_thread),
                    "1 to 16",
                )
            }
            HeuristicParams::Reduction(p) => {
                at("vectorize", p.vectorize, Vector)?;
                at("threads_x", p.threads_x, Threads)?;
                rows(p.rows_per_block, p.threads_x)?;
                at("unroll", p.unroll, Unroll)?;
                at("grid_split", p.grid_split, GridSplit)
            }
            HeuristicParams::OuterReduction(p) => {
                at("threads_x", p.threads_x, Threads)?;
                at("vectorize", p.vectorize, Vector)?;
                check(
                    k,
                    "threads_y",
                    p.threads_y,
                    p.threads_y >= 1
                        && (p.threads_y as u64).is_power_of_two()
                        && p.threads_y.saturating_mul(p.threads_x) <= 1024,
                    "a power of two, with threads_x × threads_y at most 1024",
                )?;
                at("unroll", p.unroll, Unroll)?;
                at("grid_split", p.grid_split, GridSplit)
            }
            HeuristicParams::InnerPersistent(p) => {
                check(k, "hidden", p.hidden, p.hidden >= 1, "at least 1")?;
                at("vectorize", p.vectorize, Vector)?;
                at("threads_x", p.threads_x, Threads)?;
                rows(p.rows_per_block, p.threads_x)?;
                let chunks = super::auto::ceil_div(p.hidden, p.vectorize);
                let batch = super::auto::ceil_div(chunks, p.threads_x);
                check(
                    k,
                    "batch",
                    p.batch,
                    p.batch == batch,
                    "ceil(hidden / (vectorize × threads_x))",
                )?;
                check(
                    k,
                    "batch",
                    p.batch,
                    p.batch <= 64,
                    "at most 64 vector chunks per thread",
                )
            }
            HeuristicParams::Transpose(p) => {
                check(k, "tile", p.tile, p.tile == 32 || p.tile == 64, "32 or 64")?;
                check(
                    k,
                    "threads_y",
                    p.threads_y,
                    p.threads_y >= 1 && p.tile % p.threads_y == 0 && p.tile * p.threads_y <= 1024,
                    "a divisor of tile with tile × threads_y at most 1024",
                )
            }
            HeuristicParams::Scan(p) => {
                check(
                    k,
                    "threads_x",
                    p.threads_x,
                    p.threads_x == 1
                        || (p.threads_x % 32 == 0 && (32..=1024).contains(&p.threads_x)),
                    "1 (column scan) or a multiple of 32 up to 1024",
                )?;
                check(
                    k,
                    "chunk",
                    p.chunk,
                    (1..=64).contains(&p.chunk),
                    "1 to 64 elements",
                )?;
                check(
                    k,
                    "vectorize",
                    i64::from(p.vectorize),
                    !p.vectorize || [2, 4, 8, 16].contains(&p.chunk),
                    "a chunk of 2, 4, 8 or 16 elements when set",
                )
            }
            HeuristicParams::Sort(p) => {
                check(
                    k,
                    "pad",
                    p.pad,
                    p.pad >= 1 && (p.pad as u64).is_power_of_two(),
                    "a power of two",
                )?;
                check(
                    k,
                    "rows_per_block",
                    p.rows_per_block,
                    p.rows_per_block >= 1,
                    "at least 1",
                )?;
                check(
                    k,
                    "threads",
                    p.threads,
                    (32..=1024).contains(&p.threads),
                    "32 to 1024",
                )?;
                check(
                    k,
                    "select",
                    p.select,
                    p.select == 0
                        || (p.select > 0
                            && (p.select as u64).is_power_of_two()
                            && p.select <= 4096
                            && p.rows_per_block == 1),
                    "0, or a power of two up to 4096 with one row per block",
                )
            }
            HeuristicParams::NoOp | HeuristicParams::Default => Ok(()),
        }
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}
