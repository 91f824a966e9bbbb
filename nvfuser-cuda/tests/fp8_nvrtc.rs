//! Kernels with fp8 tensors, planned for an H100 and compiled by real NVRTC for sm_80 and
//! sm_90 (no GPU needed): casts both ways, fp8 math, 16-wide vector accesses of 1-byte
//! elements, reductions and scans of fp8 inputs, an fp8 scalar parameter. Without
//! NVRTC the plans are still made and checked; with `NVFUSER_REQUIRE_NVRTC=1` a missing
//! NVRTC fails.

use nvfuser_cuda::testing::{plan_one_kernel, require_nvrtc};
use nvfuser_cuda::{compile, GpuArch};

/// Plans `src` for contiguous inputs of `sizes` on an H100, compiles the kernel and
/// returns its source.
fn planned_source(src: &str, sizes: &[&[i64]]) -> String {
    let (_, kernel) = plan_one_kernel(src, sizes);
    let cuda = kernel.cuda_source();
    if require_nvrtc().is_some() {
        for arch in [GpuArch::SM80, GpuArch::SM90] {
            compile(&cuda, &kernel.abi.name, arch).unwrap_or_else(|e| panic!("{arch}: {e}\n{src}"));
        }
    }
    cuda
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn casts_to_and_from_fp8_compile() {
    let cuda = planned_source(
        "fn f(x: Tensor<f32, [N, H]>) -> (Tensor<f32, [N, H]>, Tensor<f32, [N, H]>, Tensor<f8e4m3, [N, H]>) {\n    let a = x as f8e4m3;\n    let b = x as f8e5m2;\n    (a as f32, b as f32, a)\n}\n",
        &[&[64, 4096]],
    );
    assert!(cuda.contains("(nvf_fp8_e4m3)("), "{cuda}");
    assert!(cuda.contains("(nvf_fp8_e5m2)("), "{cuda}");
}

/// A kernel whose tensors are all one byte wide moves 16 elements per vector access.
#[test]
fn one_byte_tensors_use_sixteen_wide_vectors() {
    let cuda = planned_source(
        "fn f(x: Tensor<f8e4m3, [N, H]>, y: Tensor<f8e4m3, [N, H]>) -> Tensor<f8e5m2, [N, H]> {\n    (((x * y + 1) as f32).exp()) as f8e5m2\n}\n",
        &[&[64, 4096], &[64, 4096]],
    );
    assert!(cuda.contains("nvf_vec_copy<nvf_fp8_e4m3, 16>"), "{cuda}");
    assert!(cuda.contains("nvf_vec_copy<nvf_fp8_e5m2, 16>"), "{cuda}");
    // fp8 math runs in f32: the operands are converted, the result rounded once.
    assert!(cuda.contains("(nvf_fp8_e4m3)((float)("), "{cuda}");
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn reductions_and_scans_of_fp8_compile() {
    for dt in ["f8e4m3", "f8e5m2"] {
        for (body, out) in [
            ("(x as f32).sum([1])", "f32"),
            ("x.sum([1])", dt),
            ("x.max([1])", dt),
            ("x.min([1])", dt),
            ("(x as f32).mean([1])", "f32"),
        ] {
            for size in [3, 100_000] {
                planned_source(
                    &format!(
                        "fn f(x: Tensor<{dt}, [N, H]>) -> Tensor<{out}, [N]> {{\n    {body}\n}}\n"
                    ),
                    &[&[4, size]],
                );
            }
        }
        let cuda = planned_source(
            &format!(
                "fn f(x: Tensor<{dt}, [N, H]>) -> Tensor<{dt}, [N, H]> {{\n    x.cummax(1)\n}}\n"
            ),
            &[&[8, 1000]],
        );
        // No infinity in e4m3: max and min select in f32.
        assert!(!cuda.contains("nvf_fp8_e4m3)(-__int_as_float"), "{cuda}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn an_fp8_scalar_parameter_compiles() {
    planned_source(
        "fn f(x: Tensor<f8e5m2, [N]>, s: f8e5m2) -> Tensor<f8e5m2, [N]> {\n    x * s - 0.5f8e5m2\n}\n",
        &[&[1000]],
    );
}
