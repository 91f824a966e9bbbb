//! Without a GPU: what each full-size case would run on an H100. The scheduler registry
//! computes params for the case's real shapes on the H100 test fixture's properties,
//! the kernel is scheduled and generated, and NVRTC compiles it for sm_90 when it is
//! installed. A failure here is one the GPU run would hit too, found before spending
//! GPU time.

use nvfuser::codegen::{self, KernelOptions};
use nvfuser::scheduler::{self, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser::DeviceProperties;

use crate::cases::{Case, Input};

/// `Ok((scheduler, params as JSON, CUBIN bytes or why not compiled))` or why the case
/// cannot be scheduled.
pub fn plan(case: &Case, props: &DeviceProperties) -> Result<(String, String, String), String> {
    let inputs = case
        .inputs
        .iter()
        .map(|i| match i {
            Input::Tensor { dtype, shape } => {
                let mut strides = vec![1i64; shape.len()];
                for d in (0..shape.len().saturating_sub(1)).rev() {
                    strides[d] = strides[d + 1] * shape[d + 1] as i64;
                }
                InputInfo::Tensor(TensorInfo {
                    dtype: *dtype,
                    sizes: shape.iter().map(|&s| s as i64).collect(),
                    strides,
                    alignment: 16,
                })
            }
            Input::Scalar(s) => InputInfo::Scalar(*s),
        })
        .collect();
    let info = RuntimeInfo {
        device: nvfuser::executor::device_info(props),
        inputs,
    };
    let params = scheduler::compute_heuristics(&case.fusion, &info).map_err(|r| {
        let reasons: Vec<String> = r.0.iter().map(ToString::to_string).collect();
        format!("no scheduler: {}", reasons.join("; "))
    })?;
    let json = serde_json::to_string(&params).map_err(|e| e.to_string())?;
    let sf = scheduler::schedule_with(&case.fusion, &params).map_err(|e| e.to_string())?;
    let options = KernelOptions {
        index_type: scheduler::index_type_for(&case.fusion, &info),
        ..KernelOptions::default()
    };
    let kernel = codegen::generate(&sf, &options).map_err(|e| e.to_string())?;
    let compiled =
        match nvfuser_cuda::nvrtc::compile(&kernel.cuda_source(), &kernel.abi.name, props.arch()) {
            Ok(k) => format!(
                "compiles for {} ({} bytes of CUBIN)",
                props.arch(),
                k.cubin.len()
            ),
            Err(e) => format!(
                "not compiled: {}",
                crate::output::one_line(&e.to_string(), 90)
            ),
        };
    Ok((params.kind().to_string(), json, compiled))
}
