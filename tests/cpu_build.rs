//! What every build has, the one without the `cuda` feature included
//! (`cargo test -p nvfuser --no-default-features`): the builder, the CPU reference
//! device, planning and CUDA generation for a GPU described by a preset; and, without
//! `cuda`, typed errors where a GPU or NVRTC would be needed.

use nvfuser::executor::runtime_info_for;
use nvfuser::prelude::*;
use nvfuser::scheduler::{DeviceInfo, GpuModel};
use nvfuser::Error;

/// `relu(x + b)` over `[N, H] + [H]`.
fn bias_relu() -> Result<FusionExecutorCache, Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let y = fd.add(x, b)?;
    let y = fd.relu(y)?;
    fd.add_output(y)?;
    Ok(FusionExecutorCache::new(fd.finish()?))
}

fn inputs(dev: &Device) -> Result<(Tensor, Tensor), Error> {
    let x = dev.tensor_from_slice(&[1.0f32, -2.0, 3.0, -4.0], [2, 2])?;
    let b = dev.tensor_from_slice(&[0.5f32, 0.5], [2])?;
    Ok((x, b))
}

#[test]
fn the_cpu_device_runs_fusions() -> Result<(), Error> {
    let exec = bias_relu()?;
    let dev = Device::cpu();
    let (x, b) = inputs(&dev)?;
    let y = exec.run(&dev, &[(&x).into(), (&b).into()])?;
    assert_eq!(y[0].to_vec::<f32>()?, vec![1.5, 0.0, 3.5, 0.0]);
    assert_eq!(y[0].device(), &dev);
    Ok(())
}

#[test]
fn plans_and_cuda_source_for_a_preset_need_no_gpu() -> Result<(), Error> {
    let exec = bias_relu()?;
    let (x, b) = inputs(&Device::cpu())?;
    let info = runtime_info_for(
        DeviceInfo::preset(GpuModel::H100),
        &[(&x).into(), (&b).into()],
    );
    let plan = exec.plan_for(&info, None)?;
    let kernels: Vec<_> = plan.kernels().collect();
    assert_eq!(kernels.len(), 1, "{plan}");
    let source = kernels[0].cuda_source();
    assert!(source.contains("__global__"), "{source}");
    let (_, kernel) = exec.generate_for(&info, None)?;
    assert_eq!(kernel.map(|k| k.cuda_source()), Some(source));
    Ok(())
}

#[test]
#[cfg(not(feature = "cuda"))]
fn without_cuda_the_gpu_entry_points_are_typed_errors() -> Result<(), Error> {
    use nvfuser::{nvrtc, GpuArch};

    let dev = Device::best();
    assert!(dev.is_cpu() && !dev.is_gpu());
    for err in [
        Device::cuda(0).unwrap_err(),
        Device::cuda_with_own_stream(0).unwrap_err(),
        nvrtc::compile("extern \"C\" __global__ void k() {}", "k", GpuArch::SM90).unwrap_err(),
        nvrtc::probe().unwrap_err(),
        nvfuser_cuda::driver::probe().unwrap_err(),
    ] {
        assert!(matches!(err, Error::CudaDisabled { .. }), "{err}");
        assert!(
            err.to_string().contains("built without the `cuda` feature"),
            "{err}"
        );
    }
    // The GPU-only inspections answer for the CPU device, the only one there is.
    let exec = bias_relu()?;
    let (x, b) = inputs(&dev)?;
    let args = [(&x).into(), (&b).into()];
    for err in [
        exec.plan(&dev, &args).unwrap_err(),
        exec.cuda_source(&dev, &args).unwrap_err(),
        exec.heuristics(&dev, &args).unwrap_err(),
        exec.run_profiled(&dev, &args).map(|_| ()).unwrap_err(),
    ] {
        assert!(matches!(err, Error::NotAGpu { .. }), "{err}");
    }
    assert_eq!(exec.stats().runtimes, 0);
    Ok(())
}
