//! Without a GPU: what each full-size case would run on an H100, planned by the product's
//! own planner (`FusionExecutorCache::plan_for`: host scalars, one kernel or segments,
//! each segment's scheduler and params), every kernel generated and, when NVRTC is
//! installed, compiled for the device's architecture. A failure here is one the GPU run
//! would hit too, found before spending GPU time.

use nvfuser::scheduler::{InputInfo, RuntimeInfo, TensorInfo};
use nvfuser::{DeviceProperties, FusionExecutorCache};

use crate::cases::{Case, Input};

/// `Ok((schedulers, params as JSON, what NVRTC said))` or why no plan exists.
pub fn plan(case: &Case, props: &DeviceProperties) -> Result<(String, String, String), String> {
    let inputs = case
        .inputs
        .iter()
        .map(|i| match i {
            Input::Scalar(s) => InputInfo::Scalar(*s),
            Input::Tensor { .. } | Input::Index { .. } => {
                let (dtype, shape) = match i {
                    Input::Tensor { dtype, .. } => (*dtype, i.shape()),
                    _ => (nvfuser::DataType::I64, i.shape()),
                };
                let mut strides = vec![1i64; shape.len()];
                for d in (0..shape.len().saturating_sub(1)).rev() {
                    strides[d] = strides[d + 1] * shape[d + 1] as i64;
                }
                InputInfo::Tensor(TensorInfo {
                    dtype,
                    sizes: shape.iter().map(|&s| s as i64).collect(),
                    strides,
                    alignment: 16,
                })
            }
        })
        .collect();
    let info = RuntimeInfo {
        device: nvfuser::executor::device_info(props),
        inputs,
    };
    let exec = FusionExecutorCache::new(case.fusion.clone());
    let plan = exec.plan_for(&info, None).map_err(|e| e.to_string())?;
    let schedulers: Vec<&str> = plan.segments.iter().map(|s| s.scheduler).collect();
    let params: Vec<&nvfuser::scheduler::HeuristicParams> =
        plan.segments.iter().map(|s| &s.params).collect();
    let json = serde_json::to_string(&params).map_err(|e| e.to_string())?;
    let mut compiled = Vec::new();
    for k in plan.kernels() {
        compiled.push(
            match nvfuser_cuda::nvrtc::compile(&k.cuda_source(), &k.abi.name, props.arch()) {
                Ok(c) => format!(
                    "compiles for {} ({} bytes of CUBIN)",
                    props.arch(),
                    c.cubin.len()
                ),
                Err(e) => format!(
                    "not compiled: {}",
                    crate::output::one_line(&e.to_string(), 90)
                ),
            },
        );
    }
    Ok((schedulers.join(" + "), json, compiled.join("; ")))
}
