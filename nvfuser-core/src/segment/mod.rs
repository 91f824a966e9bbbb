//! Segmentation: fusions that no single kernel can hold, split into segments.
//!
//! When no scheduler accepts a whole fusion (two reductions of different shapes, a
//! reduction whose result is needed in full before an epilogue, a `segment_set` hint),
//! [`SegmentedFusion::new`] splits it into as few segments as it can, each a [`Fusion`] of
//! its own that some scheduler accepts ([`crate::scheduler::can_schedule_segment`]: a
//! tuned one, or the default schedule for a single expression no tuned one takes).
//! Segments exchange tensors through memory, in a topological order.
//!
//! # Algorithm
//!
//! 1. The whole fusion first: if the scheduler accepts it (and no `segment_set` output is
//!    read by another expression), it is one segment.
//! 2. Otherwise one group per tensor expression, then level-based merging in rounds, then
//!    a greedy producer-to-consumer pass, then groups that read a common fusion input
//!    and no path joins (see `merge`). A merge is made only when the scheduler accepts
//!    the union, and never across a `segment_set` output. Before grouping, each reader
//!    of a cheap value computed from inputs (`xhat = (x - mean) * rstd`) gets a private
//!    copy of its computation (see `cones`), so segments recompute it rather than pass
//!    it through memory; copies that land in one segment are one expression again
//!    ([`Fusion::dedup_exprs`]). The copies are kept only when they make no more
//!    segments than the shared values do.
//! 3. Forwarding across boundaries: a boundary tensor `broadcast(u)` crosses as `u`, and
//!    an upcast of a half-precision tensor (`cast(x_f16 -> f32)` with `x` held in half:
//!    a fusion input or an explicit cast) crosses as `x` when some fusion output is
//!    half, which halves the traffic and changes no value; the consumers recompute the
//!    broadcast or cast. A rewrite is kept only when the scheduler still accepts every
//!    segment it touches.
//!
//! Scalar expressions are not grouped: a segment recomputes the scalars it needs.
//! Segmentation looks at the definition only (no sizes), so it is done once per fusion.
//! Time is near-linear in the number of expressions (see the `segment_bench` example).
//!
//! # Segments and maps
//!
//! Each [`Segment`] has its own fusion and scheduler, the original expressions it
//! computes, and maps: per segment input a [`SegmentValue`] (an original value, or the
//! extent `T.size(a)` of an original input tensor `T`), per segment output the original
//! value. Extents are separate from values by type, so their ids cannot collide; in
//! [`SegmentValue::id`] they also get nvFuser's signed numbering (values `>= 0`, extents
//! `< 0`, indexing the original fusion's [`Fusion::extents`]: every dim of every input
//! tensor, in order). An extent input is an `i64` scalar input
//! of the segment: a segment that does not receive `T` still knows `T.size(a)`.
//!
//! ```
//! use nvfuser_core::prelude::*;
//! use nvfuser_core::segment::{ExtentRef, SegmentedFusion, SegmentValue};
//!
//! let mut fd = FusionDefinition::new();
//! let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
//! let y = fd.relu(x)?;
//! let z = fd.segment_set(y)?;   // forces a boundary after `z`
//! let w = fd.exp(z)?;
//! fd.add_output(w)?;
//! let fusion = fd.finish()?;
//! let seg = SegmentedFusion::new(&fusion).unwrap();
//! assert_eq!(seg.segments().len(), 2);
//! // The second segment receives z, and the sizes of x's dims as i64 scalars (z is
//! // declared with them; x itself is not an input of that segment).
//! let (x0, x1) = (ExtentRef { tensor: x, axis: 0 }, ExtentRef { tensor: x, axis: 1 });
//! assert_eq!(
//!     seg.segments()[1].inputs(),
//!     &[SegmentValue::Val(z), SegmentValue::Extent(x0), SegmentValue::Extent(x1)]
//! );
//! assert_eq!(SegmentValue::Extent(x1).id(&fusion.extents()), Some(-2));
//! assert_eq!(fusion.extent_id(x1), Some(-2));
//! println!("{seg}"); // every segment, its scheduler and its maps
//! # Ok::<(), nvfuser_core::Error>(())
//! ```

mod assemble;
mod build;
mod cones;
mod graph;
mod merge;
mod print;
mod run;

use rustc_hash::FxHashMap;

pub use merge::SegmenterStats;

use crate::ir::{ExprId, Fusion, ValId};
use crate::scheduler::{can_schedule_segment, Rejections, SchedulerKind};

/// The size of dim `axis` of an original fusion input tensor (the IR's type).
pub use crate::ir::ExtentRef;

/// What a segment input is in the original fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentValue {
    /// An original value: a fusion input, or a tensor computed by an earlier segment.
    Val(ValId),
    /// The size of an original input tensor's dim, passed as an `i64` scalar.
    Extent(ExtentRef),
}

/// Which part of the whole fusion the scheduler was asked about first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WholeFusion {
    /// The scheduler accepted the whole fusion: one segment.
    Accepted,
    /// The scheduler rejected it, for these reasons.
    Rejected(Rejections),
    /// A `segment_set` output is read by another expression, so it was not asked.
    ForcedBoundary,
    /// Nothing to compute (every output is an input).
    Empty,
}

/// Options of the segmenter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentOptions {
    /// Pass upcasts of half tensors across boundaries in half precision, when some
    /// fusion output is half (see the module documentation). Default: on.
    pub half_boundaries: bool,
    /// When the fusion does not fit one segment, give each reader of a cheap value
    /// computed from inputs its own copy, so segments recompute it instead of passing it
    /// through memory (see the module documentation). Default: on.
    pub private_cones: bool,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            half_boundaries: true,
            private_cones: true,
        }
    }
}

/// Why a fusion could not be segmented.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// The fusion fails the IR verifier.
    #[error("segmentation: the fusion is not well formed: {0}")]
    Invalid(crate::Error),
    /// Some expressions cannot be scheduled even alone.
    #[error("segmentation: no scheduler accepts the segment of {what}: {rejections}")]
    Unschedulable {
        /// The original expressions of the segment.
        exprs: Vec<ExprId>,
        /// The segment's expressions in words (`sum(T1) -> T2`).
        what: String,
        /// Every scheduler's refusal.
        rejections: Rejections,
    },
}

impl SegmentValue {
    /// A signed id: an original value's index (`>= 0`), or for an extent `-(k + 1)`
    /// where `k` is its position in `extents`. With the original fusion's
    /// [`Fusion::extents`] these are nvFuser's ids (what the segment printer shows);
    /// with [`SegmentedFusion::extents`], ids among the extents segments read. Returns
    /// `None` for an extent not in the table.
    pub fn id(&self, extents: &[ExtentRef]) -> Option<i64> {
        match self {
            SegmentValue::Val(v) => Some(v.id() as i64),
            SegmentValue::Extent(e) => extents.iter().position(|x| x == e).map(|k| -(k as i64) - 1),
        }
    }
}

/// One segment: a fusion of its own, its scheduler, and its maps to the original fusion.
#[derive(Clone, Debug)]
pub struct Segment {
    fusion: Fusion,
    scheduler: SchedulerKind,
    exprs: Vec<ExprId>,
    recomputed: Vec<ExprId>,
    inputs: Vec<SegmentValue>,
    outputs: Vec<ValId>,
    map: FxHashMap<ValId, ValId>,
}

impl Segment {
    /// The segment as a fusion (inputs: [`Segment::inputs`], outputs: [`Segment::outputs`]).
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// The scheduler that accepted it.
    pub fn scheduler(&self) -> SchedulerKind {
        self.scheduler
    }

    /// The original expressions it computes (scalar cones and recomputed casts
    /// included), in arena order.
    pub fn exprs(&self) -> &[ExprId] {
        &self.exprs
    }

    /// The original expressions it recomputes although another segment owns them (the
    /// half-precision boundary casts).
    pub fn recomputed(&self) -> &[ExprId] {
        &self.recomputed
    }

    /// Per input of [`Segment::fusion`], in order: what it is in the original fusion.
    pub fn inputs(&self) -> &[SegmentValue] {
        &self.inputs
    }

    /// Per output of [`Segment::fusion`], in order: the original value.
    pub fn outputs(&self) -> &[ValId] {
        &self.outputs
    }

    /// The segment's value for an original value it holds (input, constant or computed).
    pub fn segment_val(&self, original: ValId) -> Option<ValId> {
        self.map.get(&original).copied()
    }

    /// The segment's input that carries `what`, if any.
    pub fn input_of(&self, what: SegmentValue) -> Option<ValId> {
        self.inputs
            .iter()
            .position(|&x| x == what)
            .map(|k| self.fusion.inputs()[k])
    }

    /// The segment as `fusion!` source (see [`Fusion::to_reproducer`]). Its parameters
    /// are the segment inputs in order; extent inputs are `i64` scalars.
    pub fn to_reproducer(&self, name: &str) -> String {
        self.fusion.to_reproducer(name)
    }
}

/// A boundary tensor passed in half precision: consumers receive `stored` (half) and
/// recompute `value = cast(stored)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HalfBoundary {
    /// The upcast value (f32 or f64) that the consumers need.
    pub value: ValId,
    /// The half-precision tensor that crosses the boundary instead.
    pub stored: ValId,
}

/// A fusion split into segments (see the module documentation).
#[derive(Clone, Debug)]
pub struct SegmentedFusion {
    original: Fusion,
    segments: Vec<Segment>,
    extents: Vec<ExtentRef>,
    whole: WholeFusion,
    half_boundaries: Vec<HalfBoundary>,
    release_after: Vec<Vec<ValId>>,
    stats: SegmenterStats,
}

impl SegmentedFusion {
    /// Segments `fusion` with the scheduler registry ([`can_schedule_segment`]: tuned
    /// schedulers, the default schedule only for single expressions) and default
    /// options.
    pub fn new(fusion: &Fusion) -> Result<SegmentedFusion, SegmentError> {
        Self::with_scheduler(fusion, &can_schedule_segment, SegmentOptions::default())
    }

    /// Segments `fusion`, asking `accept` whether a candidate segment can be one kernel
    /// (tests use their own rules; the runtime uses [`can_schedule_segment`]).
    pub fn with_scheduler(
        fusion: &Fusion,
        accept: &dyn Fn(&Fusion) -> Result<SchedulerKind, Rejections>,
        options: SegmentOptions,
    ) -> Result<SegmentedFusion, SegmentError> {
        crate::ir::verify(fusion).map_err(SegmentError::Invalid)?;
        let g = graph::Graph::new(fusion);
        let mut seg = merge::Segmenter::new(&g, accept);
        let owned: Vec<Vec<ExprId>>;
        let kinds: Vec<Option<SchedulerKind>>;
        let whole;
        if g.nodes.is_empty() {
            whole = WholeFusion::Empty;
            owned = Vec::new();
            kinds = Vec::new();
        } else {
            let all: Vec<ExprId> = g.nodes.clone();
            let verdict = if g.forced_boundary {
                None
            } else {
                let outputs = assemble::outputs_of(&g, &[(all.clone(), Vec::new())]);
                let built = build::build(&g, &all, &outputs[0]);
                Some(seg.check(&built.fusion))
            };
            match verdict {
                Some(Ok(kind)) => {
                    whole = WholeFusion::Accepted;
                    owned = vec![all];
                    kinds = vec![Some(kind)];
                }
                other => {
                    whole = match other {
                        Some(Err(r)) => WholeFusion::Rejected(r),
                        _ => WholeFusion::ForcedBoundary,
                    };
                    let copied = options
                        .private_cones
                        .then(|| cones::private_cones(fusion))
                        .flatten();
                    let checked = seg.stats;
                    let groups = seg.run();
                    if let Some(copied) = copied {
                        // Kept unless it makes more segments than sharing the values
                        // (a copy no consumer's scheduler takes runs as a kernel of
                        // its own).
                        let private = Self::split(&copied, accept, options, whole.clone(), checked);
                        if let Ok(p) = private {
                            if p.segments.len() <= groups.len() {
                                return Ok(p);
                            }
                        }
                    }
                    owned = groups.iter().map(|grp| grp.exprs.clone()).collect();
                    kinds = groups.iter().map(|grp| grp.kind).collect();
                }
            }
        }
        Self::finish(fusion, &g, seg, owned, kinds, whole, options)
    }

    /// Segments `fusion` (the whole-fusion verdict already known, and the statistics
    /// of that check in `checked`) without asking about it whole again.
    fn split(
        fusion: &Fusion,
        accept: &dyn Fn(&Fusion) -> Result<SchedulerKind, Rejections>,
        options: SegmentOptions,
        whole: WholeFusion,
        checked: SegmenterStats,
    ) -> Result<SegmentedFusion, SegmentError> {
        crate::ir::verify(fusion).map_err(SegmentError::Invalid)?;
        let g = graph::Graph::new(fusion);
        let mut seg = merge::Segmenter::new(&g, accept);
        seg.stats.scheduler_checks += checked.scheduler_checks;
        seg.stats.accepted += checked.accepted;
        seg.stats.checked_exprs += checked.checked_exprs;
        let groups = seg.run();
        let owned = groups.iter().map(|grp| grp.exprs.clone()).collect();
        let kinds = groups.iter().map(|grp| grp.kind).collect();
        Self::finish(fusion, &g, seg, owned, kinds, whole, options)
    }

    /// Assembles the segments of the final groups.
    fn finish(
        fusion: &Fusion,
        g: &graph::Graph<'_>,
        mut seg: merge::Segmenter<'_, '_, '_>,
        owned: Vec<Vec<ExprId>>,
        mut kinds: Vec<Option<SchedulerKind>>,
        whole: WholeFusion,
        options: SegmentOptions,
    ) -> Result<SegmentedFusion, SegmentError> {
        let wants_half = options.half_boundaries
            && fusion
                .outputs()
                .iter()
                .any(|o| fusion.val(o.val).dtype.is_half());
        let (mut segments, half_boundaries) =
            assemble::assemble(g, &mut seg, &owned, &mut kinds, wants_half)?;
        // A lone segment computes the whole fusion's outputs: it is not a part.
        if let [only] = segments.as_mut_slice() {
            only.fusion.segment = false;
        }
        let stats = seg.stats;
        let mut extents: Vec<ExtentRef> = segments
            .iter()
            .flat_map(|s| s.inputs.iter())
            .filter_map(|x| match x {
                SegmentValue::Extent(e) => Some(*e),
                SegmentValue::Val(_) => None,
            })
            .collect();
        extents.sort_unstable();
        extents.dedup();
        let release_after = run::release_plan(g, &segments);
        Ok(SegmentedFusion {
            original: fusion.clone(),
            segments,
            extents,
            whole,
            half_boundaries,
            release_after,
            stats,
        })
    }

    /// [`SegmentedFusion::new`] with creation ops (`full`, `iota`, `uniform`, `normal`)
    /// kept out of every segment with a reduction: the planner's fallback when the
    /// whole fusion was accepted by a tuned scheduler, which then failed to schedule it
    /// (a creation op's sizes from host scalars in a persistent normalization over two
    /// dims), so the whole-fusion segmentation would be one segment failing the same way.
    pub fn with_creation_apart(fusion: &Fusion) -> Result<SegmentedFusion, SegmentError> {
        let creation = |f: &Fusion| f.exprs().any(|(_, e)| e.op.is_creation());
        let reduction = |f: &Fusion| f.exprs().any(|(_, e)| e.op.reduction_axes().is_some());
        let accept = |f: &Fusion| {
            if creation(f) && reduction(f) {
                // Rejected by every scheduler kind alike: the segmenter splits it.
                return Err(Rejections(vec![crate::scheduler::Rejection {
                    kind: SchedulerKind::Default,
                    reason: crate::scheduler::Refusal::Other {
                        reason: "creation ops are kept apart from reductions (fallback)".into(),
                    },
                }]));
            }
            can_schedule_segment(f)
        };
        Self::with_scheduler(fusion, &accept, SegmentOptions::default())
    }

    /// The fusion that was segmented.
    pub fn original(&self) -> &Fusion {
        &self.original
    }

    /// The segments, in an order in which they can run.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// True when there is more than one segment.
    pub fn is_segmented(&self) -> bool {
        self.segments.len() > 1
    }

    /// Every extent some segment takes as an input, sorted. (nvFuser's ids number every
    /// input extent: [`Fusion::extents`] of [`Self::original`].)
    pub fn extents(&self) -> &[ExtentRef] {
        &self.extents
    }

    /// What the scheduler said about the whole fusion.
    pub fn whole_fusion(&self) -> &WholeFusion {
        &self.whole
    }

    /// The boundary tensors that cross in half precision.
    pub fn half_boundaries(&self) -> &[HalfBoundary] {
        &self.half_boundaries
    }

    /// The original values that segment `index` reads last and that are not fusion
    /// outputs: a runtime frees them after running it.
    pub fn release_after(&self, index: usize) -> &[ValId] {
        self.release_after
            .get(index)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Counters of the segmentation (scheduler checks, merges).
    pub fn stats(&self) -> SegmenterStats {
        self.stats
    }

    /// Every segment as `fusion!` source, named `{name}_seg{k}`.
    pub fn to_reproducers(&self, name: &str) -> Vec<String> {
        self.segments
            .iter()
            .enumerate()
            .map(|(k, s)| s.to_reproducer(&format!("{name}_seg{k}")))
            .collect()
    }
}
