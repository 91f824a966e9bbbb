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

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};
use nvfuser_core::codegen::abi::{ArgRef, PackedArgs};
use nvfuser_core::codegen::{self, IndexType, Kernel, KernelOptions, Requirement};
use nvfuser_core::ir::{Extent, ValKind};
use nvfuser_core::sched::ScheduledFusion;
use nvfuser_core::Fusion;
use smallvec::SmallVec;

use crate::dump::Dump;
use crate::executor::{check_args, Arg};
use crate::profile::LaunchTimer;
use crate::{CudaError, Device, KernelCache, KernelRequest, NvrtcOptions, Tensor};

/// Generates, compiles and launches the kernel of a scheduled fusion; returns its
/// outputs (contiguous, in the fusion's order).
pub fn run_scheduled(
    device: &Device,
    sf: &ScheduledFusion,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, CudaError> {
    check_args(sf.fusion(), device, args)?;
    let kernel = codegen::generate(sf, &KernelOptions::default()).map_err(schedule_error)?;
    let function = compile_and_load(device, &kernel)?;
    launch_kernel(device, sf.fusion(), &kernel, &function, args)
}

/// Compiles `kernel` for `device` through the global [`KernelCache`] and loads its
/// entry point.
pub fn compile_and_load(device: &Device, kernel: &Kernel) -> Result<CudaFunction, CudaError> {
    let props = device.properties().ok_or(CudaError::NotAGpu {
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
/// as a driver error.
pub fn launch_kernel(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    function: &CudaFunction,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, CudaError> {
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
pub(crate) fn launch_kernel_with(
    device: &Device,
    fusion: &Fusion,
    kernel: &Kernel,
    function: &CudaFunction,
    args: &[Arg<'_>],
    dump: &Dump,
    mut timer: Option<&mut LaunchTimer>,
) -> Result<Vec<Tensor>, CudaError> {
    const OP: &str = "launch";
    let gpu = device.require_gpu(OP)?;
    // Runtime values of input dims and integer scalars, by position (no maps, no
    // formatting unless an extent cannot be evaluated).
    let dim = |t: nvfuser_core::ValId, axis: usize| -> Option<i64> {
        match args.get(fusion.input_position(t)?)? {
            Arg::Tensor(x) => x.sizes().get(axis).map(|&s| s as i64),
            Arg::Scalar(_) => None,
        }
    };
    let scalar = |v: nvfuser_core::ValId| -> Option<i64> {
        match args.get(fusion.input_position(v)?)? {
            Arg::Scalar(s) => s.cast(fusion.val(v).dtype).as_i64(),
            Arg::Tensor(_) => None,
        }
    };
    let eval = |e: &Extent| -> Result<i64, CudaError> {
        e.eval(&dim, &scalar)
            .ok_or_else(|| CudaError::InvalidTensor {
                op: OP,
                expected: format!("an extent computable from the inputs: {e}"),
                found: "an unbound or invalid value".into(),
            })
    };
    for arg in args {
        if let Arg::Tensor(t) = arg {
            check_index_type(kernel, t)?;
        }
    }

    // Output shapes (contiguous, row-major) and launch dims, before anything is
    // allocated.
    let mut shapes: SmallVec<[SmallVec<[usize; 6]>; 4]> = SmallVec::new();
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        let ValKind::Tensor(tt) = &val.kind else {
            return Err(CudaError::UnsupportedDtype {
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
    let any_elements = shapes
        .iter()
        .any(|s| s.iter().try_fold(1usize, |a, &n| a.checked_mul(n)) != Some(0));
    let (grid, block) = if any_elements {
        (
            dims(&kernel.launch.grid, &eval)?,
            dims(&kernel.launch.block, &eval)?,
        )
    } else {
        ([0; 3], [0; 3])
    };
    let launches = any_elements && !grid.contains(&0);
    if launches {
        let threads = block.iter().product::<u32>();
        if threads > gpu.properties.max_threads_per_block {
            return Err(CudaError::InvalidTensor {
                op: OP,
                expected: format!(
                    "at most {} threads per block",
                    gpu.properties.max_threads_per_block
                ),
                found: format!("{threads} (block {block:?})"),
            });
        }
    }

    // Outputs. A generated kernel writes every in-range element of every output: its
    // loops cover each output's whole logical domain (split and merged, never
    // narrowed), predicated only against the extents, with the launch dims covering
    // the parallelized loops; reductions write their init value for empty rows. So
    // when the kernel runs, outputs need no memset. When it does not run (no elements,
    // or an empty grid), they are zeroed instead, as before.
    let mut outputs = Vec::with_capacity(shapes.len());
    for (o, shape) in fusion.outputs().iter().zip(&shapes) {
        let dtype = fusion.val(o.val).dtype;
        let t = if launches {
            device.uninit(dtype, shape)?
        } else {
            device.zeros(dtype, shape)?
        };
        check_index_type(kernel, &t)?;
        outputs.push(t);
    }
    if !launches {
        return Ok(outputs);
    }
    check_requirements(kernel, &|id| arg_ref(fusion, args, &outputs, id), &eval)?;

    // Grid reductions need global work buffers: partials (any contents) and arrival
    // counters that must be zero at launch (the last block resets them). They are
    // freed when dropped below, in stream order after the kernel.
    let mut work_tensors: SmallVec<[Tensor; 2]> = SmallVec::new();
    let mut work_addresses: SmallVec<[u64; 2]> = SmallVec::new();
    for wb in kernel.abi.work_buffer_refs() {
        let words = [wb.bytes(eval(wb.elements)?).div_ceil(4)];
        let t = if wb.kind.zeroed() {
            device.zeros(nvfuser_core::DataType::I32, words)?
        } else {
            device.uninit(nvfuser_core::DataType::I32, &words)?
        };
        work_addresses.push(t.cuda_address().ok_or(CudaError::NotAGpu { op: OP })?);
        work_tensors.push(t);
    }
    let mut packed = PackedArgs::new();
    kernel
        .abi
        .pack_into(
            |id| arg_ref(fusion, args, &outputs, id),
            &work_addresses,
            &mut packed,
        )
        .map_err(schedule_error)?;
    let mut params = packed.kernel_params();
    if dump.launch_enabled() {
        dump_launch(dump, kernel, grid, block, args);
    }

    // Inputs on another stream (buffers another library owns, on its own stream): the
    // kernel waits for the work queued there, and that stream (where the owner frees
    // or overwrites the buffer) waits for the kernel. Buffers of this crate are on the
    // device's stream and need nothing.
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
            .map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
    }
    if let Some(t) = timer.as_deref_mut() {
        t.before(device, grid, block)?;
    }
    // SAFETY: `params` holds one pointer per kernel parameter, in the ABI's order, each to
    // bytes of the parameter's type packed by `KernelAbi::pack_into` from that same
    // description (and kept borrowed by `params`); every tensor pointer belongs to a live
    // buffer checked against the declared layout (by the caller, through `check_args`),
    // the kernel's requirements and its index type above, and stays allocated until the
    // kernel has finished: inputs are freed by their owners in stream order (on this
    // stream, or on a foreign one that waits for this launch below), outputs and work
    // buffers are this crate's and are freed in stream order on this stream; the launch
    // dims were checked against the device.
    unsafe { launch_raw(device, function, grid, block, params.as_mut_slice())? };
    if let Some(t) = timer {
        t.after(device)?;
    }
    for f in &foreign {
        f.join(stream)
            .map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
    }
    drop(work_tensors);
    Ok(outputs)
}

/// The runtime value of fusion tensor or scalar `id` for the ABI: an input argument or
/// an output tensor.
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
pub unsafe fn launch_raw(
    device: &Device,
    function: &CudaFunction,
    grid: [u32; 3],
    block: [u32; 3],
    params: &mut [*mut c_void],
) -> Result<(), CudaError> {
    let stream = device
        .cuda_stream()
        .ok_or(CudaError::NotAGpu { op: "launch" })?;
    // SAFETY: the caller's contract.
    unsafe {
        cudarc::driver::result::launch_kernel(
            function.cu_function(),
            (grid[0], grid[1], grid[2]),
            (block[0], block[1], block[2]),
            0,
            stream.cu_stream(),
            params,
        )
    }
    .map_err(|e| CudaError::driver("cuLaunchKernel", e))
}

/// The `launch` dump line: kernel, launch dims and the runtime sizes of the arguments.
fn dump_launch(dump: &Dump, kernel: &Kernel, grid: [u32; 3], block: [u32; 3], args: &[Arg<'_>]) {
    let sizes: Vec<String> = args
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => format!("{:?}", t.sizes()),
            Arg::Scalar(s) => format!("{s:?}"),
        })
        .collect();
    dump.line(&format!(
        "{}: launch {}: grid {grid:?} block {block:?} args [{}]",
        crate::dump::DUMP_VAR,
        kernel.abi.name,
        sizes.join(", ")
    ));
}

fn schedule_error(e: nvfuser_core::sched::ScheduleError) -> CudaError {
    CudaError::InvalidInput {
        kernel: "scheduled fusion".into(),
        what: e.to_string(),
    }
}

/// The furthest element offset a tensor's view reaches, plus one.
pub(crate) fn extent_elements(t: &Tensor) -> u64 {
    if t.numel() == 0 {
        return 0;
    }
    t.sizes()
        .iter()
        .zip(t.strides())
        .map(|(&n, &s)| (n as u64 - 1) * s as u64)
        .sum::<u64>()
        + 1
}

/// A 32-bit kernel cannot index a tensor that reaches 2^31 elements.
fn check_index_type(kernel: &Kernel, t: &Tensor) -> Result<(), CudaError> {
    if kernel.abi.index_type == IndexType::I32
        && (extent_elements(t) >= 1 << 31 || t.numel() as u64 >= 1 << 31)
    {
        return Err(CudaError::InvalidTensor {
            op: "launch",
            expected: "tensors of fewer than 2^31 elements for a kernel with 32-bit indexing"
                .into(),
            found: format!("sizes {:?}, strides {:?}", t.sizes(), t.strides()),
        });
    }
    Ok(())
}

fn dims(
    extents: &[Extent; 3],
    eval: &dyn Fn(&Extent) -> Result<i64, CudaError>,
) -> Result<[u32; 3], CudaError> {
    let mut out = [1u32; 3];
    for (o, e) in out.iter_mut().zip(extents) {
        let v = eval(e)?;
        *o = u32::try_from(v.max(0)).map_err(|_| CudaError::InvalidTensor {
            op: "launch",
            expected: "launch dims that fit in 32 bits".into(),
            found: format!("{v} for {e}"),
        })?;
    }
    Ok(out)
}

/// The kernel's own launch requirements on the actual arguments.
fn check_requirements<'a>(
    kernel: &Kernel,
    arg: &dyn Fn(nvfuser_core::ValId) -> Option<ArgRef<'a>>,
    eval: &dyn Fn(&Extent) -> Result<i64, CudaError>,
) -> Result<(), CudaError> {
    for r in &kernel.requirements {
        match r {
            Requirement::Divisible { extent, by, why } => {
                let v = eval(extent)?;
                if v % by != 0 {
                    return Err(CudaError::InvalidTensor {
                        op: "launch",
                        expected: format!("{extent} divisible by {by} ({why})"),
                        found: format!("{v}"),
                    });
                }
            }
            Requirement::Aligned { tensor, bytes } => {
                if let Some(ArgRef::Tensor { ptr, .. }) = arg(*tensor) {
                    if ptr % *bytes as u64 != 0 {
                        return Err(CudaError::InvalidTensor {
                            op: "launch",
                            expected: format!(
                                "{tensor} aligned to {bytes} bytes (vectorized access)"
                            ),
                            found: format!("address {ptr:#x}"),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}
