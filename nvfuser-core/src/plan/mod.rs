//! How a fusion runs, decided in one place, as data: the [`ExecutionPlan`].
//!
//! A [`FusionPlanner`] is made once per fusion definition. It splits off what needs no
//! kernel, once, from the definition alone:
//! - the *host scalar program* ([`crate::scheduler::host_scalars`]): every scalar the
//!   kernels need that the fusion computes (sizes, scalar math and casts, the shapes of
//!   `full`/`iota`/RNG/`reshape`/`slice`), evaluated on the host before a launch and
//!   passed to the kernels as extra arguments;
//! - the outputs that are inputs or repeat another output ([`Fusion::forward_outputs`]);
//! - the data-dependent reads the runtime checks before launching ([`ReadChecks`]).
//!
//! For a call it then plans in two steps, so a runtime can stop after the first:
//! 1. [`FusionPlanner::decide`]: the registry's choice of scheduler and params, for the
//!    whole kernel fusion, or for each of its segments when no single scheduler takes
//!    it (the segmentation is made the first time, then kept). Cheap: no scheduling.
//!    Two calls whose [`Decisions::same_kernels`] hold run the same kernels, so a
//!    runtime compiled for one serves the other.
//! 2. [`FusionPlanner::lower`]: each segment scheduled with its kept analysis and
//!    lowered once, giving an [`ExecutionPlan`]. When the one kernel of a fusion fails to
//!    lower even with the default schedule, the fusion is segmented and planned again.
//!
//! An execution plan is always a list of segments; one segment (the kernel fusion
//! itself) is the common case. Each segment holds its fusion, its scheduler and params,
//! the scheduled fusion and the lowered [`Kernel`] (which carries its launch
//! requirements and data-dependent read checks), and its value maps: which values of
//! the kernel fusion (or extents of its input tensors) its inputs are, which values its
//! outputs are, and which intermediates die after it. It prints with `Display` and
//! serializes with serde; `nvfuser-cuda` compiles, caches and launches it and makes no
//! decision of its own.
//!
//! ```
//! use nvfuser_core::prelude::*;
//! use nvfuser_core::plan::plan;
//! use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
//!
//! let fusion = nvfuser_core::workloads::softmax(DataType::BF16)?;
//! let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[(DataType::BF16, &[8192, 4096])]);
//! let plan = plan(&fusion, &info).expect("one kernel takes it");
//! assert_eq!(plan.segments.len(), 1);
//! assert_eq!(plan.segments[0].scheduler, "inner persistent");
//! assert!(plan.to_string().contains("inner persistent"));
//! # Ok::<(), nvfuser_core::Error>(())
//! ```

mod in_place;
mod print;

use in_place::direct_in_place;
pub use in_place::reads_input_once;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::codegen::Kernel;
use crate::ir::bind::{BoundArg, SizeChecks};
use crate::ir::reads::ReadChecks;
use crate::ir::{Fusion, OutputSource, ValId, ValKind};
use crate::sched::ScheduledFusion;
use crate::scheduler::{
    check_fits, index_type_for, lower_with, split_host_scalars, Decision, HeuristicParams,
    HostScalarProgram, InputInfo, PlanError, Registry, Rejections, RuntimeInfo, SchedulerKind,
    TensorInfo,
};
use crate::segment::{SegmentValue, SegmentedFusion};

pub use print::PlanRecord;

/// The plan of one call: the host scalar program, then the segments in order.
#[derive(Clone, Debug)]
pub struct ExecutionPlan {
    /// Scalars the host computes before the launch, appended to the call's arguments
    /// (`None`: the kernels need none).
    pub host: Option<Arc<HostScalarProgram>>,
    /// Where each output of the fusion comes from when some need no kernel (`None`:
    /// every output is the kernel fusion's output of the same position).
    pub forward: Option<Arc<[OutputSource]>>,
    /// True when the segments come from a segmentation (values move between them
    /// through global memory); false for the one segment that is the kernel fusion.
    pub segmented: bool,
    /// The segments, in the order they run.
    pub segments: Vec<SegmentPlan>,
    /// The kernel fusion's inputs (the call's arguments, then the host program's
    /// results), in order.
    pub inputs: Vec<ValId>,
    /// The kernel fusion's outputs, in order.
    pub outputs: Vec<ValId>,
    /// How many values the kernel fusion has: segments' value ids are below it.
    pub num_vals: usize,
}

/// One segment of an [`ExecutionPlan`]: one kernel, or none when every output of the
/// segment is empty for this call.
#[derive(Clone, Debug)]
pub struct SegmentPlan {
    /// The segment's own fusion (the kernel fusion itself in an unsegmented plan).
    pub fusion: Fusion,
    /// What each input of `fusion` is, in the kernel fusion.
    pub inputs: Vec<SegmentValue>,
    /// The kernel fusion's values that the segment's outputs are, in order.
    pub outputs: Vec<ValId>,
    /// Kernel-fusion values no later segment reads: freed after this one runs.
    pub release: Vec<ValId>,
    /// The scheduler's name (`pointwise`, `default inner reduction`, `no-op`, ...).
    pub scheduler: &'static str,
    /// The params it was scheduled with.
    pub params: HeuristicParams,
    /// Why the schedulers tried before it refused, in order.
    pub refused: Rejections,
    /// Why the tuned schedule the registry chose was replaced by the default one.
    pub fallback: Option<String>,
    /// The schedule and its kernel; `None` when nothing is launched.
    pub kernel: Option<PlannedKernel>,
}

/// A kernel of a plan: its schedule and the kernel lowered from it, once.
#[derive(Clone, Debug)]
pub struct PlannedKernel {
    /// The scheduled fusion.
    pub scheduled: ScheduledFusion,
    /// The generated kernel (signature, launch dims, requirements, read checks, body).
    pub kernel: Kernel,
}

impl ExecutionPlan {
    /// The kernels the plan launches, in order.
    pub fn kernels(&self) -> impl Iterator<Item = &Kernel> {
        self.segments
            .iter()
            .filter_map(|s| s.kernel.as_ref().map(|k| &k.kernel))
    }
}

/// Plans a call of `fusion` on the device and inputs `info` describes (see the module
/// documentation): what a GPU would run, on any machine. `info` lists the fusion's own
/// inputs; the host scalars are evaluated from them.
pub fn plan(fusion: &Fusion, info: &RuntimeInfo) -> Result<ExecutionPlan, PlanError> {
    let planner = FusionPlanner::new(fusion.clone());
    let info = planner.kernel_info(info).map_err(PlanError::Inputs)?;
    let wide = planner.needs_wide(&info);
    let decided = planner.decide(&info, None, wide)?;
    planner.lower(&decided)
}

/// What is planned once per fusion, and the planning of each call (see the module
/// documentation).
#[derive(Debug)]
pub struct FusionPlanner {
    fusion: Fusion,
    kernel: Fusion,
    host: Option<Arc<HostScalarProgram>>,
    forward: Option<Arc<[OutputSource]>>,
    /// The fusion whose expressions the views among `forward` name
    /// ([`OutputSource::View`]); `None` without views.
    views: Option<Arc<Fusion>>,
    extent_scalars: Vec<bool>,
    reads: ReadChecks,
    sizes: SizeChecks,
    /// Set once no single kernel can run the kernel fusion (or given at construction),
    /// or once only the default schedule takes it whole and tuned segments can run it.
    segmented: OnceLock<SegmentedFusion>,
    /// Set once segmentation was tried for a fusion only the default schedule takes
    /// whole and gave no segment a tuned scheduler takes (not tried again).
    default_whole: OnceLock<()>,
    /// In-place outputs a pointwise kernel may write straight into their input
    /// ([`FusionPlanner::direct_in_place`]).
    direct: Vec<(usize, usize)>,
}

impl FusionPlanner {
    /// The planner of `fusion`: host scalars split off, forwarded outputs found.
    pub fn new(fusion: Fusion) -> FusionPlanner {
        let (kernel, host) = match split_host_scalars(&fusion) {
            Some(split) => (split.kernel, Some(Arc::new(split.program))),
            None => (fusion.clone(), None),
        };
        let (kernel, forward): (Fusion, Option<Arc<[OutputSource]>>) =
            match kernel.forward_outputs() {
                Some((kernel, sources)) => (kernel, Some(Arc::from(sources))),
                None => (kernel, None),
            };
        let direct = direct_in_place(&kernel, forward.as_deref());
        // Kernels compute in-place outputs into fresh buffers like any other; the
        // runtime stores them into their inputs once every kernel of the call is queued.
        let kernel = kernel.without_output_aliases().unwrap_or(kernel);
        // The views' chains name expressions of this fusion (later rewrites renumber).
        let views = forward
            .as_deref()
            .is_some_and(|f: &[OutputSource]| f.iter().any(|s| matches!(s, OutputSource::View(_))))
            .then(|| Arc::new(kernel.clone()));
        // Values a resize or indexing op reads beside other readers get a private copy
        // that kernels recompute where the op reads (no segment materializes them).
        let kernel = crate::scheduler::isolate_resize_reads(&kernel).unwrap_or(kernel);
        // A tensor expression written twice is computed once.
        let kernel = kernel.dedup_exprs().map_or(kernel, |(k, _)| k);
        // Input dims every call must make equal are spelled one way (the fusion as
        // defined keeps its own: its size checks run on every call).
        let kernel = crate::ir::unify_input_dims(&kernel).unwrap_or(kernel);
        let mut planner = Self::from_parts(fusion, kernel, host, forward);
        planner.views = views;
        planner.direct = direct;
        planner
    }

    /// A planner that always runs `segmented`, a segmentation made elsewhere (for
    /// example with a custom rule). Its fusion is planned as it is: no host scalars,
    /// no forwarded outputs.
    pub fn with_segmentation(segmented: SegmentedFusion) -> FusionPlanner {
        let fusion = segmented.original().clone();
        let kernel = fusion
            .without_output_aliases()
            .unwrap_or_else(|| fusion.clone());
        let planner = Self::from_parts(fusion, kernel, None, None);
        let _ = planner.segmented.set(segmented);
        planner
    }

    /// The planner of `fusion` running as `kernel`, with the checks found once.
    fn from_parts(
        fusion: Fusion,
        kernel: Fusion,
        host: Option<Arc<HostScalarProgram>>,
        forward: Option<Arc<[OutputSource]>>,
    ) -> FusionPlanner {
        FusionPlanner {
            extent_scalars: extent_scalar_inputs(&kernel),
            reads: ReadChecks::of(&fusion),
            sizes: SizeChecks::of(&fusion),
            fusion,
            kernel,
            host,
            forward,
            views: None,
            segmented: OnceLock::new(),
            default_whole: OnceLock::new(),
            direct: Vec::new(),
        }
    }

    /// The fusion as defined.
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// The fusion kernels run: the definition without its host scalar math and
    /// forwarded outputs. Its inputs are the fusion's, then the host program's results.
    pub fn kernel_fusion(&self) -> &Fusion {
        &self.kernel
    }

    /// The host scalar program, if the kernels need computed scalars.
    pub fn host(&self) -> Option<&HostScalarProgram> {
        self.host.as_deref()
    }

    /// Where each output comes from when some need no kernel.
    pub fn forward(&self) -> Option<&[OutputSource]> {
        self.forward.as_deref()
    }

    /// The in-place outputs a call planned as one pointwise kernel may write straight
    /// into their input, as (kernel fusion output, input position); see `in_place.rs`.
    pub fn direct_in_place(&self) -> &[(usize, usize)] {
        &self.direct
    }

    /// The fusion whose expressions the views of [`FusionPlanner::forward`] name; its
    /// inputs are the kernel fusion's. `None` when no output is a view.
    pub fn view_fusion(&self) -> Option<&Fusion> {
        self.views.as_deref()
    }

    /// Per input of the kernel fusion: a scalar that some extent reads (its value
    /// selects kernels, like a size does).
    pub fn extent_scalars(&self) -> &[bool] {
        &self.extent_scalars
    }

    /// The data-dependent reads of the whole fusion (checked before a launch with the
    /// host scalars evaluated).
    pub fn reads(&self) -> &ReadChecks {
        &self.reads
    }

    /// The size checks of the fusion's arguments ([`crate::ir::bind::check_sizes`]),
    /// found once.
    pub fn size_checks(&self) -> &SizeChecks {
        &self.sizes
    }

    /// The segmentation the kernel fusion runs with, once one was needed.
    pub fn segmentation(&self) -> Option<&SegmentedFusion> {
        self.segmented.get()
    }

    /// The host program's results for these arguments (the fusion's inputs, in order).
    pub fn host_scalars(&self, args: &[BoundArg<'_>]) -> crate::Result<Vec<crate::ScalarValue>> {
        match &self.host {
            Some(host) => host.evaluate(args),
            None => Ok(Vec::new()),
        }
    }

    /// `info` of a call of the fusion, extended with the host program's results: the
    /// view of the kernel fusion's inputs that planning works on.
    pub fn kernel_info<'i>(&self, info: &'i RuntimeInfo) -> crate::Result<Cow<'i, RuntimeInfo>> {
        if self.host.is_none() {
            return Ok(Cow::Borrowed(info));
        }
        let sizes: Vec<Vec<usize>> = info
            .inputs
            .iter()
            .map(|i| match i {
                InputInfo::Tensor(t) => t.sizes.iter().map(|&s| s.max(0) as usize).collect(),
                InputInfo::Scalar(_) => Vec::new(),
            })
            .collect();
        let bound: Vec<BoundArg<'_>> = info
            .inputs
            .iter()
            .zip(&sizes)
            .map(|(i, s)| match i {
                InputInfo::Scalar(v) => BoundArg::Scalar(*v),
                InputInfo::Tensor(_) => BoundArg::Tensor(s),
            })
            .collect();
        let extra = self.host_scalars(&bound)?;
        let mut ext = info.clone();
        ext.inputs.extend(extra.into_iter().map(InputInfo::Scalar));
        Ok(Cow::Owned(ext))
    }

    /// True when the kernel fusion needs 64-bit index math for `info` (of the kernel
    /// fusion): a tensor input or output reaches 2^31 elements, or an input view spans
    /// 2^31 elements through its strides.
    pub fn needs_wide(&self, info: &RuntimeInfo) -> bool {
        wide_for(&self.kernel, info)
    }

    /// The registry's decision for a call (`info` describes the kernel fusion's inputs,
    /// see [`FusionPlanner::kernel_info`]): `user` params for the whole kernel fusion
    /// (checked, never segmented), or the first scheduler that takes it, or, when none
    /// does, a decision per segment. `wide` forces 64-bit indexing (a view the signature
    /// saw reaching 2^31 elements).
    pub fn decide(
        &self,
        info: &RuntimeInfo,
        user: Option<&HeuristicParams>,
        wide: bool,
    ) -> Result<Decisions, PlanError> {
        let wide = wide || self.needs_wide(info);
        if let Some(p) = user {
            p.validate()
                .map_err(|e| PlanError::InvalidParams(e.into()))?;
            check_fits(&self.kernel, p, info).map_err(PlanError::InvalidParams)?;
            return Ok(Decisions {
                segmented: false,
                segments: vec![SegmentDecision {
                    info: info.clone(),
                    wide,
                    choice: Choice::User(p.clone()),
                }],
            });
        }
        if self.segmented.get().is_none() && forced_boundary(&self.kernel) {
            // A boundary that does not split the fusion (its two sides merge back into
            // one segment) leaves it to the registry as one kernel.
            let _ = self.segment(PlanError::Segmentation(
                "a segment_set boundary is read by another expression".into(),
            ));
        }
        if self.segmented.get().is_none() {
            match Registry::standard().decide(&self.kernel, info) {
                Ok(d) => {
                    if d.kind() == SchedulerKind::Default {
                        if let Some(segments) = self.tuned_segments(info, wide) {
                            return Ok(segments);
                        }
                    }
                    return Ok(Decisions {
                        segmented: false,
                        segments: vec![SegmentDecision {
                            info: info.clone(),
                            wide,
                            choice: Choice::Decided(Box::new(d)),
                        }],
                    });
                }
                Err(refused) => self.segment(PlanError::NoScheduler(refused))?,
            };
        }
        self.decide_segments(info, wide)
    }

    /// For a fusion only the default schedule takes whole (a correctness fallback):
    /// its segments' decisions when it splits into segments and tuned schedulers take
    /// some of them; the segmentation is then kept for every later call. `None` (and
    /// not tried again) otherwise.
    fn tuned_segments(&self, info: &RuntimeInfo, wide: bool) -> Option<Decisions> {
        if self.default_whole.get().is_some() {
            return None;
        }
        let seg = SegmentedFusion::new(&self.kernel)
            .ok()
            .filter(|seg| seg.segments().len() > 1);
        let tuned = seg.and_then(|seg| {
            let d = self.decide_segments_of(&seg, info, wide).ok()?;
            let any_tuned = d.segments.iter().any(|s| match &s.choice {
                Choice::Decided(d) => d.kind() != SchedulerKind::Default,
                Choice::User(_) => false,
            });
            any_tuned.then(|| {
                let _ = self.segmented.set(seg);
                d
            })
        });
        if tuned.is_none() {
            // The whole fusion runs as one default kernel, now and later.
            let _ = self.default_whole.set(());
        }
        tuned
    }

    /// Each segment's decision, for the sizes and layouts it will see.
    fn decide_segments(&self, info: &RuntimeInfo, wide: bool) -> Result<Decisions, PlanError> {
        let seg = self.segmented.get().ok_or(PlanError::Segmentation(
            "internal: no segmentation to decide".into(),
        ))?;
        self.decide_segments_of(seg, info, wide)
    }

    /// [`decide_segments`](Self::decide_segments) of a given segmentation.
    fn decide_segments_of(
        &self,
        seg: &SegmentedFusion,
        info: &RuntimeInfo,
        wide: bool,
    ) -> Result<Decisions, PlanError> {
        let mut segments = Vec::with_capacity(seg.segments().len());
        for k in 0..seg.segments().len() {
            let seg_info =
                segment_info(seg, k, info).ok_or(PlanError::SegmentSizes { segment: k })?;
            let fusion = seg.segments()[k].fusion();
            let d = Registry::standard()
                .decide(fusion, &seg_info)
                .map_err(|r| PlanError::Segment {
                    segment: k,
                    error: Box::new(PlanError::NoScheduler(r)),
                })?;
            segments.push(SegmentDecision {
                wide: wide || wide_for(fusion, &seg_info),
                info: seg_info,
                choice: Choice::Decided(Box::new(d)),
            });
        }
        Ok(Decisions {
            segmented: true,
            segments,
        })
    }

    /// Segments the kernel fusion after `why` kept one kernel from running it; an error
    /// when it does not split into more than one segment (one would fail the same way).
    fn segment(&self, why: PlanError) -> Result<(), PlanError> {
        if self.segmented.get().is_some() {
            return Ok(());
        }
        let failed = |e| PlanError::Segmentation(format!("{why}; segmenting it failed too: {e}"));
        let mut seg = SegmentedFusion::new(&self.kernel).map_err(failed)?;
        if seg.segments().len() < 2 {
            seg = SegmentedFusion::with_creation_apart(&self.kernel).map_err(failed)?;
        }
        if seg.segments().len() < 2 {
            return Err(why);
        }
        let _ = self.segmented.set(seg);
        Ok(())
    }

    /// Schedules and lowers every decided segment once (see the module documentation).
    pub fn lower(&self, decided: &Decisions) -> Result<ExecutionPlan, PlanError> {
        match self.lower_decided(decided) {
            Err(e) if !decided.segmented && !decided.is_user() => {
                self.segment(e)?;
                let d =
                    self.decide_segments(&decided.segments[0].info, decided.segments[0].wide)?;
                self.lower_decided(&d)
            }
            other => other,
        }
    }

    fn lower_decided(&self, decided: &Decisions) -> Result<ExecutionPlan, PlanError> {
        let mut segments = Vec::with_capacity(decided.segments.len());
        for (k, d) in decided.segments.iter().enumerate() {
            let (fusion, inputs, outputs, release) = match (decided.segmented, self.segmented.get())
            {
                (true, Some(seg)) => {
                    let s = &seg.segments()[k];
                    (
                        s.fusion().clone(),
                        s.inputs().to_vec(),
                        s.outputs().to_vec(),
                        seg.release_after(k).to_vec(),
                    )
                }
                _ => (
                    self.kernel.clone(),
                    self.kernel
                        .inputs()
                        .iter()
                        .map(|&v| SegmentValue::Val(v))
                        .collect(),
                    self.kernel.outputs().iter().map(|o| o.val).collect(),
                    Vec::new(),
                ),
            };
            let lowered = match &d.choice {
                Choice::Decided(dec) => dec.lower(&fusion, d.wide),
                Choice::User(p) => lower_with(&fusion, p, d.wide),
            };
            let lowered = match lowered {
                Ok(l) => l,
                Err(e) if decided.segmented => {
                    return Err(PlanError::Segment {
                        segment: k,
                        error: Box::new(e),
                    })
                }
                Err(e) => return Err(e),
            };
            let refused = match &d.choice {
                Choice::Decided(dec) => dec.refused().clone(),
                Choice::User(_) => Rejections::default(),
            };
            segments.push(match lowered {
                Some(p) => SegmentPlan {
                    fusion,
                    inputs,
                    outputs,
                    release,
                    scheduler: p.scheduler,
                    params: p.params,
                    refused,
                    fallback: p.fallback,
                    kernel: Some(PlannedKernel {
                        scheduled: p.scheduled,
                        kernel: p.kernel,
                    }),
                },
                None => SegmentPlan {
                    fusion,
                    inputs,
                    outputs,
                    release,
                    scheduler: "no-op",
                    params: d.params().clone(),
                    refused,
                    fallback: None,
                    kernel: None,
                },
            });
        }
        // Segments number their values in the segmented fusion, which may hold more
        // values than the kernel fusion (private copies of cheap values).
        let num_vals = match (decided.segmented, self.segmented.get()) {
            (true, Some(seg)) => seg.original().num_vals(),
            _ => self.kernel.num_vals(),
        };
        let beyond = segments.iter().flat_map(|s| {
            let ins = s.inputs.iter().filter_map(|x| match x {
                SegmentValue::Val(v) => Some(*v),
                SegmentValue::Extent(_) => None,
            });
            ins.chain(s.outputs.iter().copied())
                .chain(s.release.iter().copied())
        });
        if let Some(v) = beyond.into_iter().find(|v| v.index() >= num_vals) {
            return Err(PlanError::Internal(format!(
                "segment value {v} is not among the plan's {num_vals} values"
            )));
        }
        Ok(ExecutionPlan {
            host: self.host.clone(),
            forward: self.forward.clone(),
            segmented: decided.segmented,
            segments,
            inputs: self.kernel.inputs().to_vec(),
            outputs: self.kernel.outputs().iter().map(|o| o.val).collect(),
            num_vals,
        })
    }
}

/// The registry's decisions for one call, one per segment, before anything is
/// scheduled (see [`FusionPlanner::decide`]).
#[derive(Debug)]
pub struct Decisions {
    segmented: bool,
    segments: Vec<SegmentDecision>,
}

#[derive(Debug)]
struct SegmentDecision {
    /// What the segment's heuristics saw.
    info: RuntimeInfo,
    wide: bool,
    choice: Choice,
}

/// What a segment runs with: the registry's decision (its analysis kept for
/// scheduling), or params the user gave.
#[derive(Debug)]
enum Choice {
    Decided(Box<Decision>),
    User(HeuristicParams),
}

impl SegmentDecision {
    fn params(&self) -> &HeuristicParams {
        match &self.choice {
            Choice::Decided(d) => d.params(),
            Choice::User(p) => p,
        }
    }
}

impl Decisions {
    /// True when the kernel fusion runs as segments.
    pub fn is_segmented(&self) -> bool {
        self.segmented
    }

    /// True when the params are the user's.
    pub fn is_user(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s.choice, Choice::User(_)))
    }

    /// Per segment: the scheduler, its params, whether it indexes with 64 bits, and why
    /// the schedulers before it refused (empty for user params).
    pub fn segments(
        &self,
    ) -> impl Iterator<
        Item = (
            crate::scheduler::SchedulerKind,
            &HeuristicParams,
            bool,
            Option<&Rejections>,
        ),
    > {
        self.segments.iter().map(|s| match &s.choice {
            Choice::Decided(d) => (d.kind(), d.params(), s.wide, Some(d.refused())),
            Choice::User(p) => (p.kind(), p, s.wide, None),
        })
    }

    /// True when `plan` runs the kernels these decisions would: the same segments, each
    /// with params that generate the same kernel ([`HeuristicParams::same_kernel`]) and
    /// the same index width. A runtime compiled for `plan` then serves this call.
    pub fn same_kernels(&self, plan: &ExecutionPlan) -> bool {
        self.segmented == plan.segmented
            && self.segments.len() == plan.segments.len()
            && self.segments.iter().zip(&plan.segments).all(|(d, s)| {
                s.params.same_kernel(d.params())
                    && s.kernel.as_ref().is_none_or(|k| {
                        (k.kernel.abi.index_type == crate::codegen::IndexType::I64) == d.wide
                    })
            })
    }
}

/// True when a `segment_set` result is read by another expression: the fusion runs as
/// segments split there, whatever the schedulers would take.
fn forced_boundary(fusion: &Fusion) -> bool {
    let mut boundary = vec![false; fusion.num_vals()];
    for (_, e) in fusion.exprs() {
        if matches!(e.op, crate::ir::Op::SegmentSet) {
            for o in &e.outputs {
                boundary[o.index()] = true;
            }
        }
    }
    fusion
        .exprs()
        .any(|(_, e)| e.inputs.iter().any(|i| boundary[i.index()]))
}

/// 64-bit index math for `fusion` on `info`: an input view spanning 2^31 elements
/// through its strides, or a tensor of 2^31 elements.
fn wide_for(fusion: &Fusion, info: &RuntimeInfo) -> bool {
    let spans = info.inputs.iter().any(|i| match i {
        InputInfo::Tensor(t) => span_elements(t) >= 1 << 31,
        InputInfo::Scalar(_) => false,
    });
    spans || index_type_for(fusion, info) == crate::codegen::IndexType::I64
}

/// The elements a view reaches from its first: `1 + Σ (size - 1) * stride`.
fn span_elements(t: &TensorInfo) -> u128 {
    if t.sizes.iter().any(|&s| s <= 0) {
        return 0;
    }
    1 + t
        .sizes
        .iter()
        .zip(&t.strides)
        .map(|(&n, &s)| (n as u128 - 1) * s.unsigned_abs() as u128)
        .sum::<u128>()
}

/// Per input of `fusion`: whether it is a scalar that some tensor extent reads.
fn extent_scalar_inputs(fusion: &Fusion) -> Vec<bool> {
    let mut used = vec![false; fusion.num_vals()];
    for (_, v) in fusion.vals() {
        if let Some(t) = v.tensor() {
            for d in &t.domain {
                d.extent.for_each_val(&mut |id| {
                    if let Some(u) = used.get_mut(id.index()) {
                        *u = true;
                    }
                });
            }
        }
    }
    fusion
        .inputs()
        .iter()
        .map(|&i| !fusion.val(i).is_tensor() && used[i.index()])
        .collect()
}

/// What the heuristics of segment `index` see when the segmented fusion runs on
/// `info` (of its original fusion): original inputs as they are, intermediates as
/// fresh contiguous 16-byte-aligned allocations of their sizes, extents as integers.
/// `None` when a size cannot be computed from the inputs.
pub fn segment_info(
    seg: &SegmentedFusion,
    index: usize,
    info: &RuntimeInfo,
) -> Option<RuntimeInfo> {
    let fusion = seg.original();
    let dim = |t: ValId, axis: usize| -> Option<i64> {
        match info.inputs.get(fusion.input_position(t)?)? {
            InputInfo::Tensor(x) => x.sizes.get(axis).copied(),
            InputInfo::Scalar(_) => None,
        }
    };
    let scalar = |v: ValId| -> Option<i64> {
        match info.inputs.get(fusion.input_position(v)?)? {
            InputInfo::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
            InputInfo::Tensor(_) => None,
        }
    };
    let inputs = seg
        .segments()
        .get(index)?
        .inputs()
        .iter()
        .map(|x| match x {
            SegmentValue::Extent(e) => dim(e.tensor, e.axis as usize)
                .map(|n| InputInfo::Scalar(crate::ScalarValue::Int(n))),
            SegmentValue::Val(v) => {
                if let Some(p) = fusion.input_position(*v) {
                    return info.inputs.get(p).cloned();
                }
                let val = fusion.val(*v);
                let ValKind::Tensor(t) = &val.kind else {
                    return None;
                };
                let sizes = t
                    .shape()
                    .map(|d| d.extent.eval(&dim, &scalar).map(|n| n.max(0)))
                    .collect::<Option<Vec<i64>>>()?;
                let mut strides = vec![0i64; sizes.len()];
                let mut next = 1i64;
                for (s, &n) in strides.iter_mut().zip(&sizes).rev() {
                    *s = next;
                    next = next.saturating_mul(n.max(1));
                }
                Some(InputInfo::Tensor(TensorInfo {
                    dtype: val.dtype,
                    sizes,
                    strides,
                    alignment: 16,
                }))
            }
        })
        .collect::<Option<Vec<_>>>()?;
    Some(RuntimeInfo {
        device: info.device.clone(),
        inputs,
    })
}

#[cfg(test)]
mod tests;
