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

use std::collections::BTreeMap;
use std::ffi::c_void;

use cudarc::driver::CudaFunction;
use nvfuser_core::codegen::{self, IndexType, Kernel, KernelArg, KernelOptions, Requirement};
use nvfuser_core::ir::{Extent, ValKind};
use nvfuser_core::sched::ScheduledFusion;
use nvfuser_core::Fusion;

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
/// checked against the fusion's declarations); waits for it and returns the outputs.
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
    let props = device.properties().ok_or(CudaError::NotAGpu { op: OP })?;
    let inputs = fusion.inputs();
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

    let mut bound: BTreeMap<nvfuser_core::ValId, KernelArg> = BTreeMap::new();
    for (&id, arg) in inputs.iter().zip(args) {
        match arg {
            Arg::Tensor(t) => {
                check_index_type(kernel, t)?;
                bound.insert(id, tensor_arg(t)?);
            }
            Arg::Scalar(s) => {
                bound.insert(id, KernelArg::Scalar(s.cast(fusion.val(id).dtype)));
            }
        }
    }
    check_requirements(kernel, &bound, &eval)?;

    // Outputs: contiguous, row-major.
    let mut outputs = Vec::with_capacity(fusion.outputs().len());
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        let ValKind::Tensor(tt) = &val.kind else {
            return Err(CudaError::UnsupportedDtype {
                op: "launch (scalar output)",
                dtype: val.dtype,
            });
        };
        let mut shape = smallvec::SmallVec::<[usize; 6]>::new();
        for d in tt.shape() {
            shape.push(eval(&d.extent)?.max(0) as usize);
        }
        let t = device.zeros(val.dtype, &shape)?;
        check_index_type(kernel, &t)?;
        bound.insert(o.val, tensor_arg(&t)?);
        outputs.push(t);
    }
    if outputs.iter().all(|t| t.numel() == 0) {
        return Ok(outputs);
    }

    let grid = dims(&kernel.launch.grid, &eval)?;
    let block = dims(&kernel.launch.block, &eval)?;
    if grid.contains(&0) {
        return Ok(outputs);
    }
    let threads = block.iter().product::<u32>();
    if threads > props.max_threads_per_block {
        return Err(CudaError::InvalidTensor {
            op: OP,
            expected: format!("at most {} threads per block", props.max_threads_per_block),
            found: format!("{threads} (block {block:?})"),
        });
    }
    // Grid reductions need global work buffers: partials, and arrival counters that
    // must be zero at launch (the last block resets them). Zeroed allocations serve
    // both; they live until the kernel has finished (the synchronize below).
    let work = kernel.abi.work_buffers();
    let mut work_tensors = Vec::with_capacity(work.len());
    let mut work_addresses = Vec::with_capacity(work.len());
    for wb in &work {
        let bytes = wb.bytes(eval(&wb.elements)?);
        let t = device.zeros(nvfuser_core::DataType::I32, [bytes.div_ceil(4)])?;
        work_addresses.push(t.cuda_address().ok_or(CudaError::NotAGpu { op: OP })?);
        work_tensors.push(t);
    }
    let mut packed = if work.is_empty() {
        kernel.abi.pack(&bound)
    } else {
        kernel.abi.pack_with_buffers(&bound, &work_addresses)
    }
    .map_err(schedule_error)?;
    let mut params: Vec<*mut c_void> = packed
        .iter_mut()
        .map(|b| b.as_mut_ptr() as *mut c_void)
        .collect();
    if dump.launch_enabled() {
        dump_launch(dump, kernel, grid, block, args);
    }
    if let Some(t) = timer.as_deref_mut() {
        t.before(device, grid, block)?;
    }
    // SAFETY: `params` holds one pointer per kernel parameter, in the ABI's order, each to
    // bytes of the parameter's type packed by `KernelAbi::pack` from that same
    // description; every tensor pointer belongs to a live buffer (inputs borrowed for
    // this call, outputs owned by `outputs`) checked against the declared layout (by the
    // caller, through `check_args`), the kernel's requirements and its index type above;
    // the launch dims were checked against the device.
    unsafe { launch_raw(device, function, grid, block, &mut params)? };
    if let Some(t) = timer {
        t.after(device)?;
    }
    device.synchronize()?;
    drop(work_tensors);
    Ok(outputs)
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

fn tensor_arg(t: &Tensor) -> Result<KernelArg, CudaError> {
    let ptr = t
        .cuda_address()
        .ok_or(CudaError::NotAGpu { op: "launch" })?;
    Ok(KernelArg::Tensor {
        ptr,
        sizes: t.sizes().iter().map(|&s| s as i64).collect(),
        strides: t.strides().iter().map(|&s| s as i64).collect(),
    })
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
fn check_requirements(
    kernel: &Kernel,
    bound: &BTreeMap<nvfuser_core::ValId, KernelArg>,
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
                if let Some(KernelArg::Tensor { ptr, .. }) = bound.get(tensor) {
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
