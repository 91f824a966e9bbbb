//! `scatter` and `scatter_add` planned for an H100 without a GPU: each fusion of
//! `scatter_cases` plans, every kernel of its plan compiles with NVRTC (sm_80, sm_90)
//! where NVRTC is found, no kernel is the default schedule, and the plans are
//! snapshots. `gpu_scatter` runs the same fusions on a GPU.

mod scatter_cases;

use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};
use scatter_cases::CASES;

fn plan_text(src: &str, sizes: &[&[usize]]) -> String {
    let fusion = nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0;
    let sizes: Vec<Vec<i64>> = sizes
        .iter()
        .map(|s| s.iter().map(|&n| n as i64).collect())
        .collect();
    let shapes: Vec<(DataType, &[i64])> = fusion
        .inputs()
        .iter()
        .filter(|&&v| fusion.val(v).is_tensor())
        .zip(&sizes)
        .map(|(&v, s)| (fusion.val(v).dtype, s.as_slice()))
        .collect();
    let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
    let exec = FusionExecutorCache::new(fusion);
    let plan = exec
        .plan_for(&info, None)
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut text = plan.to_string();
    for k in plan.kernels() {
        let cuda = k.cuda_source();
        // The kernel itself, without the shared preamble.
        let start = cuda.find("extern \"C\" __global__").unwrap_or(0);
        text.push_str(&cuda[start..]);
        if require_nvrtc().is_some() {
            for arch in [GpuArch::SM80, GpuArch::SM90] {
                compile(&k.cuda_source(), &k.abi.name, arch)
                    .unwrap_or_else(|e| panic!("{src} ({arch}): {e}"));
            }
        }
    }
    text
}

#[test]
fn scatters_plan_tuned_kernels_that_compile() {
    let mut all = String::new();
    for c in CASES {
        let text = plan_text(c.src, c.sizes);
        assert!(
            !text.contains(": default"),
            "{}: the default schedule\n{text}",
            c.name
        );
        all.push_str(&format!("=== {} ===\n{text}\n", c.name));
    }
    insta::assert_snapshot!(all);
}
