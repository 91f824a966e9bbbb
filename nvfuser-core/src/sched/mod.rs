//! Scheduling primitives: per-tensor loop domains derived by recorded transforms.
//!
//! A [`ScheduledFusion`] owns a plain [`Fusion`] (never modified) and a [`Schedule`]:
//! the kernel's own graph of tensors and expressions (initially the fusion's live
//! expressions; `cache_after`, `cache_before` and `rfactor` add copies and partial
//! reductions that do not change the fusion's meaning) and, per tensor, a
//! [`TensorDomain`]: its root dims, its logical dims and a loop domain derived from
//! them by [`DomTransform`]s (split, merge), plus parallel types, memory type and
//! compute-at position.
//!
//! Every primitive call is also recorded as a [`Primitive`] (plain serde data), so a
//! schedule can be printed, compared, serialized and replayed onto the same fusion
//! with [`ScheduledFusion::replay`]. Tensors the schedule adds get ids after the
//! fusion's values, in call order, so a replay gives the same ids.

mod cache;
mod domain;
mod error;
mod inline;
mod ops;
mod print;
mod propagate;
mod recompute;
mod validate;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use domain::{Dom, DomId, DomTransform, TensorDomain};
pub use error::{SchedResult, ScheduleError};
pub(crate) use recompute::{is_recomputable, is_resize, reads_elsewhere};
pub(crate) use validate::is_grouped;
pub use validate::{validate, STATIC_SHARED_LIMIT};

use crate::dtype::DataType;
use crate::ir::{Extent, Fusion, Op, ValId, ValKind};

/// What a loop dim is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ParallelType {
    /// An ordinary `for` loop.
    Serial,
    /// `blockIdx.x`.
    BIDx,
    /// `blockIdx.y`.
    BIDy,
    /// `blockIdx.z`.
    BIDz,
    /// `threadIdx.x`.
    TIDx,
    /// `threadIdx.y`.
    TIDy,
    /// `threadIdx.z`.
    TIDz,
    /// One vector access (the innermost dim of a copy).
    Vectorize,
    /// A fully unrolled loop.
    Unroll,
}

impl ParallelType {
    /// The grid and block types, in launch order.
    pub const THREAD_TYPES: [ParallelType; 6] = [
        ParallelType::BIDx,
        ParallelType::BIDy,
        ParallelType::BIDz,
        ParallelType::TIDx,
        ParallelType::TIDy,
        ParallelType::TIDz,
    ];

    /// True for grid and block dims (no loop is generated for them).
    pub fn is_thread(self) -> bool {
        Self::THREAD_TYPES.contains(&self)
    }

    /// True for `threadIdx.*`.
    pub fn is_tid(self) -> bool {
        matches!(
            self,
            ParallelType::TIDx | ParallelType::TIDy | ParallelType::TIDz
        )
    }

    /// True for `blockIdx.*`.
    pub fn is_bid(self) -> bool {
        matches!(
            self,
            ParallelType::BIDx | ParallelType::BIDy | ParallelType::BIDz
        )
    }

    /// The CUDA builtin (`blockIdx.x`), for thread types.
    pub fn cuda_index(self) -> Option<&'static str> {
        Some(match self {
            ParallelType::BIDx => "blockIdx.x",
            ParallelType::BIDy => "blockIdx.y",
            ParallelType::BIDz => "blockIdx.z",
            ParallelType::TIDx => "threadIdx.x",
            ParallelType::TIDy => "threadIdx.y",
            ParallelType::TIDz => "threadIdx.z",
            _ => return None,
        })
    }

    /// Short name used in printed domains (`S`, `BIDx`, `V`, `U`).
    pub fn short(self) -> &'static str {
        match self {
            ParallelType::Serial => "S",
            ParallelType::BIDx => "BIDx",
            ParallelType::BIDy => "BIDy",
            ParallelType::BIDz => "BIDz",
            ParallelType::TIDx => "TIDx",
            ParallelType::TIDy => "TIDy",
            ParallelType::TIDz => "TIDz",
            ParallelType::Vectorize => "V",
            ParallelType::Unroll => "UR",
        }
    }
}

impl fmt::Display for ParallelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cuda_index() {
            Some(s) => f.write_str(s),
            None => write!(f, "{self:?}"),
        }
    }
}

/// Where a tensor lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemoryType {
    /// Registers (per thread).
    Local,
    /// Shared memory (per block).
    Shared,
    /// Global memory.
    Global,
}

impl MemoryType {
    /// The suffix of printed tensor names (`T3_l`).
    pub fn suffix(self) -> &'static str {
        match self {
            MemoryType::Local => "l",
            MemoryType::Shared => "s",
            MemoryType::Global => "g",
        }
    }
}

/// A split factor: a constant or an integer scalar of the fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Factor {
    /// A constant, at least 1.
    Const(i64),
    /// An integer scalar input of the fusion.
    Scalar(ValId),
}

impl From<i64> for Factor {
    fn from(v: i64) -> Self {
        Factor::Const(v)
    }
}

impl From<ValId> for Factor {
    fn from(v: ValId) -> Self {
        Factor::Scalar(v)
    }
}

impl Factor {
    /// The factor as an extent.
    pub fn extent(self) -> Extent {
        match self {
            Factor::Const(c) => Extent::Const(c),
            Factor::Scalar(v) => Extent::Scalar(v),
        }
    }
}

/// Where a producer is computed: inside the first `pos` loops of `consumer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ComputeAt {
    /// The consumer whose loops are shared.
    pub consumer: ValId,
    /// How many outer loop dims are shared.
    pub pos: usize,
}

/// The scheduling state of one tensor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSchedule {
    /// Element type.
    pub dtype: DataType,
    /// Root, logical and loop dims and the transforms between them.
    pub domain: TensorDomain,
    /// Where it lives.
    pub memory: MemoryType,
    /// Where it is computed, if inlined into a consumer.
    pub compute_at: Option<ComputeAt>,
    /// Loops shared with a tensor that does not read it (`compute_with`): its first
    /// `pos` loop dims run in that tensor's loops, past its own compute-at position.
    /// An inner-outer normalization's column sums (`dw`, `db`) accumulate inside the
    /// serial row loop of the row's math this way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_with: Option<ComputeAt>,
    /// For global tensors: contiguity per shape dim (as in the fusion).
    pub contiguity: Vec<Option<bool>>,
    /// For global tensors: stride order per shape dim (as in the fusion).
    pub stride_order: Vec<usize>,
}

/// One expression of the kernel graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SExpr {
    /// What it computes (copies added by caching are `Op::Set`).
    pub op: Op,
    /// Values read (tensors and scalars of the fusion).
    pub inputs: Vec<ValId>,
    /// The tensor it defines (the first output of a multi-output expression).
    pub output: ValId,
    /// The other outputs of a multi-output expression (`var_mean`: the mean;
    /// `welford`: the variance sum and the count), in the op's order. They are
    /// *siblings* of `output`: one loop nest computes them all, so split, merge,
    /// reorder, parallelize and compute-at applied to one apply to all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub siblings: Vec<ValId>,
}

impl SExpr {
    /// Every output, in the op's order.
    pub fn outputs(&self) -> Vec<ValId> {
        let mut v = vec![self.output];
        v.extend(self.siblings.iter().copied());
        v
    }

    /// True when `tv` is one of its outputs.
    pub fn defines(&self, tv: ValId) -> bool {
        self.output == tv || self.siblings.contains(&tv)
    }

    /// Replaces output `old` by `new`.
    pub(crate) fn replace_output(&mut self, old: ValId, new: ValId) {
        if self.output == old {
            self.output = new;
        }
        for s in self.siblings.iter_mut() {
            if *s == old {
                *s = new;
            }
        }
    }
}

/// One recorded scheduling call; a list of these replays a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Primitive {
    /// Split loop `axis`; `inner` says whether `factor` is the inner extent.
    Split {
        tensor: ValId,
        axis: i64,
        factor: Factor,
        inner: bool,
    },
    /// Merge loop `axis` with `axis + 1`.
    Merge { tensor: ValId, axis: i64 },
    /// New loop dim `i` is old loop dim `order[i]`.
    Reorder { tensor: ValId, order: Vec<i64> },
    /// Bind loop `axis` to a parallel type.
    Parallelize {
        tensor: ValId,
        axis: i64,
        ptype: ParallelType,
    },
    /// Place a tensor in memory.
    SetMemoryType { tensor: ValId, memory: MemoryType },
    /// Insert a copy after `tensor` that its consumers read.
    CacheAfter { tensor: ValId },
    /// Insert a copy before `tensor` that its definition writes.
    CacheBefore { tensor: ValId },
    /// Make an output that other expressions read a copy of a register tensor that
    /// those expressions read instead.
    CacheFork { tensor: ValId },
    /// Split a reduction into a partial reduction over `axes` and the rest.
    Rfactor { tensor: ValId, axes: Vec<i64> },
    /// Compute `producer` inside the first `pos` loops of `consumer`.
    ComputeAt {
        producer: ValId,
        consumer: ValId,
        pos: usize,
    },
    /// Inline every tensor as deep as its consumers allow.
    InlineMost,
    /// Run the first `pos` loops of `tensor` in those of `with`, which need not read it.
    ComputeWith {
        tensor: ValId,
        with: ValId,
        pos: usize,
    },
    /// Replay `reference`'s transforms on `targets`.
    TransformLike {
        reference: ValId,
        targets: Vec<ValId>,
    },
    /// Copy `reference`'s parallel types (except vectorize) to `targets`.
    ParallelizeLike {
        reference: ValId,
        targets: Vec<ValId>,
    },
    /// Compute `tensor` inside each resize, indexing or squeeze op that reads it, at the
    /// index that op reads, instead of storing it.
    RecomputeAtUse { tensor: ValId },
    /// Move the definition of `tensor` (a load of fusion inputs) ahead of the math.
    Hoist { tensor: ValId },
    /// Move the definition of `tensor` (a load of fusion inputs computed inside a loop
    /// nest) ahead of the other computations of its loop nest.
    HoistInNest { tensor: ValId },
    /// Lower the fusion's one sort as a block sort of this layout (see
    /// [`SortLayout`]) instead of loop nests.
    SortLayout { layout: SortLayout },
}

/// How a sort kernel holds its rows (the sort scheduler's choice; the lowering,
/// `codegen::lower::sort`, emits one `nvf_sort_rows` call of it): each block sorts
/// `rows_per_block` rows of up to `pad` elements (a power of two) with `threads`
/// threads, in dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SortLayout {
    /// Elements a row may hold: a power of two, at least the sorted dim's size.
    pub pad: i64,
    /// Rows sorted by one block.
    pub rows_per_block: i64,
    /// Threads of a block (`threadIdx.x`).
    pub threads: i64,
    /// A `topk` by radix select (`nvf_topk_rows`, one row per block, any row length)
    /// when nonzero: the power of two at least `k` its selected pairs are sorted in;
    /// 0 sorts whole rows (`nvf_sort_rows`).
    #[serde(default)]
    pub select: i64,
}

/// The kernel graph and every tensor's scheduling state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Per tensor (fusion tensors and tensors the schedule added).
    pub tensors: BTreeMap<ValId, TensorSchedule>,
    /// Expressions in topological order.
    pub exprs: Vec<SExpr>,
    /// Fusion inputs (tensors and scalars), in order.
    pub inputs: Vec<ValId>,
    /// Fusion output tensors, in order.
    pub outputs: Vec<ValId>,
    /// Every primitive applied so far, in order.
    pub history: Vec<Primitive>,
    /// Expressions computed where they are read instead of stored (see
    /// [`ScheduledFusion::recompute_at_use`]), in topological order. Their outputs have
    /// no entry in `tensors`: they have no loops, no buffer and no memory type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recomputed: Vec<SExpr>,
    /// The block-sort layout of a sort kernel ([`Primitive::SortLayout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<SortLayout>,
    /// The next id for a tensor the schedule adds.
    next_id: u32,
}

/// A fusion and its schedule, kept side by side; the fusion is never modified.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduledFusion {
    fusion: Fusion,
    schedule: Schedule,
}

impl ScheduledFusion {
    /// An unscheduled kernel graph for `fusion`: every tensor in its fusion memory
    /// (inputs and outputs global, intermediates local), loop domain = logical domain.
    pub fn new(fusion: Fusion) -> SchedResult<Self> {
        crate::ir::verify(&fusion)?;
        let live = fusion.live_exprs();
        let mut tensors = BTreeMap::new();
        let mut exprs = Vec::new();
        let outputs: Vec<ValId> = fusion.outputs().iter().map(|o| o.val).collect();
        for (id, e) in fusion.exprs() {
            if !live[id.index()] {
                continue;
            }
            let Some(&out) = e.outputs.first() else {
                continue;
            };
            if let Some(&s) = e.outputs.iter().find(|&&o| !fusion.val(o).is_tensor()) {
                return Err(ScheduleError::Unsupported(format!(
                    "scalar expression {} (defining {s}); only tensor expressions are lowered",
                    e.op.name()
                )));
            }
            exprs.push(SExpr {
                op: e.op.clone(),
                inputs: e.inputs.to_vec(),
                output: out,
                siblings: e.outputs[1..].to_vec(),
            });
        }
        let mut wanted: Vec<ValId> = fusion.inputs().to_vec();
        for e in &exprs {
            wanted.extend(e.inputs.iter().copied());
            wanted.extend(e.outputs());
        }
        for v in wanted {
            let val = fusion.val(v);
            let ValKind::Tensor(t) = &val.kind else {
                continue;
            };
            let global = fusion.input_position(v).is_some() || outputs.contains(&v);
            tensors.entry(v).or_insert_with(|| TensorSchedule {
                dtype: val.dtype,
                domain: TensorDomain::from_logical(&t.domain),
                memory: if global {
                    MemoryType::Global
                } else {
                    MemoryType::Local
                },
                compute_at: None,
                compute_with: None,
                contiguity: t.contiguity.clone(),
                stride_order: t.stride_order.clone(),
            });
        }
        let schedule = Schedule {
            tensors,
            exprs,
            inputs: fusion.inputs().to_vec(),
            outputs,
            history: Vec::new(),
            recomputed: Vec::new(),
            sort: None,
            next_id: fusion.num_vals() as u32,
        };
        Ok(ScheduledFusion { fusion, schedule })
    }

    /// Applies recorded primitives to a fresh schedule of `fusion`.
    pub fn replay(fusion: Fusion, history: &[Primitive]) -> SchedResult<Self> {
        let mut s = ScheduledFusion::new(fusion)?;
        for p in history {
            s.apply(p)?;
        }
        Ok(s)
    }

    /// The fusion (unchanged by scheduling).
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The primitives applied so far.
    pub fn history(&self) -> &[Primitive] {
        &self.schedule.history
    }

    /// The scheduling state of a tensor.
    pub fn tensor(&self, tv: ValId) -> SchedResult<&TensorSchedule> {
        self.schedule.tensor("tensor", tv)
    }

    /// Checks every validation rule (see [`validate`]).
    pub fn validate(&self) -> SchedResult<()> {
        validate(self)
    }
}

impl TensorSchedule {
    /// The loop positions a tensor's buffer spans and their (constant) extents, outermost
    /// first: every loop dim right of its compute-at position except reduction,
    /// broadcast and extent-1 dims, and except the dims its memory is not private to
    /// (thread dims for registers, block dims for shared memory).
    pub fn alloc_dims(&self, tv: ValId) -> SchedResult<(Vec<usize>, Vec<i64>)> {
        let pos = self.compute_at.map_or(0, |c| c.pos);
        let mut dims = Vec::new();
        let mut exts = Vec::new();
        for i in pos..self.domain.loop_dims.len() {
            let d = self.domain.loop_dom(i);
            if d.kind == crate::ir::IterKind::Reduction
                || d.kind == crate::ir::IterKind::Broadcast
                || d.extent == Extent::Const(1)
            {
                continue;
            }
            let skip = match self.memory {
                MemoryType::Local => d.parallel.is_thread(),
                _ => d.parallel.is_bid(),
            };
            if skip {
                continue;
            }
            let Some(c) = d.extent.as_const() else {
                return Err(ScheduleError::SymbolicAllocation {
                    tensor: tv,
                    axis: i,
                    extent: d.extent.clone(),
                    memory: self.memory,
                });
            };
            dims.push(i);
            exts.push(c);
        }
        Ok((dims, exts))
    }

    /// Bytes of the tensor's buffer (see [`TensorSchedule::alloc_dims`]).
    pub fn alloc_bytes(&self, tv: ValId) -> SchedResult<i64> {
        let (_, exts) = self.alloc_dims(tv)?;
        Ok(exts.iter().product::<i64>().max(1) * self.dtype.size_bytes() as i64)
    }
}

impl Schedule {
    pub(crate) fn tensor(&self, op: &'static str, tv: ValId) -> SchedResult<&TensorSchedule> {
        self.tensors
            .get(&tv)
            .ok_or(ScheduleError::UnknownTensor { op, tensor: tv })
    }

    pub(crate) fn tensor_mut(
        &mut self,
        op: &'static str,
        tv: ValId,
    ) -> SchedResult<&mut TensorSchedule> {
        self.tensors
            .get_mut(&tv)
            .ok_or(ScheduleError::UnknownTensor { op, tensor: tv })
    }

    /// The tensor whose loop nest `tv` is computed in: the end of its chain of
    /// compute-at consumers and compute-with tensors (`tv` itself when it is computed
    /// at none and with none: an output stored inside a column sum's loops,
    /// `compute_with`, is in the sum's nest).
    pub fn nest_root(&self, mut tv: ValId) -> ValId {
        // Bounded: validation refuses a cycle, but this may run before it.
        for _ in 0..=self.tensors.len() {
            let t = self.tensors.get(&tv);
            match t.and_then(|t| t.compute_at.or(t.compute_with)) {
                Some(ca) => tv = ca.consumer,
                None => break,
            }
        }
        tv
    }

    /// The expression defining `tv`, by position.
    pub fn definition(&self, tv: ValId) -> Option<usize> {
        self.exprs.iter().position(|e| e.defines(tv))
    }

    /// `tv` and the other outputs of its multi-output definition, `tv` first.
    pub fn sibling_group(&self, tv: ValId) -> Vec<ValId> {
        let mut g = vec![tv];
        if let Some(d) = self.definition(tv) {
            g.extend(self.exprs[d].outputs().into_iter().filter(|&o| o != tv));
        }
        g
    }

    /// Positions of the expressions reading `tv`.
    pub fn uses(&self, tv: ValId) -> Vec<usize> {
        (0..self.exprs.len())
            .filter(|&i| self.exprs[i].inputs.contains(&tv))
            .collect()
    }

    /// The expression of a tensor computed at each use (see
    /// [`ScheduledFusion::recompute_at_use`]).
    pub fn recomputed(&self, tv: ValId) -> Option<&SExpr> {
        self.recomputed.iter().find(|e| e.output == tv)
    }

    /// True for fusion inputs.
    pub fn is_input(&self, tv: ValId) -> bool {
        self.inputs.contains(&tv)
    }

    /// True for fusion outputs.
    pub fn is_output(&self, tv: ValId) -> bool {
        self.outputs.contains(&tv)
    }
}
