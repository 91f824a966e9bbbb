//! A compiled execution plan and the runtime cache that keeps them.
//!
//! A `Runtime` is an [`ExecutionPlan`] (decided in `nvfuser-core`) with each of its
//! kernels compiled and loaded. The executor keeps runtimes in a bounded LRU keyed by
//! the call's [`InputSignature`] and sizes. Running one (`execute`) is the same code
//! for one segment or many: the common case, one kernel of the whole kernel fusion,
//! launches on the call's arguments directly; segments run in order on arguments
//! gathered through their input maps (the call's arguments, earlier segments' outputs,
//! extents of input tensors), and intermediates are dropped after their last reader
//! (stream-ordered frees).
//!
//! Without the `cuda` feature only the signature of a call and the segment chain (which
//! the CPU device's segment-by-segment run shares) are compiled.

#[cfg(feature = "cuda")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "cuda")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "cuda")]
use cudarc::driver::CudaFunction;
#[cfg(feature = "cuda")]
use nvfuser_core::ir::reads::CallValues;
#[cfg(feature = "cuda")]
use nvfuser_core::plan::{Decisions, ExecutionPlan, FusionPlanner, PlannedKernel};
use nvfuser_core::scheduler::vector_alignment;
#[cfg(feature = "cuda")]
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::segment::SegmentValue;
#[cfg(feature = "cuda")]
use nvfuser_core::Fusion;
use nvfuser_core::{DataType, ScalarValue, ValId};
use smallvec::SmallVec;

use crate::args::Arg;
#[cfg(feature = "cuda")]
use crate::dump::Dump;
#[cfg(feature = "cuda")]
use crate::launch::{eval_on_args, launch_kernel_with, launch_recorded, LaunchRecipe};
#[cfg(feature = "cuda")]
use crate::profile::LaunchTimer;
use crate::{Device, Error, Tensor};
#[cfg(feature = "cuda")]
use crate::{KernelCache, KernelRequest, NvrtcOptions};

/// What selects a compiled runtime: device, index width, and per argument the dtype,
/// rank, which dims are contiguous, size 1 or stride 0 (broadcast/expanded), and the
/// alignment class of its vector accesses ([`vector_alignment`]: the largest power of
/// two, at most 16 bytes, dividing the data address and every non-unit stride in bytes,
/// so two views of one shape with row pitches 68 and 66 never share a kernel's 16-byte
/// vectors). Sizes are not part of it: a new batch size reuses the runtime when the
/// heuristics pick the same kernel. Packed into words so a lookup compares a few
/// integers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSignature(SmallVec<[u64; 8]>);

impl InputSignature {
    /// The signature of a call (arguments already checked).
    pub fn of(device: &Device, args: &[Arg<'_>]) -> InputSignature {
        let mut words: SmallVec<[u64; 8]> = SmallVec::new();
        let mut wide = false;
        words.push(device.ordinal().map_or(u64::MAX, |o| o as u64));
        for arg in args {
            match arg {
                Arg::Tensor(t) => {
                    wide |= crate::launch::extent_elements(t) >= 1 << 31;
                    // What vector accesses compiled for this call assume: the address
                    // and every row pitch aligned to this many bytes (a view of pitch 66
                    // f32s must not reuse the 16-byte vectors compiled for pitch 68).
                    let align = vector_alignment(
                        t.data_alignment() as u64,
                        t.sizes(),
                        t.strides(),
                        t.dtype().size_bytes(),
                    )
                    .trailing_zeros() as u64;
                    words.push(dtype_code(t.dtype()) | (t.rank() as u64) << 8 | align << 16);
                    let (sizes, strides) = (t.sizes(), t.strides());
                    let mut word = 0u64;
                    let mut used = 0;
                    let mut expected = 1usize;
                    for axis in (0..sizes.len()).rev() {
                        let bits = (strides[axis] == expected) as u64
                            | ((sizes[axis] == 1) as u64) << 1
                            | ((strides[axis] == 0) as u64) << 2;
                        expected = strides[axis].saturating_mul(sizes[axis]);
                        word |= bits << (3 * used);
                        used += 1;
                        if used == 21 {
                            words.push(word);
                            (word, used) = (0, 0);
                        }
                    }
                    words.push(word);
                }
                Arg::Scalar(s) => words.push(dtype_code(s.natural_dtype()) | 1 << 63),
            }
        }
        words[0] |= (wide as u64) << 62;
        InputSignature(words)
    }

    /// True when the kernel needs 64-bit index math.
    pub(crate) fn wide(&self) -> bool {
        self.0[0] & (1 << 62) != 0
    }
}

fn dtype_code(d: DataType) -> u64 {
    d as u64 + 1
}

#[cfg(feature = "cuda")]
/// The sizes of every tensor argument, flattened (with a rank marker per tensor, so
/// `[2, 3]` and `[2], [3]` differ), and the values of the scalar arguments that sizes
/// are made of (`extent_scalars[i]`: argument `i` appears in an extent, e.g. the length
/// of a `full`), since heuristics and kernels were planned for them. Other scalars (a
/// seed, an `eps`) do not select a runtime.
pub(crate) fn call_sizes(args: &[Arg<'_>], extent_scalars: &[bool]) -> SmallVec<[u64; 8]> {
    let mut out = SmallVec::new();
    for (i, a) in args.iter().enumerate() {
        match a {
            Arg::Tensor(t) => {
                out.push(u64::MAX - t.rank() as u64);
                out.extend(t.sizes().iter().map(|&s| s as u64));
            }
            Arg::Scalar(s) if extent_scalars.get(i) == Some(&true) => {
                out.push(u64::MAX - 64);
                out.push(s.as_i64().map_or(u64::MAX, |v| v as u64));
            }
            Arg::Scalar(_) => {}
        }
    }
    out
}

#[cfg(feature = "cuda")]
/// One cache entry: the layout signature, the sizes of the call, the params if the user
/// gave them, and the runtime (with its last use).
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) sig: InputSignature,
    pub(crate) sizes: SmallVec<[u64; 8]>,
    pub(crate) user: Option<HeuristicParams>,
    /// The runtime and the launch recipe, behind one reference count (a cached call
    /// clones and drops one `Arc`).
    pub(crate) cached: Arc<Cached>,
}

#[cfg(feature = "cuda")]
/// What a cache entry hands to a call.
#[derive(Debug)]
pub(crate) struct Cached {
    pub(crate) runtime: Arc<Runtime>,
    /// What the first launch with exactly this layout and these sizes found (one
    /// kernel plans only).
    pub(crate) recipe: OnceLock<LaunchRecipe>,
    /// The LRU's clock at the last call that used this entry (updated without the
    /// cache's lock by calls that replay the executor's last launch).
    pub(crate) last_use: AtomicU64,
}

#[cfg(feature = "cuda")]
impl Cached {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Cached {
        Cached {
            runtime,
            recipe: OnceLock::new(),
            last_use: AtomicU64::new(0),
        }
    }
}

#[cfg(feature = "cuda")]
/// The runtimes of one executor: a bounded LRU. Its clock is an atomic counter, so a
/// use can be recorded without the lock ([`RuntimeCache::touch`]).
#[derive(Debug)]
pub(crate) struct RuntimeCache {
    capacity: usize,
    pub(crate) entries: Vec<Entry>,
}

#[cfg(feature = "cuda")]
/// The clock of an executor's [`RuntimeCache`].
#[derive(Debug, Default)]
pub(crate) struct LruClock(AtomicU64);

#[cfg(feature = "cuda")]
impl LruClock {
    /// Records a use of `cached` now.
    pub(crate) fn touch(&self, cached: &Cached) {
        let now = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        cached.last_use.store(now, Ordering::Relaxed);
    }
}

#[cfg(feature = "cuda")]
impl RuntimeCache {
    pub(crate) fn new(capacity: usize) -> RuntimeCache {
        RuntimeCache {
            capacity: capacity.max(1),
            entries: Vec::new(),
        }
    }

    /// The runtime built for exactly this layout, these sizes and these user params.
    pub(crate) fn find(
        &mut self,
        clock: &LruClock,
        sig: &InputSignature,
        sizes: &[u64],
        user: Option<&HeuristicParams>,
    ) -> Option<Arc<Cached>> {
        let e = self
            .entries
            .iter()
            .find(|e| e.sizes[..] == *sizes && e.sig == *sig && e.user.as_ref() == user)?;
        clock.touch(&e.cached);
        Some(e.cached.clone())
    }

    /// A runtime of the same layout and user params whose plan runs the kernels
    /// `decided` would (other sizes, same kernels).
    pub(crate) fn reusable(
        &self,
        sig: &InputSignature,
        user: Option<&HeuristicParams>,
        decided: &Decisions,
    ) -> Option<Arc<Runtime>> {
        self.entries
            .iter()
            .find(|e| {
                e.sig == *sig
                    && e.user.as_ref() == user
                    && decided.same_kernels(&e.cached.runtime.plan)
            })
            .map(|e| e.cached.runtime.clone())
    }

    /// Adds an entry, evicting the least recently used one when full; returns the
    /// evicted one.
    pub(crate) fn insert(&mut self, clock: &LruClock, entry: Entry) -> Option<Entry> {
        clock.touch(&entry.cached);
        let mut evicted = None;
        if self.entries.len() >= self.capacity {
            let used = |i: usize| self.entries[i].cached.last_use.load(Ordering::Relaxed);
            if let Some(lru) = (0..self.entries.len()).min_by_key(|&i| used(i)) {
                evicted = Some(self.entries.swap_remove(lru));
            }
        }
        self.entries.push(entry);
        evicted
    }
}

#[cfg(feature = "cuda")]
/// A plan with its kernels compiled and loaded (one function per segment that
/// launches one).
pub(crate) struct Runtime {
    pub(crate) plan: ExecutionPlan,
    functions: Vec<Option<CudaFunction>>,
    /// The kernel-fusion inputs whose in-place outputs this plan lets its kernel write
    /// straight into them (`FusionExecutorCache::direct_into`), found on the first call
    /// that asks and kept: it depends on the plan only.
    pub(crate) direct_inputs: std::sync::OnceLock<Vec<usize>>,
}

#[cfg(feature = "cuda")]
impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let schedulers: Vec<&str> = self.plan.segments.iter().map(|s| s.scheduler).collect();
        f.debug_struct("Runtime")
            .field("schedulers", &schedulers)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "cuda")]
impl Runtime {
    /// Compiles every kernel of `plan` (in parallel through the [`KernelCache`] when
    /// there are several) and loads them on `device`.
    pub(crate) fn compile(device: &Device, plan: ExecutionPlan) -> Result<Runtime, Error> {
        let props = device.properties().ok_or(Error::NotAGpu {
            op: "FusionExecutorCache::run",
        })?;
        let options = NvrtcOptions::new(props.arch());
        let sources: Vec<(String, &str)> = plan
            .kernels()
            .map(|k| (k.cuda_source(), k.abi.name.as_str()))
            .collect();
        let requests: Vec<KernelRequest<'_>> = sources
            .iter()
            .map(|(src, name)| KernelRequest::new(src, name, &options))
            .collect();
        let mut compiled = KernelCache::global().compile_many(&requests).into_iter();
        let mut functions = Vec::with_capacity(plan.segments.len());
        for s in &plan.segments {
            functions.push(match &s.kernel {
                Some(k) => {
                    let c = compiled.next().ok_or_else(|| Error::UnsupportedFusion {
                        reason: "internal: a planned kernel was not compiled".into(),
                    })??;
                    Some(device.load_function(&c.kernel, &k.kernel.abi.name)?)
                }
                None => None,
            });
        }
        Ok(Runtime {
            plan,
            functions,
            direct_inputs: std::sync::OnceLock::new(),
        })
    }

    /// The kernel and function of a plan of one kernel, for `op`s that look at one
    /// kernel (inspection, profiling).
    pub(crate) fn single(
        &self,
        op: &'static str,
    ) -> Result<(&PlannedKernel, &CudaFunction), Error> {
        let launched: Vec<(&PlannedKernel, &CudaFunction)> = self
            .plan
            .segments
            .iter()
            .zip(&self.functions)
            .filter_map(|(s, f)| Some((s.kernel.as_ref()?, f.as_ref()?)))
            .collect();
        match launched.as_slice() {
            [one] => Ok(*one),
            [] => Err(Error::UnsupportedFusion {
                reason: format!(
                    "{op}: the call is a no-op (every output is empty), so no kernel runs"
                ),
            }),
            many => Err(Error::UnsupportedFusion {
                reason: format!(
                    "{op}: the fusion runs as {} kernels of {} segments; look at them through the plan (FusionExecutorCache::plan)",
                    many.len(),
                    self.plan.segments.len()
                ),
            }),
        }
    }

    /// The kernel and function of an unsegmented plan that launches one (the cached
    /// call's fast path; no allocation).
    pub(crate) fn only_kernel(&self) -> Option<(&PlannedKernel, &CudaFunction)> {
        if self.plan.segmented {
            return None;
        }
        Some((
            self.plan.segments.first()?.kernel.as_ref()?,
            self.functions.first()?.as_ref()?,
        ))
    }

    /// The scheduler of a one-segment plan (`segmented` otherwise).
    pub(crate) fn scheduler(&self) -> &'static str {
        match self.plan.segments.as_slice() {
            [one] => one.scheduler,
            _ => "segmented",
        }
    }
}

#[cfg(feature = "cuda")]
/// Runs a compiled plan on `args` (the kernel fusion's arguments, checked) and returns
/// the kernel fusion's outputs. `timer` records the launch of a one-kernel plan.
pub(crate) fn execute(
    device: &Device,
    rt: &Runtime,
    recipe: &OnceLock<LaunchRecipe>,
    args: &[Arg<'_>],
    dump: &Dump,
    timer: Option<&mut LaunchTimer>,
    into: &[(usize, Tensor)],
) -> Result<Vec<Tensor>, Error> {
    let plan = &rt.plan;
    if !plan.segmented {
        let (Some(segment), Some(function)) = (plan.segments.first(), rt.functions.first()) else {
            return Err(Error::UnsupportedFusion {
                reason: "internal: a plan without segments".into(),
            });
        };
        return match (&segment.kernel, function) {
            (Some(k), Some(function)) => launch_recorded(
                device,
                k.scheduled.fusion(),
                &k.kernel,
                function,
                args,
                dump,
                timer,
                Some(recipe),
                into,
            ),
            _ => empty_outputs(device, &segment.fusion, args),
        };
    }
    run_segments(device, rt, args, dump)
}

#[cfg(feature = "cuda")]
/// The segments of a segmented plan, in order; `args` are the kernel fusion's.
fn run_segments(
    device: &Device,
    rt: &Runtime,
    args: &[Arg<'_>],
    dump: &Dump,
) -> Result<Vec<Tensor>, Error> {
    let plan = &rt.plan;
    let chain = plan
        .segments
        .iter()
        .map(|s| (&s.inputs[..], &s.outputs[..], &s.release[..]));
    let io = (&plan.inputs[..], &plan.outputs[..]);
    run_chain(io, plan.num_vals, chain, args, &mut |k, seg_args| {
        let segment = &plan.segments[k];
        match (&segment.kernel, &rt.functions[k]) {
            (Some(pk), Some(function)) => launch_kernel_with(
                device,
                pk.scheduled.fusion(),
                &pk.kernel,
                function,
                seg_args,
                dump,
                None,
            ),
            _ => empty_outputs(device, &segment.fusion, seg_args),
        }
    })
}

/// One segment of a chain: its input map, the values its outputs are, and the values
/// no later segment reads.
pub(crate) type ChainLink<'s> = (&'s [SegmentValue], &'s [ValId], &'s [ValId]);

/// Runs segment `k` of a chain on its gathered arguments.
pub(crate) type RunSegment<'r> = dyn FnMut(usize, &[Arg<'_>]) -> Result<Vec<Tensor>, Error> + 'r;

/// Runs a chain of segments in order: values by id (the fusion's `inputs` bound to
/// `args`, then every segment's outputs), each segment's arguments gathered through its
/// input map ([`gather_segment_args`]) and passed to `run`, values released after their
/// last reader; returns the values of `outputs`. Shared by the plan runtime and the
/// segment-by-segment runtime of the CPU device.
pub(crate) fn run_chain<'s>(
    (inputs, outputs): (&[ValId], &[ValId]),
    num_vals: usize,
    chain: impl Iterator<Item = ChainLink<'s>>,
    args: &[Arg<'_>],
    run: &mut RunSegment<'_>,
) -> Result<Vec<Tensor>, Error> {
    let mut tensors: Vec<Option<Tensor>> = vec![None; num_vals];
    let mut scalars: Vec<Option<ScalarValue>> = vec![None; num_vals];
    for (&id, arg) in inputs.iter().zip(args) {
        match arg {
            Arg::Tensor(t) => tensors[id.index()] = Some((*t).clone()),
            Arg::Scalar(s) => scalars[id.index()] = Some(*s),
        }
    }
    for (k, (seg_inputs, seg_outputs, release)) in chain.enumerate() {
        let produced = {
            let lookup = |v: ValId| match (tensors.get(v.index())?, scalars[v.index()]) {
                (Some(t), _) => Some(Arg::Tensor(t)),
                (None, Some(s)) => Some(Arg::Scalar(s)),
                (None, None) => None,
            };
            let seg_args = gather_segment_args(k, seg_inputs, &lookup)?;
            run(k, &seg_args)?
        };
        for (&v, t) in seg_outputs.iter().zip(produced) {
            tensors[v.index()] = Some(t);
        }
        for v in release {
            tensors[v.index()] = None;
        }
    }
    outputs
        .iter()
        .map(|&v| {
            tensors[v.index()]
                .clone()
                .ok_or_else(|| Error::InvalidInput {
                    kernel: "segmented fusion".into(),
                    what: format!("the output {v} was computed by no segment"),
                })
        })
        .collect()
}

/// The arguments of segment `index`, in its input order, gathered through its input
/// map: `lookup` gives a value (an input of the segmented fusion, or an earlier
/// segment's output); an extent is read from the sizes of the input tensor that
/// `lookup` returns.
pub(crate) fn gather_segment_args<'a>(
    index: usize,
    inputs: &[SegmentValue],
    lookup: &dyn Fn(ValId) -> Option<Arg<'a>>,
) -> Result<Vec<Arg<'a>>, Error> {
    let missing = |v: ValId| Error::InvalidInput {
        kernel: format!("segment {index}"),
        what: format!(
            "the value {v} is not available (not an input, and no earlier segment computed it)"
        ),
    };
    inputs
        .iter()
        .map(|x| match x {
            SegmentValue::Val(v) => lookup(*v).ok_or_else(|| missing(*v)),
            SegmentValue::Extent(e) => match lookup(e.tensor) {
                Some(Arg::Tensor(t)) => t
                    .sizes()
                    .get(e.axis as usize)
                    .map(|&n| Arg::Scalar(ScalarValue::Int(n as i64)))
                    .ok_or_else(|| missing(e.tensor)),
                _ => Err(missing(e.tensor)),
            },
        })
        .collect()
}

#[cfg(feature = "cuda")]
/// Outputs of a call whose outputs are all empty: allocated, nothing launched. The
/// data-dependent reads (a slice bound or select index out of range is an error even
/// when the result would be empty, as on the CPU reference) were checked on the whole
/// fusion by [`check_reads`] before.
pub(crate) fn empty_outputs(
    device: &Device,
    f: &Fusion,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, Error> {
    let eval = |e: &nvfuser_core::ir::Extent| eval_on_args(f, args, e);
    let size = |e: &nvfuser_core::ir::Extent| -> Result<usize, Error> {
        let n = eval(e)?;
        usize::try_from(n).map_err(|_| Error::InvalidTensor {
            op: "fusion call",
            expected: format!("a non-negative output extent {e}"),
            found: n.to_string(),
        })
    };
    f.outputs()
        .iter()
        .map(|o| {
            let t = f
                .tensor_type(o.val)
                .ok_or_else(|| Error::UnsupportedFusion {
                    reason: format!("the scalar output {}", o.val),
                })?;
            let sizes = t
                .shape()
                .map(|d| size(&d.extent))
                .collect::<Result<Vec<_>, _>>()?;
            device.zeros(f.val(o.val).dtype, &sizes)
        })
        .collect()
}

#[cfg(feature = "cuda")]
/// The checks of data-dependent reads (slice bounds, select indices, reshape sizes,
/// gather index sizes) on the whole fusion, with its host scalars evaluated
/// (`args` are the kernel fusion's arguments): an op only the fusion's scalar math
/// reaches (the reshape whose size an `iota` reads), or one in a segment, is checked
/// as the CPU reference checks it, before anything is launched.
pub(crate) fn check_reads(planner: &FusionPlanner, args: &[Arg<'_>]) -> Result<(), Error> {
    // The common case on the cached path: nothing data-dependent to check.
    if planner.reads().is_empty() {
        return Ok(());
    }
    // Original value ids: the fusion's inputs keep their positions, the host
    // program's results follow them (the kernel fusion's own ids are renumbered).
    let f = planner.fusion();
    let n = f.inputs().len();
    let position = |v: nvfuser_core::ValId| {
        f.input_position(v).or_else(|| {
            let host = planner.host()?;
            host.computed().iter().position(|&c| c == v).map(|i| n + i)
        })
    };
    let dim = |t: nvfuser_core::ValId, axis: usize| match args.get(position(t)?)? {
        Arg::Tensor(x) => x.sizes().get(axis).map(|&s| s as i64),
        Arg::Scalar(_) => None,
    };
    // A scalar argument or host result; a `size` the kernel does not need is
    // evaluated from its tensor's extent.
    fn scalar_of(
        f: &Fusion,
        v: nvfuser_core::ValId,
        arg: &dyn Fn(nvfuser_core::ValId) -> Option<i64>,
        dim: &dyn Fn(nvfuser_core::ValId, usize) -> Option<i64>,
        depth: u32,
    ) -> Option<i64> {
        if let Some(x) = arg(v) {
            return Some(x);
        }
        if depth > 16 {
            return None;
        }
        let e = f.expr(f.val(v).definition?);
        let sub = |w: nvfuser_core::ValId| scalar_of(f, w, arg, dim, depth + 1);
        let operand = |k: usize| -> Option<i64> {
            let w = *e.inputs.get(k)?;
            match f.val(w).constant() {
                Some(c) => c.as_i64(),
                None => sub(w),
            }
        };
        use nvfuser_core::ir::{BinaryOp, Op};
        match e.op {
            Op::Size { axis } => f
                .tensor_type(*e.inputs.first()?)?
                .shape()
                .nth(axis)?
                .extent
                .eval(dim, &sub),
            // Integer size arithmetic (`x.size(3) - 2`), wrapping like the kernels.
            Op::Binary(b @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul))
                if !f.val(v).dtype.is_float() =>
            {
                let (x, y) = (operand(0)?, operand(1)?);
                Some(match b {
                    BinaryOp::Add => x.wrapping_add(y),
                    BinaryOp::Sub => x.wrapping_sub(y),
                    _ => x.wrapping_mul(y),
                })
            }
            _ => None,
        }
    }
    let arg = |v: nvfuser_core::ValId| match args.get(position(v)?)? {
        Arg::Scalar(s) => s.cast(f.val(v).dtype).as_i64(),
        Arg::Tensor(_) => None,
    };
    let scalar = |v: nvfuser_core::ValId| scalar_of(f, v, &arg, &dim, 0);
    let eval = |e: &nvfuser_core::ir::Extent| -> Result<i64, Error> {
        e.eval(&dim, &scalar).ok_or_else(|| Error::InvalidTensor {
            op: "fusion call",
            expected: format!("an extent computable from the inputs: {e}"),
            found: "an unbound or invalid value".into(),
        })
    };
    let known = |e: &nvfuser_core::ir::Extent| eval(e).ok();
    let call = CallValues {
        extent: &known,
        scalar: &scalar,
    };
    planner
        .reads()
        .check(f, &call, false)
        .map_err(crate::launch::read_error)
}
