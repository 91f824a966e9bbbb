//! Every kernel of nvfuser-core's manual-schedule corpus, compiled by real NVRTC for
//! sm_80 and sm_90 (no GPU needed). Skips with a printed reason without NVRTC; fails
//! when `NVFUSER_REQUIRE_NVRTC=1`.

use nvfuser_core::codegen::{corpus, generate, KernelOptions};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, CudaError, GpuArch};

#[test]
fn corpus_compiles_for_sm80_and_sm90() {
    if require_nvrtc().is_none() {
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = 0;
    for (name, sf) in corpus::all().expect("corpus schedules") {
        let opts = KernelOptions {
            name: name.to_string(),
            ..Default::default()
        };
        let kernel =
            generate(&sf, &opts).unwrap_or_else(|e| panic!("{name}: lowering failed: {e}"));
        let src = kernel.cuda_source();
        for arch in [GpuArch::SM80, GpuArch::SM90] {
            match compile(&src, name, arch) {
                Ok(_) => compiled += 1,
                Err(CudaError::Compile(f)) => failures.push(format!("{name} ({arch}):\n{}", f.log)),
                Err(e) => failures.push(format!("{name} ({arch}): {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "NVRTC rejected generated kernels:\n{}",
        failures.join("\n")
    );
    eprintln!("compiled {compiled} corpus kernels with NVRTC");
}
