//! Running a fusion on a [`Device`]: argument checks, then execution.
//!
//! [`FusionExecutorCache`] is the per-definition entry point that the `fusion!` macro and
//! the run-time API share. It checks every argument against the fusion's input
//! declarations ([`crate::args::check_args`]: kind, dtype, rank, static and broadcast
//! sizes, and the memory layout the declaration promises) before anything runs, so a
//! layout that contradicts the declaration is a typed error on every device, never a
//! silently wrong result.
//!
//! On the CPU reference device the fusion runs on [`nvfuser_core::eval::evaluate`]. On a
//! GPU the executor makes no scheduling decision: the core's [`FusionPlanner`] splits
//! the host scalar math off once, then for each new call decides
//! ([`FusionPlanner::decide`]) and plans ([`FusionPlanner::lower`]) an
//! [`ExecutionPlan`]: one kernel, or the segments of a fusion no single kernel takes.
//! The executor compiles the plan's kernels and keeps the result in a bounded LRU keyed
//! by input signature and sizes ([`crate::runtime`]). A cached call checks the
//! arguments, evaluates the host scalars (if any), computes the signature (a few packed
//! words, no formatting, no hashing of the fusion), finds the runtime and launches it.
//!
//! Without the `cuda` feature the CPU reference device is the only device: its calls,
//! the checks and offline planning ([`FusionExecutorCache::plan_for`]) are compiled, the
//! GPU runtime cache is not.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "cuda")]
use std::sync::{Arc, Mutex};

use nvfuser_core::eval::{evaluate, EvalInput};
use nvfuser_core::ir::{OutputSource, ViewChain, ViewLayout};
use nvfuser_core::plan::{Decisions, ExecutionPlan, FusionPlanner};
use nvfuser_core::scheduler::{
    DeviceInfo, HeuristicParams, InputInfo, PlanError, RuntimeInfo, TensorInfo,
};
use nvfuser_core::segment::SegmentedFusion;
use nvfuser_core::Fusion;

pub use crate::args::Arg;
use crate::args::{bound_args, check_args_with};
use crate::dump::{Dump, DumpFlags};
use crate::launch::{arg_scalar, eval_on_args};
use crate::profile::host;
#[cfg(feature = "cuda")]
use crate::profile::host::HostPhase;
pub use crate::runtime::InputSignature;
#[cfg(feature = "cuda")]
use crate::runtime::{
    call_sizes, check_reads, execute, Cached, Entry, LruClock, Runtime, RuntimeCache,
};
use crate::{Device, Error, Tensor};

#[cfg(feature = "cuda")]
mod in_place;
mod inspect;

/// Runs one fusion definition on any device, caching what can be cached.
///
/// On a GPU the first call with a new input signature (see [`InputSignature`]) and
/// sizes asks the core's [`FusionPlanner`] for an [`ExecutionPlan`] (one kernel, or one
/// per segment), compiles and loads its kernels; later calls with the same signature
/// and sizes reuse that runtime, and calls with new sizes whose decisions match a
/// runtime's plan ([`Decisions::same_kernels`]) reuse it without scheduling or
/// compiling anything. The runtimes are
/// kept in a bounded LRU ([`FusionExecutorCache::with_capacity`]); the least recently
/// used one is evicted (its module unloaded when nothing else holds it) instead of
/// failing. A fusion that no kernel or segmentation can run is a
/// [`Error::UnsupportedFusion`] naming what is missing: it never falls back to the
/// CPU on a GPU device.
///
/// ```
/// use nvfuser_core::prelude::*;
/// use nvfuser_cuda::{Device, FusionExecutorCache};
///
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1])?;
/// let y = fd.relu(x)?;
/// fd.add_output(y)?;
/// let exec = FusionExecutorCache::new(fd.finish()?);
/// let cpu = Device::cpu();
/// let input = cpu.tensor_from_slice(&[-1.0f32, 2.0, -3.0], [3])?;
/// let out = exec.run(&cpu, &[(&input).into()])?;
/// assert_eq!(out[0].to_vec::<f32>()?, vec![0.0, 2.0, 0.0]);
/// # Ok::<(), nvfuser_cuda::Error>(())
/// ```
#[derive(Debug)]
pub struct FusionExecutorCache {
    /// What the core decided once for this fusion (host scalars, forwarded outputs,
    /// read checks, segmentation once needed), and the planning of each call.
    planner: FusionPlanner,
    /// Some output is stored into an input (`add_output_alias`), after the kernels.
    #[cfg(feature = "cuda")]
    in_place: bool,
    /// In-place outputs may be written by the kernel itself ([`Self::direct_into`]).
    direct_on: bool,
    #[cfg(feature = "cuda")]
    runtimes: Mutex<RuntimeCache>,
    /// The runtime cache's clock (last uses).
    #[cfg(feature = "cuda")]
    clock: LruClock,
    /// The entry of the last replayed call (automatic params only): a call that repeats
    /// it replays without computing its signature or taking the cache's lock.
    #[cfg(feature = "cuda")]
    last: Mutex<Option<Arc<Cached>>>,
    hits: AtomicU64,
    replays: AtomicU64,
    direct: AtomicU64,
    misses: AtomicU64,
    reuses: AtomicU64,
    evictions: AtomicU64,
    /// This executor's own dump; `None`: the process's `NVFUSER_DUMP`.
    dump: Option<Dump>,
    /// Whether repeated calls replay recorded launches ([`Self::with_replay`]).
    replay: bool,
}

/// Counters of a [`FusionExecutorCache`]'s runtime cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// GPU calls that reused a compiled runtime.
    pub hits: u64,
    /// Of the hits, those that replayed the launch recorded by an earlier call with
    /// the same layout, sizes and strides, without repeating its checks (see
    /// [`FusionExecutorCache::run`]).
    pub replays: u64,
    /// GPU calls that built a runtime (schedule, generate, compile, load).
    pub misses: u64,
    /// GPU calls with new sizes whose heuristics matched a runtime already built for
    /// the same layout: the kernel was reused without compiling.
    pub reuses: u64,
    /// Runtimes evicted to stay within the capacity.
    pub evictions: u64,
    /// Runtimes held now.
    pub runtimes: usize,
    /// GPU calls whose kernel wrote an in-place output straight into its input (no
    /// store after the call; see `FusionPlanner::direct_in_place`).
    pub direct_in_place: u64,
}

/// The error of a forwarded output whose source is missing (a planner bug).
fn missing_output() -> Error {
    Error::Internal {
        reason: "an output's source is missing (forwarded outputs)".into(),
    }
}

/// A call's input signature, sizes and runtime cache lookup.
#[cfg(feature = "cuda")]
type LookedUp = (
    InputSignature,
    smallvec::SmallVec<[u64; 8]>,
    Option<Arc<Cached>>,
);

/// Runtimes kept per executor unless [`FusionExecutorCache::with_capacity`] says
/// otherwise.
pub const DEFAULT_RUNTIME_CAPACITY: usize = 16;

/// What the heuristics need to know about a GPU.
pub fn device_info(props: &crate::DeviceProperties) -> DeviceInfo {
    DeviceInfo {
        sm_count: props.sm_count,
        warp_size: props.warp_size,
        max_threads_per_block: props.max_threads_per_block,
        max_threads_per_sm: props.max_threads_per_sm,
        registers_per_sm: props.registers_per_sm,
        shared_memory_per_block: props.shared_memory_per_block_optin,
        l2_cache_bytes: props.l2_cache_bytes,
        max_grid_dim: props.max_grid_dim,
    }
}

/// The heuristics' view of a call on a GPU.
pub fn runtime_info(props: &crate::DeviceProperties, args: &[Arg<'_>]) -> RuntimeInfo {
    runtime_info_for(device_info(props), args)
}

/// The heuristics' view of a call on a device described by `device` (a preset such as
/// [`DeviceInfo::h100_for_tests`] plans without a GPU): sizes, strides and the
/// alignment of each tensor's first element (its address on a GPU).
pub fn runtime_info_for(device: DeviceInfo, args: &[Arg<'_>]) -> RuntimeInfo {
    RuntimeInfo {
        device,
        inputs: args
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => InputInfo::Tensor(TensorInfo {
                    dtype: t.dtype(),
                    sizes: t.sizes().iter().map(|&s| s as i64).collect(),
                    strides: t.strides().iter().map(|&s| s as i64).collect(),
                    alignment: t.data_alignment().min(16) as u32,
                }),
                Arg::Scalar(s) => InputInfo::Scalar(*s),
            })
            .collect(),
    }
}

impl FusionExecutorCache {
    /// An executor for `fusion`, keeping up to [`DEFAULT_RUNTIME_CAPACITY`] runtimes.
    pub fn new(fusion: Fusion) -> Self {
        Self::with_capacity(fusion, DEFAULT_RUNTIME_CAPACITY)
    }

    /// An executor keeping up to `capacity` compiled runtimes (at least 1; GPU runtimes
    /// only, so without effect in a build without the `cuda` feature).
    pub fn with_capacity(fusion: Fusion, capacity: usize) -> Self {
        Self::with_planner(FusionPlanner::new(fusion), capacity)
    }

    /// An executor that runs `segmented`, a segmentation made elsewhere (for example
    /// with a custom rule), segment by segment.
    pub fn with_segmentation(segmented: SegmentedFusion) -> Self {
        Self::with_planner(
            FusionPlanner::with_segmentation(segmented),
            DEFAULT_RUNTIME_CAPACITY,
        )
    }

    fn with_planner(planner: FusionPlanner, capacity: usize) -> Self {
        #[cfg(feature = "cuda")]
        let in_place = planner
            .fusion()
            .outputs()
            .iter()
            .any(|o| o.alias_of.is_some());
        #[cfg(not(feature = "cuda"))]
        let _ = capacity;
        FusionExecutorCache {
            #[cfg(feature = "cuda")]
            in_place,
            direct_on: true,
            planner,
            #[cfg(feature = "cuda")]
            runtimes: Mutex::new(RuntimeCache::new(capacity)),
            #[cfg(feature = "cuda")]
            clock: LruClock::default(),
            #[cfg(feature = "cuda")]
            last: Mutex::new(None),
            hits: AtomicU64::new(0),
            replays: AtomicU64::new(0),
            direct: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            reuses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            dump: None,
            replay: true,
        }
    }

    /// Turns writing in-place outputs straight into their inputs on (the default) or
    /// off. Off, every in-place output is computed into a new buffer and copied into
    /// its input after the call: for measuring what the direct write saves, or ruling
    /// it out while debugging (see `FusionPlanner::direct_in_place`).
    pub fn with_direct_in_place(mut self, on: bool) -> Self {
        self.direct_on = on;
        self
    }

    /// Turns the replay of recorded launches on (the default) or off. Off, every call
    /// runs every check and packs its parameters afresh (see [`Self::run`]): for
    /// measuring what the replay saves, or ruling it out while debugging.
    pub fn with_replay(mut self, on: bool) -> Self {
        self.replay = on;
        self
    }

    /// Gives this executor its own dump (stages and writer) instead of the process's
    /// `NVFUSER_DUMP` (see [`crate::dump`]).
    pub fn with_dump(mut self, dump: Dump) -> Self {
        self.dump = Some(dump);
        self
    }

    fn dump(&self) -> &Dump {
        self.dump.as_ref().unwrap_or_else(|| Dump::from_env())
    }

    /// The fusion this executor runs.
    pub fn fusion(&self) -> &Fusion {
        self.planner.fusion()
    }

    /// The fusion kernels run: [`FusionExecutorCache::fusion`], or its kernel part when
    /// scalars computed inside it are evaluated on the host (see
    /// [`nvfuser_core::scheduler::host_scalars`]); its inputs are the fusion's, then
    /// the computed scalars.
    pub fn kernel_fusion(&self) -> &Fusion {
        self.planner.kernel_fusion()
    }

    /// The core's planner of this fusion.
    pub fn planner(&self) -> &FusionPlanner {
        &self.planner
    }

    /// The segmentation the fusion runs with, once a call needed one (no single kernel
    /// takes it); `None` before that or when one kernel runs it.
    pub fn segmentation(&self) -> Option<&SegmentedFusion> {
        self.planner.segmentation()
    }

    /// Checks `args` against the fusion's inputs (with the size checks found once).
    fn check_args(&self, device: &Device, args: &[Arg<'_>]) -> Result<(), Error> {
        check_args_with(self.fusion(), self.planner.size_checks(), device, args)
    }

    /// The arguments of the kernel fusion: `args` (checked), then the scalars the host
    /// program computes from them.
    fn kernel_args<'s, 'a>(&self, args: &'s [Arg<'a>]) -> Result<Cow<'s, [Arg<'a>]>, Error> {
        if self.planner.host().is_none() {
            return Ok(Cow::Borrowed(args));
        }
        let extra = self.planner.host_scalars(&bound_args(args))?;
        let mut all = args.to_vec();
        all.extend(extra.into_iter().map(Arg::Scalar));
        Ok(Cow::Owned(all))
    }

    /// Runtime cache counters.
    pub fn stats(&self) -> ExecutorStats {
        ExecutorStats {
            hits: self.hits.load(Ordering::Relaxed),
            replays: self.replays.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            reuses: self.reuses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            #[cfg(feature = "cuda")]
            runtimes: self.lock().entries.len(),
            #[cfg(not(feature = "cuda"))]
            runtimes: 0,
            direct_in_place: self.direct.load(Ordering::Relaxed),
        }
    }

    /// Checks `args` against the fusion's inputs and runs it on `device`; returns the
    /// outputs in the fusion's order.
    ///
    /// On a GPU, a call with the layout, sizes and strides of an earlier call that ran
    /// one kernel replays that call's launch: its outputs' shapes, launch dims and
    /// packed parameters are reused with this call's addresses and scalars, and only
    /// what can differ (the tensors' device, the scalars against their dtypes) is
    /// checked again, since every other check depends only on what matched. Anything
    /// else runs every check. ([`ExecutorStats::replays`] counts these calls.)
    pub fn run(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, Error> {
        self.run_impl(device, args, None)
    }

    /// [`run`](Self::run) with the given heuristic params instead of the registry's
    /// (GPU devices only). Params out of range, of a scheduler that cannot take the
    /// fusion, or compiled for other sizes (a persistent kernel's `hidden`) are a
    /// [`Error::InvalidParams`] or [`Error::UnsupportedFusion`]; vector widths the
    /// inputs do not allow are refused at launch. Runtimes built from user params are
    /// cached separately from the automatic ones.
    pub fn run_with_params(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        params: &HeuristicParams,
    ) -> Result<Vec<Tensor>, Error> {
        if !device.is_gpu() {
            return Err(Error::NotAGpu {
                op: "FusionExecutorCache::run_with_params",
            });
        }
        self.run_impl(device, args, Some(params))
    }

    fn run_impl(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
    ) -> Result<Vec<Tensor>, Error> {
        host::begin();
        // Stateful random ops: the device's generator supplies the seed and offset a
        // call left out (and moves on).
        let completed = crate::generator::complete_args(self.fusion(), device, args, true)?;
        let args = completed.as_deref().unwrap_or(args);
        if !device.is_gpu() {
            self.check_args(device, args)?;
            return self.run_on_reference(device, args);
        }
        #[cfg(feature = "cuda")]
        return self.run_on_gpu(device, args, user);
        // Only the CPU device exists without `cuda`.
        #[cfg(not(feature = "cuda"))]
        {
            let _ = user;
            Err(Error::CudaDisabled {
                op: "FusionExecutorCache::run",
            })
        }
    }

    /// [`Self::run`] on a GPU (the device is one).
    #[cfg(feature = "cuda")]
    fn run_on_gpu(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
    ) -> Result<Vec<Tensor>, Error> {
        // A call that repeats a recorded one exactly (layout, sizes, strides) replays
        // its launch without the checks it passed (`launch::FastLaunch`).
        let mut looked_up = None;
        if self.replayable() {
            let last = match user {
                None => self.last.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                Some(_) => None,
            };
            let mut replayed = match &last {
                Some(c) => self.run_fast(device, c, args, true)?,
                None => None,
            };
            if replayed.is_some() {
                self.clock
                    .touch(last.as_deref().expect("replayed the last entry"));
            } else {
                let sig = InputSignature::of(device, args);
                let sizes = call_sizes(args, self.planner.extent_scalars());
                let found = self.lock().find(&self.clock, &sig, &sizes, user);
                if let Some(c) = &found {
                    replayed = self.run_fast(device, c, args, false)?;
                    if replayed.is_some() && user.is_none() {
                        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
                    }
                }
                looked_up = Some((sig, sizes, found));
            }
            if let Some(outputs) = replayed {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.replays.fetch_add(1, Ordering::Relaxed);
                let outputs = self.finish(outputs, args);
                host::end(HostPhase::Finish);
                return outputs;
            }
        }
        self.check_args(device, args)?;
        host::end(HostPhase::ArgChecks);
        let args = &self.kernel_args(args)?[..];
        check_reads(&self.planner, args)?;
        let kernel = self.kernel_fusion();
        let outputs = if kernel.outputs().is_empty() {
            Vec::new()
        } else if let Some(views) = self.no_op_outputs(args) {
            views
        } else {
            host::end(HostPhase::HostScalars);
            let cached = self.runtime(device, args, user, looked_up)?;
            let (rt, recipe) = (&cached.runtime, &cached.recipe);
            host::end(HostPhase::Lookup);
            let into = self.direct_into(rt, args);
            match execute(device, rt, recipe, args, self.dump(), None, &into) {
                // A call whose kernel would cover no element but whose outputs have
                // some (a reduction over an empty dim): the reference computes it.
                Err(Error::EmptyLaunch { .. }) => {
                    return self.run_on_reference(device, &args[..self.fusion().inputs().len()]);
                }
                other => other?,
            }
        };
        let outputs = self.finish(outputs, args);
        host::end(HostPhase::Finish);
        outputs
    }

    /// The call computed by the CPU reference evaluator, outputs on `device`.
    fn run_on_reference(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, Error> {
        let inputs = args
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => t.to_host_tensor().map(EvalInput::Tensor),
                Arg::Scalar(s) => Ok(EvalInput::Scalar(*s)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = evaluate(self.fusion(), &inputs)?;
        let outputs = outputs
            .iter()
            .map(|o| device.tensor_from_host(o))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = self.aliased_on_reference(outputs, args)?;
        crate::args::store_in_place(self.fusion(), args, outputs)
    }

    /// The fusion's outputs from the kernel fusion's (`args`: the kernel fusion's
    /// arguments): inputs returned as outputs are the argument tensors themselves, and
    /// views of inputs are views of their buffers.
    #[cfg(feature = "cuda")]
    fn forwarded(&self, outputs: Vec<Tensor>, args: &[Arg<'_>]) -> Result<Vec<Tensor>, Error> {
        let Some(sources) = self.planner.forward() else {
            return Ok(outputs);
        };
        sources
            .iter()
            .map(|s| match s {
                OutputSource::Kernel(k) => outputs.get(*k).cloned().ok_or_else(missing_output),
                OutputSource::Input(_) | OutputSource::View(_) => self.aliased(s, args),
            })
            .collect()
    }

    /// An output that is an input, or a view of one (see [`Self::forwarded`]).
    fn aliased(&self, source: &OutputSource, args: &[Arg<'_>]) -> Result<Tensor, Error> {
        let (OutputSource::Input(p) | OutputSource::View(ViewChain { input: p, .. })) = source
        else {
            return Err(missing_output());
        };
        let Some(Arg::Tensor(t)) = args.get(*p) else {
            return Err(missing_output());
        };
        let OutputSource::View(chain) = source else {
            return Ok((*t).clone());
        };
        let fusion = self.planner.view_fusion().ok_or_else(missing_output)?;
        let input = ViewLayout {
            sizes: t.sizes().to_vec(),
            strides: t.strides().to_vec(),
            offset: t.offset(),
        };
        let extent = |e: &nvfuser_core::ir::Extent| eval_on_args(fusion, args, e).ok();
        let scalar = |v| arg_scalar(fusion, args, v);
        let l = chain
            .layout(fusion, input, &extent, &scalar)
            .ok_or_else(|| Error::Internal {
                reason: format!(
                    "the view of input {p} through {} ops has no layout for sizes {:?} and strides {:?}",
                    chain.exprs.len(),
                    t.sizes(),
                    t.strides()
                ),
            })?;
        t.as_strided(&l.sizes, &l.strides, l.offset)
    }

    /// The reference's outputs with the inputs and views among them replaced by the
    /// arguments' own buffers, as a GPU call returns them (`args`: the call's).
    fn aliased_on_reference(
        &self,
        mut outputs: Vec<Tensor>,
        args: &[Arg<'_>],
    ) -> Result<Vec<Tensor>, Error> {
        let Some(sources) = self.planner.forward() else {
            return Ok(outputs);
        };
        if sources.iter().all(|s| matches!(s, OutputSource::Kernel(_))) {
            return Ok(outputs);
        }
        let args = self.kernel_args(args)?;
        for (o, s) in outputs.iter_mut().zip(sources) {
            if !matches!(s, OutputSource::Kernel(_)) {
                *o = self.aliased(s, &args)?;
            }
        }
        Ok(outputs)
    }

    #[cfg(feature = "cuda")]
    /// The no-op case: a fusion without expressions (every output is an input, e.g. a
    /// cast to the type a tensor already has) returns views of its inputs without a
    /// kernel, as nvFuser's no-op scheduler does.
    fn no_op_outputs(&self, args: &[Arg<'_>]) -> Option<Vec<Tensor>> {
        let kernel = self.kernel_fusion();
        if kernel.num_exprs() != 0 {
            return None;
        }
        kernel
            .outputs()
            .iter()
            .map(|o| match args.get(kernel.input_position(o.val)?)? {
                Arg::Tensor(t) => Some((*t).clone()),
                Arg::Scalar(_) => None,
            })
            .collect()
    }

    #[cfg(feature = "cuda")]
    /// Whether cached calls of this fusion can replay a recorded launch: the kernel
    /// fusion's arguments are the call's (no host scalars), nothing data-dependent is
    /// checked per call, and no launch dump is asked for.
    fn replayable(&self) -> bool {
        self.replay
            && self.planner.host().is_none()
            && self.planner.reads().checks().is_empty()
            && !self.dump().launch_enabled()
    }

    #[cfg(feature = "cuda")]
    /// The call replayed through the fast launch of `cached`'s recipe, or `None` when
    /// it has none or the call does not match the recording one. `unkeyed`: the call
    /// was not looked up by its signature, so its whole key is compared too.
    fn run_fast(
        &self,
        device: &Device,
        cached: &Cached,
        args: &[Arg<'_>],
        unkeyed: bool,
    ) -> Result<Option<Vec<Tensor>>, Error> {
        let Some(fast) = cached.recipe.get().and_then(|r| r.fast()) else {
            return Ok(None);
        };
        let Some((k, function)) = cached.runtime.only_kernel() else {
            return Ok(None);
        };
        let matches = if unkeyed {
            fast.repeats(device, args, self.planner.extent_scalars())
        } else {
            fast.accepts(device, args)
        };
        if !matches {
            return Ok(None);
        }
        host::end(HostPhase::Lookup);
        let into = self.direct_into(&cached.runtime, args);
        let outputs = fast.launch(device, &k.kernel, function, args, &into)?;
        host::end(HostPhase::Launch);
        Ok(Some(outputs))
    }

    #[cfg(feature = "cuda")]
    fn lock(&self) -> std::sync::MutexGuard<'_, RuntimeCache> {
        // A panic while holding the lock leaves a consistent cache (entries are pushed
        // whole), so a poisoned lock is still usable.
        self.runtimes.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(feature = "cuda")]
    /// The runtime for this call: cached for these sizes; else the planner decides and
    /// a runtime of the same layout whose plan runs the same kernels is reused (no
    /// compile); else the plan is lowered and compiled. With `user` params, only
    /// runtimes built from equal user params match.
    ///
    /// `looked_up`: the signature, sizes and cache lookup of this call, when the
    /// caller has made them already.
    fn runtime(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
        looked_up: Option<LookedUp>,
    ) -> Result<Arc<Cached>, Error> {
        let (sig, sizes, found) = match looked_up {
            Some(l) => l,
            None => {
                let sig = InputSignature::of(device, args);
                let sizes = call_sizes(args, self.planner.extent_scalars());
                let found = self.lock().find(&self.clock, &sig, &sizes, user);
                (sig, sizes, found)
            }
        };
        if let Some(found) = found {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(found);
        }
        let props = device.properties().ok_or(Error::NotAGpu {
            op: "FusionExecutorCache::run",
        })?;
        let info = runtime_info(props, args);
        let decided = self.decide(&info, user, sig.wide())?;
        let reused = self.lock().reusable(&sig, user, &decided);
        let rt = match reused {
            Some(rt) => {
                self.reuses.fetch_add(1, Ordering::Relaxed);
                rt
            }
            None => {
                // Built outside the lock: compiling takes milliseconds.
                self.misses.fetch_add(1, Ordering::Relaxed);
                let plan = self.lower(&decided)?;
                Arc::new(Runtime::compile(device, plan)?)
            }
        };
        let cached = Arc::new(Cached::new(rt));
        let evicted = self.lock().insert(
            &self.clock,
            Entry {
                sig,
                sizes,
                user: user.cloned(),
                cached: cached.clone(),
            },
        );
        if let Some(gone) = evicted {
            self.evictions.fetch_add(1, Ordering::Relaxed);
            // An evicted runtime is unloaded once nothing holds it: not even the
            // replay of the last call.
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &gone.cached)) {
                *last = None;
            }
        }
        Ok(cached)
    }

    /// The planner's decisions for a call (`info` of the kernel fusion), with every
    /// refusal dumped under `NVFUSER_DUMP=scheduler`.
    fn decide(
        &self,
        info: &RuntimeInfo,
        user: Option<&HeuristicParams>,
        wide: bool,
    ) -> Result<Decisions, Error> {
        let decided = self.planner.decide(info, user, wide).map_err(plan_error)?;
        let dump = self.dump();
        if dump.flags().contains(DumpFlags::SCHEDULER) {
            let mut text = String::new();
            for (k, (kind, params, wide, refused)) in decided.segments().enumerate() {
                if decided.is_segmented() {
                    text.push_str(&format!("segment {k}:\n"));
                }
                for r in refused.map(|r| r.0.as_slice()).unwrap_or_default() {
                    text.push_str(&format!("  {}: refused: {}\n", r.kind, r.reason));
                }
                text.push_str(&format!(
                    "  {}: takes it (index type {:?})\n  params: {}\n",
                    kind,
                    if wide { "64-bit" } else { "32-bit" },
                    serde_json::to_string(params).unwrap_or_default()
                ));
            }
            dump.section(
                DumpFlags::SCHEDULER,
                "scheduler",
                "scheduler",
                &text.trim_end(),
            );
        }
        Ok(decided)
    }

    /// The plan of decided segments, lowered once each, dumped as selected.
    fn lower(&self, decided: &Decisions) -> Result<ExecutionPlan, Error> {
        let dump = self.dump();
        dump.section(DumpFlags::IR, "ir", "fusion", self.kernel_fusion());
        // The segments before lowering them, so that a segment that fails to schedule
        // can be read.
        if let Some(seg) = self
            .planner
            .segmentation()
            .filter(|_| decided.is_segmented())
        {
            dump.section(DumpFlags::IR, "ir", "segments", seg);
        }
        let plan = self.planner.lower(decided).map_err(plan_error)?;
        if !dump.flags().is_empty() {
            dump.section(DumpFlags::PLAN, "plan", "execution plan", &plan);
            for s in &plan.segments {
                if let Some(why) = &s.fallback {
                    dump.section(
                        DumpFlags::SCHEDULER,
                        "scheduler",
                        "fallback",
                        &format!("{why}; the default schedule takes it"),
                    );
                }
                let Some(k) = &s.kernel else { continue };
                let title = format!("{} ({})", k.kernel.abi.name, s.scheduler);
                dump.section(
                    DumpFlags::SCHEDULED,
                    "scheduled",
                    &title,
                    &k.scheduled.scheduled_ir(),
                );
                dump.section(DumpFlags::CUDA, "cuda", &title, &k.kernel.cuda_source());
            }
        }
        Ok(plan)
    }
}

/// A plan error as the public error: params the user gave that do not fit are
/// [`Error::InvalidParams`], host scalar math failing on the inputs is its own
/// error, anything else is a fusion no kernel runs.
fn plan_error(e: PlanError) -> Error {
    match e {
        PlanError::InvalidParams(e) => Error::InvalidParams {
            reason: e.to_string(),
        },
        PlanError::Inputs(e) => e.into(),
        PlanError::Internal(reason) => Error::Internal { reason },
        e => Error::UnsupportedFusion {
            reason: e.to_string(),
        },
    }
}

/// The runtime cache's keys (`cuda`: the CPU device keeps no runtimes).
#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;
    use crate::runtime::call_sizes;
    use nvfuser_core::builder::Size;
    use nvfuser_core::{DataType, FusionDefinition};

    #[test]
    fn scalars_that_sizes_are_made_of_select_a_runtime_and_others_do_not() {
        // full([n]) * s + x: `n` is a size, `s` is not.
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
        let n = fd.define_scalar(DataType::I64).unwrap();
        let s = fd.define_scalar(DataType::F32).unwrap();
        let f = fd.full(&[Size::Val(n)], s, DataType::F32).unwrap();
        let y = fd.add(f, x).unwrap();
        fd.add_output(y).unwrap();
        let fusion = fd.finish().unwrap();
        let mask = FusionPlanner::new(fusion).extent_scalars().to_vec();
        assert_eq!(mask, [false, true, false]);
        let cpu = Device::cpu();
        let t = cpu.zeros(DataType::F32, [5]).unwrap();
        let key =
            |n: i64, s: f32| call_sizes(&[Arg::Tensor(&t), Arg::from(n), Arg::from(s)], &mask);
        assert_ne!(key(5, 1.0), key(6, 1.0));
        assert_eq!(key(5, 1.0), key(5, 2.0));
    }
}
