//! Launching generated kernels on a GPU.
//!
//! [`launch_kernel`] is the one launch routine: given a generated [`Kernel`] and its
//! loaded function, it binds the arguments, checks them against the kernel's own
//! requirements (divisibility for vectorized loops, pointer alignment, 32-bit index
//! math), allocates the outputs, packs the parameters through the kernel's ABI
//! description and launches. [`run_scheduled`] (a hand-scheduled fusion: generate,
//! compile through the [`KernelCache`], load, launch) and the executor cache (cached
//! runtimes) both go through it. Arguments must already have been checked against the
//! fusion's declarations ([`check_args`]).
//!
//! Launches are stream-ordered and asynchronous: nothing here waits for a kernel.
//! Outputs are allocated from the device's stream-ordered pool without a memset (the
//! kernel writes every element), handed back at once, and read back by downloads that
//! wait on the same stream; several launches can be queued before one download.
//!
//! Without the `cuda` feature only the checks that planning shares with the launch are
//! compiled (and [`run_scheduled`], which then has no GPU to run on).

#[cfg(feature = "cuda")]
use std::ffi::c_void;
#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::{CudaFunction, CudaStream};
#[cfg(feature = "cuda")]
use nvfuser_core::codegen::abi::{ArgRef, PackedArgs};
#[cfg(feature = "cuda")]
use nvfuser_core::codegen::Kernel;
use nvfuser_core::codegen::{self, KernelOptions};
use nvfuser_core::ir::reads::ReadError;
#[cfg(feature = "cuda")]
use nvfuser_core::ir::{reads::CallValues, Extent, ValKind};
use nvfuser_core::sched::ScheduledFusion;
#[cfg(feature = "cuda")]
use nvfuser_core::Fusion;
#[cfg(feature = "cuda")]
use smallvec::SmallVec;

use crate::args::{check_args, Arg};
#[cfg(feature = "cuda")]
use crate::dump::Dump;
#[cfg(feature = "cuda")]
use crate::profile::host::{self, HostPhase};
#[cfg(feature = "cuda")]
use crate::profile::LaunchTimer;
use crate::{Device, Error, Tensor};
#[cfg(feature = "cuda")]
use crate::{KernelCache, KernelRequest, NvrtcOptions};

mod checks;
#[cfg(feature = "cuda")]
mod fast;
pub(crate) use checks::{arg_scalar, check_planned_requirements, eval_on_args, extent_elements};
#[cfg(feature = "cuda")]
use checks::{check_index_type, check_requirements, dims};
#[cfg(feature = "cuda")]
pub(crate) use fast::FastLaunch;
#[cfg(feature = "cuda")]
pub(crate) mod store;
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use store::STORE_SOURCE;

/// Generates, compiles and launches the kernel of a scheduled fusion; returns its
/// outputs (contiguous, in the fusion's order).
pub fn run_scheduled(
    device: &Device,
    sf: &ScheduledFusion,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, Error> {
    check_args(sf.fusion(), device, args)?;
    let kernel = codegen::generate(sf, &KernelOptions::default()).map_err(schedule_error)?;
    #[cfg(feature = "cuda")]
    {
        let function = compile_and_load(device, &kernel)?;
        launch_kernel(device, sf.fusion(), &kernel, &function, args)
    }
    #[cfg(not(feature = "cuda"))]
    {
        // Only the CPU device exists, and it runs no generated kernel.
        let _ = kernel;
        Err(Error::NotAGpu {
            op: "launch::run_scheduled",
        })
    }
}

/// Whether some tensor of `fusion` has a dim of size 0 for these arguments. An input dim
/// is read from its argument; only the extents computed from scalars or sizes (slices,
/// pads, reshapes, creation ops) are evaluated, so the common call costs one pass over
/// the arguments and the tensors' dims.
#[cfg(feature = "cuda")]
fn has_empty_tensor(
    fusion: &Fusion,
    args: &[Arg<'_>],
    eval: &dyn Fn(&Extent) -> Result<i64, Error>,
) -> bool {
    args.iter()
        .any(|a| matches!(a, Arg::Tensor(t) if t.sizes().contains(&0)))
        || fusion.vals().any(|(_, v)| match &v.kind {
            ValKind::Tensor(t) => t.domain.iter().any(|d| match &d.extent {
                // A negative computed extent counts as 0, as the output shapes do.
                Extent::Const(c) => *c <= 0,
                Extent::Dim { .. } => false,
                other => eval(other).is_ok_and(|n| n <= 0),
            }),
            ValKind::Scalar(_) => false,
        })
}

/// Compiles `kernel` for `device` through the global [`KernelCache`] and loads its
/// entry point.
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub fn compile_and_load(device: &Device, kernel: &Kernel) -> Result<CudaFunction, Error> {
    let props = device.properties().ok_or(Error::NotAGpu {
        op: "compile_and_load",
    })?;
    let source = kernel.cuda_source();
    let options = NvrtcOptions::new(props.arch());
    let compiled =
        KernelCache::global().compile(KernelRequest::new(&source, &kernel.abi.name, &options))?;
    device.load_function(&compiled.kernel, &kernel.abi.name)
}

/// Launches `function`, the loaded `kernel` generated for `fusion`, on `args` (already
/// checked against the fusion's declarations) and returns the outputs.
///
/// The launch is asynchronous: it is queued on the device's stream and this returns
/// before the kernel has finished. Everything that reads the outputs on the host
/// ([`Tensor::to_vec`], [`Tensor::to_host_tensor`], [`Tensor::to_device`]) is ordered
/// after it on that stream and waits for it, later launches on the device read the
/// outputs in stream order, and [`Device::synchronize`] waits for everything queued. An
/// error the kernel raises on the device (an illegal address, say) surfaces at that wait
/// as a driver error; a failed device-side check (an index out of range, an integer
/// division by zero) surfaces there as a [`Error::DeviceAssert`].
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub fn launch_kernel(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    function: &CudaFunction,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, Error> {
    launch_kernel_with(
        device,
        fusion,
        kernel,
        function,
        args,
        Dump::from_env(),
        None,
    )
}

/// [`launch_kernel`] with an explicit dump and an optional timer that records events
/// around the launch (profiling).
///
/// The hot path of a cached executor call: no formatting (unless an error or the
/// `launch` dump), no maps, no synchronize; arguments are packed into inline storage
/// ([`PackedArgs`]); the only allocations are the output tensors themselves (and the
/// `Vec` that returns them), plus grid-reduction work buffers for kernels that have them.
#[cfg(feature = "cuda")]
pub(crate) fn launch_kernel_with(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    function: &CudaFunction,
    args: &[Arg<'_>],
    dump: &Dump,
    timer: Option<&mut LaunchTimer>,
) -> Result<Vec<Tensor>, Error> {
    launch_recorded(
        device,
        fusion,
        kernel,
        function,
        args,
        dump,
        timer,
        None,
        &[],
    )
}

/// What a launch found from the call's sizes alone: output shapes, launch dims, whether
/// the kernel runs, and that the index type and the kernel's requirements hold. A
/// runtime cache entry is keyed by the layout signature (dtype, contiguity, broadcast
/// and expanded bits, alignment class, index width) and the sizes with the scalars
/// extents read, which is everything these depend on, so a call that hits the same
/// entry reuses them ([`launch_recorded`]); the data-dependent reads are checked on
/// every call.
#[derive(Debug)]
#[cfg(feature = "cuda")]
pub(crate) struct LaunchRecipe {
    shapes: SmallVec<[SmallVec<[usize; 6]>; 4]>,
    grid: [u32; 3],
    block: [u32; 3],
    launches: bool,
    /// The call's launch replayed on the parameters packed for it, for later calls
    /// with the same strides (see [`FastLaunch`]); `None` where the kernel or the
    /// call does not allow one.
    fast: Option<FastLaunch>,
}

#[cfg(feature = "cuda")]
impl LaunchRecipe {
    /// The fast launch recorded with this recipe, if any.
    pub(crate) fn fast(&self) -> Option<&FastLaunch> {
        self.fast.as_ref()
    }
}

/// [`launch_kernel_with`], reusing the [`LaunchRecipe`] in `recipe` when it holds one
/// (a call with the layout and sizes it was found for) and recording it there
/// otherwise. `into`: outputs written into given tensors instead of new buffers (an
/// in-place output written straight into its input: contiguous, of the output's
/// shape and dtype, aligned for the kernel; see `FusionPlanner::direct_in_place`).
#[allow(clippy::too_many_arguments)]
#[cfg(feature = "cuda")]
pub(crate) fn launch_recorded(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    function: &CudaFunction,
    args: &[Arg<'_>],
    dump: &Dump,
    timer: Option<&mut LaunchTimer>,
    recipe: Option<&std::sync::OnceLock<LaunchRecipe>>,
    into: &[(usize, Tensor)],
) -> Result<Vec<Tensor>, Error> {
    const OP: &str = "launch";
    let gpu = device.require_gpu(OP)?;
    // Runtime values of input dims and integer scalars, by position (no maps, no
    // formatting unless an extent cannot be evaluated).
    let scalar = |v| arg_scalar(fusion, args, v);
    let eval = |e: &Extent| eval_on_args(fusion, args, e);
    let known = |e: &Extent| eval(e).ok();
    let call = CallValues {
        extent: &known,
        scalar: &scalar,
    };
    let recorded = recipe.and_then(|r| r.get());
    if recorded.is_none() {
        for arg in args {
            if let Arg::Tensor(t) = arg {
                check_index_type(kernel, t)?;
            }
        }
    }
    kernel
        .reads
        .check(fusion, &call, true)
        .map_err(read_error)?;
    let found;
    let r = match recorded {
        Some(r) => r,
        None => {
            let shapes = output_shapes(fusion, &eval)?;
            let (grid, block, launches) = launch_shape(gpu, fusion, kernel, args, &shapes, &eval)?;
            found = LaunchRecipe {
                shapes,
                grid,
                block,
                launches,
                fast: None,
            };
            &found
        }
    };
    let (grid, block) = (r.grid, r.block);
    let outputs = allocate_outputs(device, fusion, kernel, args, (&r.shapes, into), r.launches)?;
    if !r.launches {
        return Ok(outputs);
    }
    if recorded.is_none() {
        check_requirements(
            kernel,
            &|id| arg_ref(fusion, args, &outputs, id),
            &|id| fusion.get_val(id).map_or(1, |v| v.dtype.size_bytes()),
            &eval,
        )?;
    }
    host::end(HostPhase::Outputs);
    // Grid reductions need global work buffers: partials (any contents) and arrival
    // counters that must be zero at launch (the last block resets them). They are
    // freed when dropped below, in stream order after the kernel.
    let mut work_tensors: SmallVec<[Tensor; 2]> = SmallVec::new();
    let mut work_addresses: SmallVec<[u64; 2]> = SmallVec::new();
    let mut work_words: SmallVec<[(usize, bool); 2]> = SmallVec::new();
    for wb in kernel.abi.work_buffer_refs() {
        let words = [wb.bytes(eval(wb.elements)?).div_ceil(4)];
        work_words.push((words[0], wb.kind.zeroed()));
        let t = if wb.kind.zeroed() {
            device.zeros(nvfuser_core::DataType::I32, words)?
        } else {
            device.uninit(nvfuser_core::DataType::I32, &words)?
        };
        work_addresses.push(t.cuda_address().ok_or(Error::NotAGpu { op: OP })?);
        work_tensors.push(t);
    }
    // A kernel with device-side checks (data-dependent indices, integer division)
    // reports a failure in the device's error buffer, passed after the work buffers;
    // the next download or synchronize reads it (see `device::errors`).
    if let Some(checks) = kernel.abi.error_checks() {
        work_addresses.push(gpu.errors.buffer_for(&gpu.alloc_stream, checks)?);
    }
    host::end(HostPhase::WorkBuffers);
    let mut packed = PackedArgs::new();
    kernel
        .abi
        .pack_into(
            |id| arg_ref(fusion, args, &outputs, id),
            &work_addresses,
            &mut packed,
        )
        .map_err(schedule_error)?;
    if let (None, Some(slot)) = (recorded, recipe) {
        // Every check of this call passed: later calls with its layout, sizes and
        // strides reuse what it found, and replay its packed parameters.
        let fast = FastLaunch::record(device, fusion, kernel, args, r, &work_words, &packed);
        let _ = slot.set(LaunchRecipe {
            shapes: r.shapes.clone(),
            grid,
            block,
            launches: r.launches,
            fast,
        });
    }
    let mut params = packed.kernel_params();
    if dump.launch_enabled() {
        dump_launch(dump, kernel, grid, block, args, &outputs);
    }
    host::end(HostPhase::Pack);
    // SAFETY: `params` holds one pointer per kernel parameter, in the ABI's order, each to
    // bytes of the parameter's type packed by `KernelAbi::pack_into` from that same
    // description (and kept borrowed by `params`); every tensor pointer belongs to a live
    // buffer checked against the declared layout (by the caller, through `check_args`),
    // the kernel's requirements and its index type above, and stays allocated until the
    // kernel has finished: inputs are freed by their owners in stream order (on this
    // stream, or on a foreign one that `launch_ordered` makes wait for this launch),
    // outputs and work buffers are this crate's and are freed in stream order on this
    // stream; the launch dims were checked against the device.
    unsafe {
        launch_ordered(
            device,
            gpu,
            function,
            (grid, block, kernel.grid_sync, kernel.dynamic_shared),
            params.as_mut_slice(),
            args,
            timer,
        )?
    };
    drop(work_tensors);
    host::end(HostPhase::Launch);
    Ok(outputs)
}

/// The shape of every output (contiguous, row-major), from the call's extents.
#[cfg(feature = "cuda")]
fn output_shapes(
    fusion: &Fusion,
    eval: &dyn Fn(&Extent) -> Result<i64, Error>,
) -> Result<SmallVec<[SmallVec<[usize; 6]>; 4]>, Error> {
    let mut shapes: SmallVec<[SmallVec<[usize; 6]>; 4]> = SmallVec::new();
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        let ValKind::Tensor(tt) = &val.kind else {
            return Err(Error::UnsupportedDtype {
                op: "launch (scalar output)",
                dtype: val.dtype,
            });
        };
        let mut shape = SmallVec::new();
        for d in tt.shape() {
            shape.push(eval(&d.extent)?.max(0) as usize);
        }
        shapes.push(shape);
    }
    Ok(shapes)
}

/// The launch dims, and whether the kernel runs at all: not when no output has
/// elements or the grid is empty. A call whose loops would follow an empty tensor while
/// an output has elements is [`Error::EmptyLaunch`] (the caller computes it on the
/// reference), and a block larger than the device allows is refused.
#[cfg(feature = "cuda")]
fn launch_shape(
    gpu: &crate::device::CudaDevice,
    fusion: &Fusion,
    kernel: &Kernel,
    args: &[Arg<'_>],
    shapes: &[SmallVec<[usize; 6]>],
    eval: &dyn Fn(&Extent) -> Result<i64, Error>,
) -> Result<([u32; 3], [u32; 3], bool), Error> {
    let any_elements = shapes
        .iter()
        .any(|s| s.iter().try_fold(1usize, |a, &n| a.checked_mul(n)) != Some(0));
    let (grid, block) = if any_elements {
        (
            dims(&kernel.launch.grid, eval)?,
            dims(&kernel.launch.block, eval)?,
        )
    } else {
        ([0; 3], [0; 3])
    };
    let launches = any_elements && !grid.contains(&0);
    // A tensor of the kernel without elements (an output, an input or an intermediate)
    // beside an output with some: the loops may follow the empty one, a serial loop of
    // extent 0, and leave the other outputs unwritten (fuzz seed 1225086: a full sum of
    // a [0, 255] input broadcast into a [1, 255] output).
    let some_empty = any_elements && has_empty_tensor(fusion, args, eval);
    if !launches || some_empty {
        // Zero-filled outputs are right only for outputs without elements: a non-empty
        // output (a reduction over an empty dim, or an output smaller than the empty
        // tensor the loops follow) would be left unwritten.
        for (output, s) in shapes.iter().enumerate() {
            let elements = s
                .iter()
                .try_fold(1usize, |a, &n| a.checked_mul(n))
                .unwrap_or(usize::MAX);
            if elements > 0
                && fusion
                    .input_position(fusion.outputs()[output].val)
                    .is_none()
            {
                return Err(Error::EmptyLaunch { output, elements });
            }
        }
    }
    if launches {
        let threads = block.iter().product::<u32>();
        if threads > gpu.properties.max_threads_per_block {
            return Err(Error::InvalidTensor {
                op: "launch",
                expected: format!(
                    "at most {} threads per block",
                    gpu.properties.max_threads_per_block
                ),
                found: format!("{threads} (block {block:?})"),
            });
        }
    }
    Ok((grid, block, launches))
}

/// An output's shape.
#[cfg(feature = "cuda")]
type Shape = SmallVec<[usize; 6]>;

/// The outputs of a launch. A generated kernel writes every in-range element of every
/// output: its loops cover each output's whole logical domain (split and merged, never
/// narrowed), predicated only against the extents, with the launch dims covering the
/// parallelized loops; reductions write their init value for empty rows. So when the
/// kernel runs, outputs need no memset; when it does not (no elements, or an empty
/// grid), they are zeroed. An output that is a fusion input, or a value listed earlier
/// as an output, is not a kernel parameter of its own (the ABI lists each tensor once):
/// it is returned as a view of that input or of the earlier output. An output listed in
/// `into` is that tensor.
#[cfg(feature = "cuda")]
fn allocate_outputs(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    args: &[Arg<'_>],
    (shapes, into): (&[Shape], &[(usize, Tensor)]),
    launches: bool,
) -> Result<Vec<Tensor>, Error> {
    let mut outputs: Vec<Tensor> = Vec::with_capacity(shapes.len());
    for (k, (o, shape)) in fusion.outputs().iter().zip(shapes).enumerate() {
        if let Some((_, t)) = into.iter().find(|(j, _)| *j == k) {
            outputs.push(t.clone());
            continue;
        }
        if let Some(Arg::Tensor(t)) = fusion.input_position(o.val).and_then(|p| args.get(p)) {
            outputs.push((*t).clone());
            continue;
        }
        if let Some(j) = fusion.outputs()[..k].iter().position(|e| e.val == o.val) {
            let t = outputs[j].clone();
            outputs.push(t);
            continue;
        }
        let dtype = fusion.val(o.val).dtype;
        let t = if launches {
            device.uninit(dtype, shape)?
        } else {
            device.zeros(dtype, shape)?
        };
        check_index_type(kernel, &t)?;
        outputs.push(t);
    }
    Ok(outputs)
}

/// Queues the launch on the device's stream, ordered with inputs on another stream
/// (buffers another library owns, on its own stream): the kernel waits for the work
/// queued there, and that stream (where the owner frees or overwrites the buffer) waits
/// for the kernel. Buffers of this crate are on the device's stream and need nothing.
///
/// # Safety
///
/// `params` must be the kernel's parameters packed by its ABI for live buffers that stay
/// allocated until the kernel has finished, and the dims must fit the device.
#[cfg(feature = "cuda")]
unsafe fn launch_ordered(
    device: &Device,
    gpu: &crate::device::CudaDevice,
    function: &CudaFunction,
    (grid, block, cooperative, shared): ([u32; 3], [u32; 3], bool, u32),
    params: &mut [*mut c_void],
    args: &[Arg<'_>],
    timer: Option<&mut LaunchTimer>,
) -> Result<(), Error> {
    let stream = &gpu.stream;
    let mut foreign: SmallVec<[&Arc<CudaStream>; 2]> = SmallVec::new();
    for arg in args {
        if let Arg::Tensor(t) = arg {
            if let Some(s) = t.buffer_stream() {
                if !Arc::ptr_eq(s, stream) && **s != **stream && !foreign.iter().any(|f| f == &s) {
                    foreign.push(s);
                }
            }
        }
    }
    for f in &foreign {
        stream
            .join(f)
            .map_err(|e| Error::driver("cuStreamWaitEvent", e))?;
    }
    let mut timer = timer;
    if let Some(t) = timer.as_deref_mut() {
        t.before(device, grid, block)?;
    }
    // SAFETY: the caller's contract.
    unsafe { launch_raw_shared(device, function, (grid, block), params, cooperative, shared)? };
    if let Some(t) = timer {
        t.after(device)?;
    }
    for f in &foreign {
        f.join(stream)
            .map_err(|e| Error::driver("cuStreamWaitEvent", e))?;
    }
    Ok(())
}

/// A call a data-dependent read refuses (see [`nvfuser_core::ir::reads`]), as the
/// launcher's error.
pub(crate) fn read_error(e: ReadError) -> Error {
    Error::InvalidTensor {
        op: "launch",
        expected: format!("{}: {}", e.op, e.expected),
        found: e.found,
    }
}

/// The runtime value of fusion tensor or scalar `id` for the ABI: an input argument or
/// an output tensor.
#[cfg(feature = "cuda")]
fn arg_ref<'a>(
    fusion: &Fusion,
    args: &[Arg<'a>],
    outputs: &'a [Tensor],
    id: nvfuser_core::ValId,
) -> Option<ArgRef<'a>> {
    if let Some(p) = fusion.input_position(id) {
        return match *args.get(p)? {
            Arg::Tensor(t) => tensor_ref(t),
            Arg::Scalar(s) => Some(ArgRef::Scalar(s.cast(fusion.val(id).dtype))),
        };
    }
    let k = fusion.outputs().iter().position(|o| o.val == id)?;
    tensor_ref(outputs.get(k)?)
}

#[cfg(feature = "cuda")]
fn tensor_ref(t: &Tensor) -> Option<ArgRef<'_>> {
    Some(ArgRef::Tensor {
        ptr: t.cuda_address()?,
        sizes: t.sizes(),
        strides: t.strides(),
    })
}

/// `cuLaunchKernel` of `function` on the device's stream, without any check: the
/// primitive under [`launch_kernel`], public so that benchmarks can compare against a
/// bare launch.
///
/// # Safety
///
/// `params` must hold one pointer per kernel parameter, each to a value of that
/// parameter's type, every device pointer among them valid for what the kernel accesses,
/// and `block` within the device's limits.
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub unsafe fn launch_raw(
    device: &Device,
    function: &CudaFunction,
    grid: [u32; 3],
    block: [u32; 3],
    params: &mut [*mut c_void],
) -> Result<(), Error> {
    // SAFETY: the caller's contract.
    unsafe { launch_raw_with(device, function, (grid, block), params, false) }
}

/// [`launch_raw`], cooperatively (`cuLaunchCooperativeKernel`) when `cooperative`: every
/// block resident at once, as a kernel that synchronizes its grid needs
/// ([`Kernel::grid_sync`]); the driver refuses a grid that cannot be.
///
/// # Safety
///
/// As [`launch_raw`].
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub unsafe fn launch_raw_with(
    device: &Device,
    function: &CudaFunction,
    (grid, block): ([u32; 3], [u32; 3]),
    params: &mut [*mut c_void],
    cooperative: bool,
) -> Result<(), Error> {
    // SAFETY: the caller's contract.
    unsafe { launch_raw_shared(device, function, (grid, block), params, cooperative, 0) }
}

/// The most dynamic shared memory a block gets without raising the function's limit.
#[cfg(feature = "cuda")]
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// Raises `function`'s dynamic shared memory limit to `shared` bytes. Called before
/// every such launch (a host call of about a microsecond, legal during a CUDA graph's
/// capture), so a function loaded again at a reused address never keeps a stale limit.
#[cfg(feature = "cuda")]
fn raise_dynamic_shared(function: &CudaFunction, shared: u32) -> Result<(), Error> {
    let bytes = i32::try_from(shared).unwrap_or(i32::MAX);
    // SAFETY: `function` is a loaded function of the device's context.
    unsafe {
        cudarc::driver::result::function::set_function_attribute(
            function.cu_function(),
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes,
        )
    }
    .map_err(|e| Error::driver("cuFuncSetAttribute", e))
}

/// [`launch_raw_with`] with `shared` bytes of dynamic shared memory per block
/// ([`Kernel::dynamic_shared`]): above 48 KiB the function's limit
/// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`) is raised to it first; a size
/// above the device's opt-in limit is the driver's typed error.
///
/// # Safety
///
/// As [`launch_raw`].
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub unsafe fn launch_raw_shared(
    device: &Device,
    function: &CudaFunction,
    (grid, block): ([u32; 3], [u32; 3]),
    params: &mut [*mut c_void],
    cooperative: bool,
    shared: u32,
) -> Result<(), Error> {
    let stream = device
        .cuda_stream()
        .ok_or(Error::NotAGpu { op: "launch" })?;
    let (g, b) = ((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]));
    if shared > DEFAULT_DYNAMIC_SHARED {
        raise_dynamic_shared(function, shared)?;
    }
    // SAFETY: the caller's contract.
    unsafe {
        if cooperative {
            cudarc::driver::result::launch_cooperative_kernel(
                function.cu_function(),
                g,
                b,
                shared,
                stream.cu_stream(),
                params,
            )
            .map_err(|e| Error::driver("cuLaunchCooperativeKernel", e))
        } else {
            cudarc::driver::result::launch_kernel(
                function.cu_function(),
                g,
                b,
                shared,
                stream.cu_stream(),
                params,
            )
            .map_err(|e| Error::driver("cuLaunchKernel", e))
        }
    }
}

/// The `launch` dump line: kernel, launch dims and the runtime sizes of the arguments.
#[cfg(feature = "cuda")]
fn dump_launch(
    dump: &Dump,
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    args: &[Arg<'_>],
    outputs: &[Tensor],
) {
    // Sizes, and the address and strides of each buffer (to see aliasing and layouts).
    let tensor = |t: &Tensor| match t.cuda_address() {
        Some(a) => format!("{:?}@{a:#x}/{:?}", t.sizes(), t.strides()),
        None => format!("{:?}", t.sizes()),
    };
    let sizes: Vec<String> = args
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => tensor(t),
            Arg::Scalar(s) => format!("{s:?}"),
        })
        .collect();
    let outs: Vec<String> = outputs.iter().map(tensor).collect();
    dump.line(&format!(
        "{}: launch {}: grid {grid:?} block {block:?} args [{}] outputs [{}]",
        crate::dump::DUMP_VAR,
        kernel.abi.name,
        sizes.join(", "),
        outs.join(", ")
    ));
}

fn schedule_error(e: nvfuser_core::sched::ScheduleError) -> Error {
    Error::InvalidInput {
        kernel: "scheduled fusion".into(),
        what: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
