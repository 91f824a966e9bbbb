//! Creation ops beside reductions, planned for an H100 without a GPU: the kernels of
//! dropout + residual + LayerNorm (inner persistent, the mask computed where the row is
//! loaded) and of dropout backward with the bias gradient (outer reduction) are
//! snapshots, and compile with NVRTC where it is found. `gpu_creation` runs these
//! fusions on a GPU against the CPU reference.

use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};

mod creation_fusions;

use creation_fusions::{DROPOUT_BWD_BIAS, DROPOUT_RESIDUAL_LN};

fn info(tensors: &[(DataType, &[i64])], scalars: &[ScalarValue]) -> RuntimeInfo {
    let mut info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), tensors);
    info.inputs
        .extend(scalars.iter().map(|&v| InputInfo::Scalar(v)));
    info
}

/// The params and the kernel (runtime support cut out) of `src` planned for `info`;
/// the kernel is compiled by NVRTC for sm_90 where NVRTC is found.
fn kernel_text(src: &str, info: &RuntimeInfo) -> String {
    use nvfuser_cuda::dump::{Dump, DumpFlags};
    use std::sync::{Arc, Mutex};
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let buf: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let exec =
        FusionExecutorCache::new(fusion).with_dump(Dump::to_writer(DumpFlags::CUDA, buf.clone()));
    let (params, kernel) = exec.generate_for(info, None).unwrap();
    let kernel = kernel.expect("one kernel");
    if require_nvrtc().is_some() {
        compile(&kernel.cuda_source(), &kernel.abi.name, GpuArch::SM90)
            .unwrap_or_else(|e| panic!("NVRTC: {e}"));
    }
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    const END: &str = "// ---- end of runtime support ----\n";
    let body = text.split_once(END).map_or(text.as_str(), |(_, b)| b);
    format!("{params:?}\n{body}")
}

#[test]
fn creation_kernels_on_an_h100() {
    let (n, h) = (16384i64, 4096i64);
    let ln = kernel_text(
        DROPOUT_RESIDUAL_LN,
        &info(
            &[
                (DataType::BF16, &[n, h]),
                (DataType::BF16, &[n, h]),
                (DataType::BF16, &[h]),
                (DataType::BF16, &[h]),
            ],
            &[
                0.1f32.into(),
                (1.0f32 / 0.9).into(),
                1234i64.into(),
                0i64.into(),
                1e-5f32.into(),
            ],
        ),
    );
    let bias = kernel_text(
        DROPOUT_BWD_BIAS,
        &info(
            &[(DataType::BF16, &[8192, 4096])],
            &[
                0.1f32.into(),
                (1.0f32 / 0.9).into(),
                7i64.into(),
                0i64.into(),
            ],
        ),
    );
    insta::assert_snapshot!(format!(
        "dropout + residual + LayerNorm [{n}, {h}] bf16\n{ln}\ndropout bwd + bias [8192, 4096] bf16\n{bias}"
    ));
}
