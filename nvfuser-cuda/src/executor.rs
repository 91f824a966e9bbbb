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
//! GPU the core plans the kernel ([`nvfuser_core::scheduler::Registry::decide`], then
//! [`nvfuser_core::scheduler::Decision::lower`]: the registry's first taker, scheduled
//! and lowered once, the default schedule as its fallback); the executor compiles it and
//! keeps the runtime in a bounded LRU keyed by input signature and sizes (a runtime of
//! equal params is reused for new sizes without compiling). When no single kernel takes
//! the fusion, its segments run ([`crate::SegmentedRuntime`]). A cached call checks the
//! arguments, computes the signature (a few packed words, no formatting, no hashing of
//! the fusion), finds the runtime and launches it through [`crate::launch`].

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaFunction;
use nvfuser_core::codegen::{IndexType, Kernel};
use nvfuser_core::eval::{evaluate, EvalInput};
use nvfuser_core::ir::bind::BoundArg;
use nvfuser_core::ir::reads::{CallValues, ReadChecks};
use nvfuser_core::ir::OutputSource;
use nvfuser_core::sched::ScheduledFusion;
use nvfuser_core::scheduler::{
    check_fits, lower_with, split_host_scalars, vector_alignment, Decision, DeviceInfo,
    HeuristicParams, HostScalarProgram, InputInfo, KernelPlan, PlanError, Registry, RuntimeInfo,
    TensorInfo,
};
use nvfuser_core::{DataType, Fusion};
use smallvec::SmallVec;

pub use crate::args::Arg;
use crate::args::{bound_args, check_args};
use crate::dump::{Dump, DumpFlags};
use crate::launch::{compile_and_load, launch_kernel_with};
use crate::profile::{self, KernelProfile, LaunchTimer};
use crate::{CudaError, Device, Tensor};

/// Runs one fusion definition on any device, caching what can be cached.
///
/// On a GPU the first call with a new input signature (see [`InputSignature`])
/// schedules the fusion with [`nvfuser_core::scheduler::default_schedule`], generates,
/// compiles and loads its kernel; later calls with the same signature, whatever their
/// sizes, reuse that runtime without generating or compiling anything. The runtimes are
/// kept in a bounded LRU ([`FusionExecutorCache::with_capacity`]); the least recently
/// used one is evicted (its module unloaded when nothing else holds it) instead of
/// failing. A fusion that the default schedule cannot handle is a
/// [`CudaError::UnsupportedFusion`] naming what is missing: it never falls back to the
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
/// # Ok::<(), nvfuser_cuda::CudaError>(())
/// ```
#[derive(Debug)]
pub struct FusionExecutorCache {
    fusion: Fusion,
    /// What kernels run: `fusion` itself, or, when tensors use scalars computed inside
    /// it, its kernel part (see [`nvfuser_core::scheduler::host_scalars`]), whose extra
    /// scalar inputs `host` computes before each GPU call.
    kernel: Fusion,
    host: Option<HostScalarProgram>,
    /// Where each output comes from when some need no kernel (outputs that are inputs,
    /// values listed twice): see [`Fusion::forward_outputs`].
    forward: Option<Vec<OutputSource>>,
    runtimes: Mutex<RuntimeCache>,
    hits: AtomicU64,
    misses: AtomicU64,
    reuses: AtomicU64,
    evictions: AtomicU64,
    /// This executor's own dump; `None`: the process's `NVFUSER_DUMP`.
    dump: Option<Dump>,
    /// Set once no single kernel can hold the fusion: its segments run instead.
    segmented: std::sync::OnceLock<crate::SegmentedRuntime>,
    /// Per input: a scalar that extents read (its value selects a runtime).
    extent_scalars: Vec<bool>,
    /// The data-dependent reads of `fusion` (checked on every GPU call, with the host
    /// scalars evaluated) and of `kernel` (checked when nothing is launched).
    reads: ReadChecks,
    kernel_reads: ReadChecks,
}

/// Counters of a [`FusionExecutorCache`]'s runtime cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// GPU calls that reused a compiled runtime.
    pub hits: u64,
    /// GPU calls that built a runtime (schedule, generate, compile, load).
    pub misses: u64,
    /// GPU calls with new sizes whose heuristics matched a runtime already built for
    /// the same layout: the kernel was reused without compiling.
    pub reuses: u64,
    /// Runtimes evicted to stay within the capacity.
    pub evictions: u64,
    /// Runtimes held now.
    pub runtimes: usize,
}

/// Runtimes kept per executor unless [`FusionExecutorCache::with_capacity`] says
/// otherwise.
pub const DEFAULT_RUNTIME_CAPACITY: usize = 16;

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
    fn wide(&self) -> bool {
        self.0[0] & (1 << 62) != 0
    }
}

fn dtype_code(d: DataType) -> u64 {
    d as u64 + 1
}

/// A compiled kernel: the schedule, its generated code and the loaded function.
struct Compiled {
    sf: ScheduledFusion,
    kernel: Kernel,
    function: CudaFunction,
}

/// A runtime: the params a scheduler chose and, unless nothing runs (a no-op), the
/// compiled kernel.
struct Runtime {
    params: HeuristicParams,
    /// The scheduler that produced it, e.g. `pointwise`, `default inner reduction`.
    scheduler: &'static str,
    compiled: Option<Compiled>,
}

impl Runtime {
    fn compiled(&self, op: &'static str) -> Result<&Compiled, CudaError> {
        self.compiled
            .as_ref()
            .ok_or_else(|| CudaError::UnsupportedFusion {
                reason: format!(
                    "{op}: the call is a no-op (every output is empty), so no kernel runs"
                ),
            })
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("scheduler", &self.scheduler)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// One cache entry: the layout signature, the sizes of the call, the index width the
/// kernel was compiled with, whether the params were given by the user, the runtime and
/// its last use.
#[derive(Debug)]
struct Entry {
    sig: InputSignature,
    sizes: SmallVec<[u64; 8]>,
    wide: bool,
    user: Option<HeuristicParams>,
    runtime: Arc<Runtime>,
    tick: u64,
}

#[derive(Debug)]
struct RuntimeCache {
    capacity: usize,
    tick: u64,
    entries: Vec<Entry>,
}

/// The sizes of every tensor argument, flattened (with a rank marker per tensor, so
/// `[2, 3]` and `[2], [3]` differ), and the values of the scalar arguments that sizes
/// are made of (`extent_scalars[i]`: argument `i` appears in an extent, e.g. the length
/// of a `full`), since heuristics and kernels were planned for them. Other scalars (a
/// seed, an `eps`) do not select a runtime.
fn call_sizes(args: &[Arg<'_>], extent_scalars: &[bool]) -> SmallVec<[u64; 8]> {
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

/// Per fusion input: whether it is a scalar that some tensor extent reads.
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

    /// An executor keeping up to `capacity` compiled runtimes (at least 1).
    pub fn with_capacity(fusion: Fusion, capacity: usize) -> Self {
        let (kernel, host) = match split_host_scalars(&fusion) {
            Some(split) => (split.kernel, Some(split.program)),
            None => (fusion.clone(), None),
        };
        let (kernel, forward) = match kernel.forward_outputs() {
            Some((kernel, sources)) => (kernel, Some(sources)),
            None => (kernel, None),
        };
        FusionExecutorCache {
            forward,
            extent_scalars: extent_scalar_inputs(&kernel),
            reads: ReadChecks::of(&fusion),
            kernel_reads: ReadChecks::of(&kernel),
            fusion,
            kernel,
            host,
            runtimes: Mutex::new(RuntimeCache {
                capacity: capacity.max(1),
                tick: 0,
                entries: Vec::new(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            reuses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            dump: None,
            segmented: std::sync::OnceLock::new(),
        }
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
        &self.fusion
    }

    /// The fusion kernels run: [`FusionExecutorCache::fusion`], or its kernel part when
    /// scalars computed inside it are evaluated on the host (see
    /// [`nvfuser_core::scheduler::host_scalars`]); its inputs are the fusion's, then
    /// the computed scalars.
    pub fn kernel_fusion(&self) -> &Fusion {
        &self.kernel
    }

    /// The arguments of the kernel fusion: `args` (checked), then the scalars the host
    /// program computes from them.
    fn kernel_args<'s, 'a>(&self, args: &'s [Arg<'a>]) -> Result<Cow<'s, [Arg<'a>]>, CudaError> {
        let Some(host) = &self.host else {
            return Ok(Cow::Borrowed(args));
        };
        let extra = host.evaluate(&bound_args(args))?;
        let mut all = args.to_vec();
        all.extend(extra.into_iter().map(Arg::Scalar));
        Ok(Cow::Owned(all))
    }

    /// Runtime cache counters.
    pub fn stats(&self) -> ExecutorStats {
        ExecutorStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            reuses: self.reuses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            runtimes: self.lock().entries.len(),
        }
    }

    /// The generated CUDA source of the runtime for these arguments, building it if
    /// needed (for inspection; GPU devices only).
    pub fn cuda_source(&self, device: &Device, args: &[Arg<'_>]) -> Result<String, CudaError> {
        check_args(&self.fusion, device, args)?;
        let args = &self.kernel_args(args)?[..];
        let rt = self.runtime(device, args, None)?;
        Ok(rt.compiled("cuda_source")?.kernel.cuda_source())
    }

    /// The generated kernel and its loaded function for these arguments (building the
    /// runtime if needed; GPU devices only), e.g. to compare with a bare launch.
    pub fn kernel_and_function(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<(Kernel, CudaFunction), CudaError> {
        check_args(&self.fusion, device, args)?;
        let args = &self.kernel_args(args)?[..];
        let rt = self.runtime(device, args, None)?;
        let c = rt.compiled("kernel_and_function")?;
        Ok((c.kernel.clone(), c.function.clone()))
    }

    /// The scheduled IR of the runtime for these arguments (GPU devices only).
    pub fn scheduled_ir(&self, device: &Device, args: &[Arg<'_>]) -> Result<String, CudaError> {
        check_args(&self.fusion, device, args)?;
        let args = &self.kernel_args(args)?[..];
        let rt = self.runtime(device, args, None)?;
        Ok(rt.compiled("scheduled_ir")?.sf.scheduled_ir())
    }

    /// The heuristic params the registry picks for these arguments on `device` (GPU
    /// devices only): the scheduler is the params' [`HeuristicParams::kind`]. Edit them
    /// and pass them to [`FusionExecutorCache::run_with_params`].
    pub fn heuristics(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<HeuristicParams, CudaError> {
        check_args(&self.fusion, device, args)?;
        let props = device.properties().ok_or(CudaError::NotAGpu {
            op: "FusionExecutorCache::heuristics",
        })?;
        let args = &self.kernel_args(args)?[..];
        let sig = InputSignature::of(device, args);
        self.params_for(&runtime_info(props, args), None, sig.wide())
            .map(|c| c.params().clone())
    }

    /// Checks `args` against the fusion's inputs and runs it on `device`; returns the
    /// outputs in the fusion's order.
    pub fn run(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, CudaError> {
        self.run_impl(device, args, None, None)
    }

    /// [`run`](Self::run) with the given heuristic params instead of the registry's
    /// (GPU devices only). Params out of range, of a scheduler that cannot take the
    /// fusion, or compiled for other sizes (a persistent kernel's `hidden`) are a
    /// [`CudaError::InvalidParams`] or [`CudaError::UnsupportedFusion`]; vector widths the
    /// inputs do not allow are refused at launch. Runtimes built from user params are
    /// cached separately from the automatic ones.
    pub fn run_with_params(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        params: &HeuristicParams,
    ) -> Result<Vec<Tensor>, CudaError> {
        if !device.is_gpu() {
            return Err(CudaError::NotAGpu {
                op: "FusionExecutorCache::run_with_params",
            });
        }
        self.run_impl(device, args, Some(params), None)
    }

    fn run_impl(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
        timer: Option<&mut LaunchTimer>,
    ) -> Result<Vec<Tensor>, CudaError> {
        check_args(&self.fusion, device, args)?;
        if device.is_gpu() {
            let args = &self.kernel_args(args)?[..];
            self.check_reads(args)?;
            let outputs = if self.kernel.outputs().is_empty() {
                Vec::new()
            } else {
                match self.run_kernel(device, args, user, timer) {
                    // A call whose kernel would cover no element but whose outputs have
                    // some (a reduction over an empty dim): the reference computes it.
                    Err(CudaError::EmptyLaunch { .. }) => {
                        return self.run_on_reference(device, &args[..self.fusion.inputs().len()]);
                    }
                    other => other?,
                }
            };
            return self.forwarded(outputs, args);
        }
        self.run_on_reference(device, args)
    }

    /// The call computed by the CPU reference evaluator, outputs on `device`.
    fn run_on_reference(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<Vec<Tensor>, CudaError> {
        let inputs = args
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => t.to_host_tensor().map(EvalInput::Tensor),
                Arg::Scalar(s) => Ok(EvalInput::Scalar(*s)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = evaluate(&self.fusion, &inputs)?;
        outputs.iter().map(|o| device.tensor_from_host(o)).collect()
    }

    /// The checks of data-dependent reads (slice bounds, select indices, reshape sizes,
    /// gather index sizes) on the whole fusion, with its host scalars evaluated
    /// (`args` are the kernel fusion's arguments): an op only the fusion's scalar math
    /// reaches (the reshape whose size an `iota` reads), or one in a segment, is checked
    /// as the CPU reference checks it, before anything is launched.
    fn check_reads(&self, args: &[Arg<'_>]) -> Result<(), CudaError> {
        // The common case on the cached path: nothing data-dependent to check.
        if self.reads.is_empty() {
            return Ok(());
        }
        // Original value ids: the fusion's inputs keep their positions, the host
        // program's results follow them (the kernel fusion's own ids are renumbered).
        let f = &self.fusion;
        let n = f.inputs().len();
        let position = |v: nvfuser_core::ValId| {
            f.input_position(v).or_else(|| {
                let host = self.host.as_ref()?;
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
            Arg::Scalar(s) => s.cast(self.fusion.val(v).dtype).as_i64(),
            Arg::Tensor(_) => None,
        };
        let scalar = |v: nvfuser_core::ValId| scalar_of(f, v, &arg, &dim, 0);
        let eval = |e: &nvfuser_core::ir::Extent| -> Result<i64, CudaError> {
            e.eval(&dim, &scalar)
                .ok_or_else(|| CudaError::InvalidTensor {
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
        self.reads
            .check(&self.fusion, &call, false)
            .map_err(crate::launch::read_error)
    }

    /// The fusion's outputs from the kernel fusion's: inputs returned as outputs are
    /// the argument tensors themselves.
    fn forwarded(&self, outputs: Vec<Tensor>, args: &[Arg<'_>]) -> Result<Vec<Tensor>, CudaError> {
        let Some(sources) = &self.forward else {
            return Ok(outputs);
        };
        sources
            .iter()
            .map(|s| match *s {
                OutputSource::Kernel(k) => outputs.get(k).cloned(),
                OutputSource::Input(p) => match args.get(p) {
                    Some(Arg::Tensor(t)) => Some((*t).clone()),
                    _ => None,
                },
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| CudaError::UnsupportedFusion {
                reason: "an output's source is missing (internal: forwarded outputs)".into(),
            })
    }

    /// Runs the kernel fusion on a GPU: one kernel, segments, or nothing.
    fn run_kernel(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
        timer: Option<&mut LaunchTimer>,
    ) -> Result<Vec<Tensor>, CudaError> {
        if let Some(views) = self.no_op_outputs(args) {
            return Ok(views);
        }
        if user.is_none() {
            if let Some(seg) = self.segmented.get() {
                return seg.run(device, args);
            }
        }
        let rt = match self.runtime(device, args, user) {
            Ok(rt) => rt,
            Err(e @ CudaError::UnsupportedFusion { .. }) if user.is_none() => {
                return self.segmented_or(e)?.run(device, args);
            }
            Err(e) => return Err(e),
        };
        let Some(c) = &rt.compiled else {
            return self.empty_outputs(device, args);
        };
        launch_kernel_with(
            device,
            c.sf.fusion(),
            &c.kernel,
            &c.function,
            args,
            self.dump(),
            timer,
        )
    }

    /// Runs the fusion on a GPU like [`FusionExecutorCache::run`] and profiles its kernel
    /// launch: time from CUDA events around the launch, logical bytes read and written,
    /// bandwidth against the device's peak, launch dims, registers and scheduler (see
    /// [`KernelProfile`]). The runtime is built first if needed, so compilation is never
    /// timed.
    ///
    /// Errors: [`CudaError::NotAGpu`] on the CPU device, [`CudaError::UnsupportedFusion`]
    /// for a call without a kernel (no expressions, or only empty outputs), and those of
    /// `run`.
    pub fn run_profiled(
        &self,
        device: &Device,
        args: &[Arg<'_>],
    ) -> Result<(Vec<Tensor>, KernelProfile), CudaError> {
        self.run_profiled_with(device, args, None)
    }

    /// [`run_profiled`](Self::run_profiled) with optional user params (see
    /// [`run_with_params`](Self::run_with_params)).
    pub fn run_profiled_with(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        params: Option<&HeuristicParams>,
    ) -> Result<(Vec<Tensor>, KernelProfile), CudaError> {
        let props = device.properties().ok_or(CudaError::NotAGpu {
            op: "FusionExecutorCache::run_profiled",
        })?;
        check_args(&self.fusion, device, args)?;
        let args = &self.kernel_args(args)?[..];
        self.check_reads(args)?;
        if self.kernel.num_exprs() == 0 {
            return Err(CudaError::UnsupportedFusion {
                reason: "the fusion has no expressions, so no kernel runs to profile".into(),
            });
        }
        let rt = self.runtime(device, args, params)?;
        let c = rt.compiled("run_profiled")?;
        let mut timer = LaunchTimer::default();
        let outputs = launch_kernel_with(
            device,
            c.sf.fusion(),
            &c.kernel,
            &c.function,
            args,
            self.dump(),
            Some(&mut timer),
        )?;
        let profile = KernelProfile::new(
            c.kernel.abi.name.clone(),
            rt.scheduler.to_owned(),
            device.to_string(),
            timer.elapsed_ms()?,
            (profile::bytes_read(args), profile::bytes_written(&outputs)),
            props.peak_bandwidth_gb_per_s(),
            (timer.grid, timer.block),
            profile::registers_per_thread(&c.function)?,
        );
        Ok((outputs, profile))
    }

    /// The segmented runtime, made on the first call that no single kernel can run:
    /// when the fusion splits into more than one segment. Otherwise `err` (a single
    /// segment would fail the same way).
    fn segmented_or(&self, err: CudaError) -> Result<&crate::SegmentedRuntime, CudaError> {
        if let Some(seg) = self.segmented.get() {
            return Ok(seg);
        }
        let seg = match crate::SegmentedRuntime::new(self.kernel.clone()) {
            Ok(seg) if seg.segmented().segments().len() > 1 => seg,
            Ok(_) => return Err(err),
            Err(seg_err) => {
                return Err(CudaError::UnsupportedFusion {
                    reason: format!("{err}; segmenting it failed too: {seg_err}"),
                })
            }
        };
        let seg = match &self.dump {
            Some(d) => seg.with_dump(d.clone()),
            None => seg,
        };
        Ok(self.segmented.get_or_init(|| seg))
    }

    /// The segmented runtime this executor runs the fusion with, if no single kernel
    /// could (see [`crate::SegmentedRuntime`]); `None` before the first GPU call or when
    /// one kernel runs it.
    pub fn segmented_runtime(&self) -> Option<&crate::SegmentedRuntime> {
        self.segmented.get()
    }

    /// Outputs of a call whose outputs are all empty: allocated, nothing launched.
    fn empty_outputs(&self, device: &Device, args: &[Arg<'_>]) -> Result<Vec<Tensor>, CudaError> {
        let f = &self.kernel;
        let dim = |t: nvfuser_core::ValId, axis: usize| match args.get(f.input_position(t)?)? {
            Arg::Tensor(x) => x.sizes().get(axis).map(|&s| s as i64),
            Arg::Scalar(_) => None,
        };
        let scalar = |v: nvfuser_core::ValId| match args.get(f.input_position(v)?)? {
            Arg::Scalar(s) => s.cast(f.val(v).dtype).as_i64(),
            Arg::Tensor(_) => None,
        };
        let eval = |e: &nvfuser_core::ir::Extent| -> Result<i64, CudaError> {
            e.eval(&dim, &scalar)
                .ok_or_else(|| CudaError::InvalidTensor {
                    op: "fusion call",
                    expected: format!("an extent computable from the inputs: {e}"),
                    found: "an unbound or invalid value".into(),
                })
        };
        // The same checks as a launch: a slice bound or select index out of range is an
        // error even when the result would be empty (as on the CPU reference). Values
        // the kernel fusion computes itself are checked on the whole fusion by
        // `check_reads` before this.
        let known = |e: &nvfuser_core::ir::Extent| eval(e).ok();
        let call = CallValues {
            extent: &known,
            scalar: &scalar,
        };
        self.kernel_reads
            .check(f, &call, false)
            .map_err(crate::launch::read_error)?;
        let size = |e: &nvfuser_core::ir::Extent| -> Result<usize, CudaError> {
            let n = eval(e)?;
            usize::try_from(n).map_err(|_| CudaError::InvalidTensor {
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
                    .ok_or_else(|| CudaError::UnsupportedFusion {
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

    /// The no-op case: a fusion without expressions (every output is an input, e.g. a
    /// cast to the type a tensor already has) returns views of its inputs without a
    /// kernel, as nvFuser's no-op scheduler does.
    fn no_op_outputs(&self, args: &[Arg<'_>]) -> Option<Vec<Tensor>> {
        if self.kernel.num_exprs() != 0 {
            return None;
        }
        self.kernel
            .outputs()
            .iter()
            .map(|o| match args.get(self.kernel.input_position(o.val)?)? {
                Arg::Tensor(t) => Some((*t).clone()),
                Arg::Scalar(_) => None,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RuntimeCache> {
        // A panic while holding the lock leaves a consistent cache (entries are pushed
        // whole), so a poisoned lock is still usable.
        self.runtimes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The runtime for this call: cached for these sizes; else the heuristics run and a
    /// runtime of the same layout with equal params is reused (no compile); else one is
    /// built. With `user` params, only runtimes built from equal user params match.
    fn runtime(
        &self,
        device: &Device,
        args: &[Arg<'_>],
        user: Option<&HeuristicParams>,
    ) -> Result<Arc<Runtime>, CudaError> {
        let sig = InputSignature::of(device, args);
        let sizes = call_sizes(args, &self.extent_scalars);
        {
            let mut cache = self.lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some(e) = cache
                .entries
                .iter_mut()
                .find(|e| e.sizes == sizes && e.sig == sig && e.user.as_ref() == user)
            {
                e.tick = tick;
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(e.runtime.clone());
            }
        }
        let props = device.properties().ok_or(CudaError::NotAGpu {
            op: "FusionExecutorCache::run",
        })?;
        let info = runtime_info(props, args);
        // 64-bit index math when an input's view or an output reaches 2^31 elements
        // (outputs from the sizes and scalars of the call, so a kernel compiled for small
        // outputs is not reused for huge ones).
        let wide = sig.wide()
            || nvfuser_core::scheduler::index_type_for(&self.kernel, &info) == IndexType::I64;
        let choice = self.params_for(&info, user, wide)?;
        let params = choice.params();
        let reused = {
            let cache = self.lock();
            cache
                .entries
                .iter()
                .find(|e| {
                    e.sig == sig
                        && e.wide == wide
                        && e.user.as_ref() == user
                        && e.runtime.params.same_kernel(params)
                })
                .map(|e| e.runtime.clone())
        };
        let rt = match reused {
            Some(rt) => {
                self.reuses.fetch_add(1, Ordering::Relaxed);
                rt
            }
            None => {
                // Built outside the lock: compiling takes milliseconds.
                self.misses.fetch_add(1, Ordering::Relaxed);
                Arc::new(self.build(device, wide, &choice)?)
            }
        };
        let mut cache = self.lock();
        cache.tick += 1;
        let tick = cache.tick;
        if cache.entries.len() >= cache.capacity {
            if let Some(lru) = (0..cache.entries.len()).min_by_key(|&i| cache.entries[i].tick) {
                cache.entries.swap_remove(lru);
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        cache.entries.push(Entry {
            sig,
            sizes,
            wide,
            user: user.cloned(),
            runtime: rt.clone(),
            tick,
        });
        Ok(rt)
    }

    /// The params of a call: the user's (checked), or the registry's decision (with
    /// every refusal before it dumped under `NVFUSER_DUMP=scheduler`).
    fn params_for(
        &self,
        info: &RuntimeInfo,
        user: Option<&HeuristicParams>,
        wide: bool,
    ) -> Result<Choice, CudaError> {
        let dump = self.dump();
        if let Some(p) = user {
            p.validate().map_err(|e| CudaError::InvalidParams {
                reason: e.to_string(),
            })?;
            check_fits(&self.kernel, p, info).map_err(|e| CudaError::InvalidParams {
                reason: e.to_string(),
            })?;
            return Ok(Choice::User(p.clone()));
        }
        let decision = Registry::standard()
            .decide(&self.kernel, info)
            .map_err(|r| unsupported(PlanError::NoScheduler(r)))?;
        if dump.flags().contains(DumpFlags::SCHEDULER) {
            let mut text = String::new();
            for r in &decision.refused().0 {
                text.push_str(&format!("  {}: refused: {}\n", r.kind, r.reason));
            }
            text.push_str(&format!(
                "  {}: takes it (index type {:?})\n  params: {}",
                decision.kind(),
                if wide { "64-bit" } else { "32-bit" },
                serde_json::to_string(decision.params()).unwrap_or_default()
            ));
            dump.section(DumpFlags::SCHEDULER, "scheduler", "scheduler", &text);
        }
        Ok(Choice::Decided(Box::new(decision)))
    }

    /// Schedules and generates the kernel for `info` (the registry's params, or
    /// `params`) without compiling or loading it, dumping the `ir`, `scheduler`,
    /// `scheduled` and `cuda` stages: what a GPU would run, inspectable on any machine
    /// (NVRTC can then compile the source for any architecture). Returns the params and
    /// the kernel; `None` for a no-op.
    pub fn generate_for(
        &self,
        info: &RuntimeInfo,
        params: Option<&HeuristicParams>,
    ) -> Result<(HeuristicParams, Option<Kernel>), CudaError> {
        let extended;
        let info = match &self.host {
            None => info,
            Some(host) => {
                let sizes: Vec<Option<Vec<usize>>> = info
                    .inputs
                    .iter()
                    .map(|i| match i {
                        InputInfo::Tensor(t) => {
                            Some(t.sizes.iter().map(|&s| s.max(0) as usize).collect())
                        }
                        InputInfo::Scalar(_) => None,
                    })
                    .collect();
                let bound: Vec<BoundArg<'_>> = info
                    .inputs
                    .iter()
                    .zip(&sizes)
                    .map(|(i, s)| match (i, s) {
                        (InputInfo::Scalar(v), _) => BoundArg::Scalar(*v),
                        (_, s) => BoundArg::Tensor(s.as_deref().unwrap_or(&[])),
                    })
                    .collect();
                let extra = host.evaluate(&bound)?;
                let mut ext = info.clone();
                ext.inputs.extend(extra.into_iter().map(InputInfo::Scalar));
                extended = ext;
                &extended
            }
        };
        let wide = nvfuser_core::scheduler::index_type_for(&self.kernel, info) == IndexType::I64;
        let choice = self.params_for(info, params, wide)?;
        let planned = self.generate(wide, &choice)?;
        let params = planned
            .as_ref()
            .map_or_else(|| choice.params().clone(), |p| p.params.clone());
        Ok((params, planned.map(|p| p.kernel)))
    }

    /// The kernels a GPU described by `device` would run for `args`, planned as
    /// [`run`](Self::run) plans them (host scalars evaluated, one kernel or, when no
    /// scheduler takes the whole fusion, the segments' kernels; none when nothing is
    /// launched), generated but neither compiled nor launched: planning on a machine
    /// without a GPU (the fuzzer's CPU mode). `args` may live on any device. Shares the
    /// segmentation decision with `run` (made once per executor).
    pub fn plan_kernels(
        &self,
        device: DeviceInfo,
        args: &[Arg<'_>],
    ) -> Result<Vec<Kernel>, CudaError> {
        let kargs = self.kernel_args(args)?;
        if self.kernel.outputs().is_empty() || self.kernel.num_exprs() == 0 {
            return Ok(Vec::new());
        }
        let segments = |seg: &crate::SegmentedRuntime| -> Result<Vec<Kernel>, CudaError> {
            let mut kernels = Vec::new();
            for k in 0..seg.segmented().segments().len() {
                let unsupported = |what: &str| CudaError::UnsupportedFusion {
                    reason: format!("segment {k}: {what}"),
                };
                let info = seg
                    .segment_runtime_info(k, device.clone(), &kargs)
                    .ok_or_else(|| unsupported("its sizes cannot be predicted from the inputs"))?;
                let exec = seg.executor(k).ok_or_else(|| unsupported("no executor"))?;
                if let (_, Some(kernel)) = exec.generate_for(&info, None)? {
                    kernels.push(kernel);
                }
            }
            Ok(kernels)
        };
        if let Some(seg) = self.segmented.get() {
            return segments(seg);
        }
        let info = runtime_info_for(device.clone(), args);
        match self.generate_for(&info, None) {
            Ok((_, Some(kernel))) => {
                // What the launch would check on these arguments.
                crate::launch::check_planned_requirements(&kernel, &self.kernel, &kargs)?;
                Ok(vec![kernel])
            }
            Ok((_, None)) => Ok(Vec::new()),
            Err(e @ CudaError::UnsupportedFusion { .. }) => segments(self.segmented_or(e)?),
            Err(e) => Err(e),
        }
    }

    /// The kernel of a choice, planned by the core (scheduled and lowered once; a tuned
    /// schedule that fails falls back to the default schedule there), dumped as
    /// selected; `None` for a no-op.
    fn generate(&self, wide: bool, choice: &Choice) -> Result<Option<KernelPlan>, CudaError> {
        let dump = self.dump();
        dump.section(DumpFlags::IR, "ir", "fusion", &self.kernel);
        let planned = match choice {
            Choice::Decided(d) => d.lower(&self.kernel, wide),
            Choice::User(p) => lower_with(&self.kernel, p, wide),
        }
        .map_err(unsupported)?;
        let Some(plan) = planned else {
            return Ok(None);
        };
        if !dump.flags().is_empty() {
            if let Some(why) = &plan.fallback {
                dump.section(
                    DumpFlags::SCHEDULER,
                    "scheduler",
                    "fallback",
                    &format!("{why}; the default schedule takes it"),
                );
            }
            let title = format!("{} ({})", plan.kernel.abi.name, plan.scheduler);
            dump.section(
                DumpFlags::SCHEDULED,
                "scheduled",
                &title,
                &plan.scheduled.scheduled_ir(),
            );
            dump.section(DumpFlags::CUDA, "cuda", &title, &plan.kernel.cuda_source());
        }
        Ok(Some(plan))
    }

    fn build(&self, device: &Device, wide: bool, choice: &Choice) -> Result<Runtime, CudaError> {
        let Some(plan) = self.generate(wide, choice)? else {
            return Ok(Runtime {
                params: choice.params().clone(),
                scheduler: "no-op",
                compiled: None,
            });
        };
        // Dumped before compiling, so a kernel that fails to compile is still shown.
        let function = compile_and_load(device, &plan.kernel)?;
        Ok(Runtime {
            params: plan.params,
            scheduler: plan.scheduler,
            compiled: Some(Compiled {
                sf: plan.scheduled,
                kernel: plan.kernel,
                function,
            }),
        })
    }
}

/// What a call runs with: the registry's decision (its analysis kept for scheduling),
/// or params the user gave.
enum Choice {
    Decided(Box<Decision>),
    User(HeuristicParams),
}

impl Choice {
    fn params(&self) -> &HeuristicParams {
        match self {
            Choice::Decided(d) => d.params(),
            Choice::User(p) => p,
        }
    }
}

/// A plan error as the public error of a fusion no kernel runs.
fn unsupported(e: PlanError) -> CudaError {
    CudaError::UnsupportedFusion {
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfuser_core::builder::Size;
    use nvfuser_core::FusionDefinition;

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
        let mask = extent_scalar_inputs(&fusion);
        assert_eq!(mask, [false, true, false]);
        let cpu = Device::cpu();
        let t = cpu.zeros(DataType::F32, [5]).unwrap();
        let key =
            |n: i64, s: f32| call_sizes(&[Arg::Tensor(&t), Arg::from(n), Arg::from(s)], &mask);
        assert_ne!(key(5, 1.0), key(6, 1.0));
        assert_eq!(key(5, 1.0), key(5, 2.0));
    }
}
