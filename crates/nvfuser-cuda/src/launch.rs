//! Launching a hand-scheduled fusion's generated kernel on a GPU.
//!
//! [`run_scheduled`] is the whole path for one kernel: generate CUDA C++ from a
//! [`ScheduledFusion`], compile it through the [`KernelCache`] for the device's real
//! architecture, bind the arguments, check them (declaration, then the kernel's own
//! requirements: divisibility for vectorized loops, pointer alignment), allocate the
//! outputs, pack the parameters through the kernel's ABI description and launch. The
//! automatic schedulers and the executor cache will build on this.

use std::collections::BTreeMap;
use std::ffi::c_void;

use nvfuser_core::codegen::{self, Kernel, KernelArg, KernelOptions, Requirement};
use nvfuser_core::ir::{Extent, ValId, ValKind};
use nvfuser_core::sched::ScheduledFusion;
use nvfuser_core::ScalarValue;

use crate::executor::{check_args, Arg};
use crate::{CudaError, Device, KernelCache, KernelRequest, NvrtcOptions, Tensor};

/// Generates, compiles and launches the kernel of a scheduled fusion; returns its
/// outputs (contiguous, in the fusion's order).
pub fn run_scheduled(
    device: &Device,
    sf: &ScheduledFusion,
    args: &[Arg<'_>],
) -> Result<Vec<Tensor>, CudaError> {
    let fusion = sf.fusion();
    check_args(fusion, device, args)?;
    let props = device.properties().ok_or(CudaError::NotAGpu {
        op: "run_scheduled",
    })?;
    let kernel = codegen::generate(sf, &KernelOptions::default()).map_err(schedule_error)?;

    // Runtime values of every input, for extents and the ABI.
    let mut sizes: BTreeMap<ValId, Vec<i64>> = BTreeMap::new();
    let mut scalars: BTreeMap<ValId, ScalarValue> = BTreeMap::new();
    let mut bound: BTreeMap<ValId, KernelArg> = BTreeMap::new();
    for (&id, arg) in fusion.inputs().iter().zip(args) {
        match arg {
            Arg::Tensor(t) => {
                sizes.insert(id, t.sizes().iter().map(|&s| s as i64).collect());
                bound.insert(id, tensor_arg(t)?);
            }
            Arg::Scalar(s) => {
                scalars.insert(id, s.cast(fusion.val(id).dtype));
                bound.insert(id, KernelArg::Scalar(s.cast(fusion.val(id).dtype)));
            }
        }
    }
    let eval = |e: &Extent| -> Result<i64, CudaError> {
        e.eval(
            &|t, axis| sizes.get(&t).and_then(|s| s.get(axis).copied()),
            &|v| scalars.get(&v).and_then(|s| s.as_i64()),
        )
        .ok_or_else(|| CudaError::InvalidTensor {
            op: "run_scheduled",
            expected: format!("an extent computable from the inputs: {e}"),
            found: "an unbound or invalid value".into(),
        })
    };

    check_requirements(&kernel, &bound, &eval)?;

    // Outputs: contiguous, row-major.
    let mut outputs = Vec::with_capacity(fusion.outputs().len());
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        let ValKind::Tensor(tt) = &val.kind else {
            return Err(CudaError::UnsupportedDtype {
                op: "run_scheduled (scalar output)",
                dtype: val.dtype,
            });
        };
        let shape = tt
            .shape()
            .map(|d| eval(&d.extent).map(|n| n.max(0) as usize))
            .collect::<Result<Vec<_>, _>>()?;
        let t = device.zeros(val.dtype, &shape)?;
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
            op: "run_scheduled",
            expected: format!("at most {} threads per block", props.max_threads_per_block),
            found: format!("{threads} (block {block:?})"),
        });
    }

    let source = kernel.cuda_source();
    let options = NvrtcOptions::new(props.arch());
    let compiled =
        KernelCache::global().compile(KernelRequest::new(&source, &kernel.abi.name, &options))?;
    let function = device.load_function(&compiled.kernel, &kernel.abi.name)?;
    let mut packed = kernel.abi.pack(&bound).map_err(schedule_error)?;
    let mut params: Vec<*mut c_void> = packed
        .iter_mut()
        .map(|b| b.as_mut_ptr() as *mut c_void)
        .collect();
    let stream = device.cuda_stream().ok_or(CudaError::NotAGpu {
        op: "run_scheduled",
    })?;
    // SAFETY: `params` holds one pointer per kernel parameter, in the ABI's order, each to
    // bytes of the parameter's type packed by `KernelAbi::pack` from that same
    // description; every tensor pointer belongs to a live buffer (inputs borrowed for
    // this call, outputs owned by `outputs`) checked against the declared layout and the
    // kernel's requirements above; the launch dims were checked against the device.
    unsafe {
        cudarc::driver::result::launch_kernel(
            function.cu_function(),
            (grid[0], grid[1], grid[2]),
            (block[0], block[1], block[2]),
            0,
            stream.cu_stream(),
            &mut params,
        )
    }
    .map_err(|e| CudaError::driver("cuLaunchKernel", e))?;
    device.synchronize()?;
    Ok(outputs)
}

fn schedule_error(e: nvfuser_core::sched::ScheduleError) -> CudaError {
    CudaError::InvalidInput {
        kernel: "scheduled fusion".into(),
        what: e.to_string(),
    }
}

fn tensor_arg(t: &Tensor) -> Result<KernelArg, CudaError> {
    let ptr = t.cuda_address().ok_or(CudaError::NotAGpu {
        op: "run_scheduled",
    })?;
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
            op: "run_scheduled",
            expected: "launch dims that fit in 32 bits".into(),
            found: format!("{v} for {e}"),
        })?;
    }
    Ok(out)
}

/// The kernel's own launch requirements on the actual arguments.
fn check_requirements(
    kernel: &Kernel,
    bound: &BTreeMap<ValId, KernelArg>,
    eval: &dyn Fn(&Extent) -> Result<i64, CudaError>,
) -> Result<(), CudaError> {
    for r in &kernel.requirements {
        match r {
            Requirement::Divisible { extent, by, why } => {
                let v = eval(extent)?;
                if v % by != 0 {
                    return Err(CudaError::InvalidTensor {
                        op: "run_scheduled",
                        expected: format!("{extent} divisible by {by} ({why})"),
                        found: format!("{v}"),
                    });
                }
            }
            Requirement::Aligned { tensor, bytes } => {
                if let Some(KernelArg::Tensor { ptr, .. }) = bound.get(tensor) {
                    if ptr % *bytes as u64 != 0 {
                        return Err(CudaError::InvalidTensor {
                            op: "run_scheduled",
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
