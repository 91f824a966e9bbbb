//! Activation backwards with their bias gradients (`bias_grad_cases`), planned as an
//! H100 would run them, without a GPU: one outer-reduction kernel each, the value the
//! full outputs and the column sums share computed once per element (its defining
//! function appears once in the kernel), full rows loaded with 16-byte vectors and
//! full outputs stored with vectors where the width allows, and every kernel compiled
//! by NVRTC for sm_90 (with `--features nvrtc-tests`; skipped without NVRTC otherwise).

mod bias_grad_cases;

use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, RuntimeInfo};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};

/// The kernel's own code, after the runtime support every kernel carries.
fn body(src: &str) -> &str {
    const END: &str = "// ---- end of runtime support ----\n";
    src.find(END).map_or(src, |i| &src[i + END.len()..])
}

#[test]
fn shared_values_are_computed_once_with_vectors() {
    let nvrtc = require_nvrtc().is_some();
    let mut compiled = 0;
    let mut vectorized = 0;
    for case in bias_grad_cases::cases() {
        let fusion = nvfuser_core::dsl::build_str(&case.src)
            .unwrap_or_else(|e| panic!("{}: {e:?}", case.name))
            .remove(0)
            .0;
        let shapes: Vec<(nvfuser_core::DataType, Vec<i64>)> = case
            .shapes
            .iter()
            .map(|(d, s)| (*d, s.iter().map(|&x| x as i64).collect()))
            .collect();
        let refs: Vec<(nvfuser_core::DataType, &[i64])> =
            shapes.iter().map(|(d, s)| (*d, s.as_slice())).collect();
        let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs);
        let what = format!("{} {:?}", case.name, case.shapes);
        let plan = FusionExecutorCache::new(fusion)
            .plan_for(&info, None)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(plan.segments.len(), 1, "{what}: {plan}");
        let seg = &plan.segments[0];
        let HeuristicParams::OuterReduction(p) = &seg.params else {
            panic!(
                "{what}: planned by {}: {:?} {:?}",
                seg.scheduler, seg.fallback, seg.refused
            );
        };
        assert!(seg.fallback.is_none(), "{what}: {:?}", seg.fallback);
        let src = seg.kernel.as_ref().expect("a kernel").kernel.cuda_source();
        let code = body(&src);
        if let Some(op) = case.once {
            assert_eq!(
                code.matches(op).count(),
                1,
                "{what}: {op} not once:\n{code}"
            );
        }
        // Innermost widths that 16-byte vectors divide get them (bf16/f16 8 columns,
        // f32 4), except beside a Welford statistic.
        let inner = *case.shapes[0].1.last().unwrap();
        let width = 16 / case.shapes[0].0.size_bytes();
        let welford = case.name.starts_with("var_mean");
        if !welford && inner % width == 0 && inner > 8 {
            assert_eq!(p.vectorize as usize, width, "{what}");
            assert!(
                code.contains(&format!(
                    "nvf_vec_copy<{}, {width}>(&T",
                    ctype(case.shapes[0].0)
                )),
                "{what}: no vector load:\n{code}"
            );
            vectorized += 1;
        }
        if welford || inner % 2 == 1 {
            assert_eq!(p.vectorize, 1, "{what}");
        }
        if nvrtc {
            compile(&src, case.name, GpuArch::SM90).unwrap_or_else(|e| panic!("{what}: {e}"));
            compiled += 1;
        }
    }
    eprintln!("{vectorized} cases with vectors, {compiled} kernels compiled");
    assert!(vectorized >= 6);
}

fn ctype(d: nvfuser_core::DataType) -> &'static str {
    match d {
        nvfuser_core::DataType::BF16 => "nvf_bfloat",
        nvfuser_core::DataType::F16 => "nvf_half",
        _ => "float",
    }
}
