//! Kernels of the default schedule compile with NVRTC (skipped without NVRTC, required
//! with `NVFUSER_REQUIRE_NVRTC=1`), and a GPU-less executor keeps the CPU path.

use nvfuser_core::codegen::{self, KernelOptions};
use nvfuser_core::ir::{BinaryOp, UnaryOp};
use nvfuser_core::scheduler::default_schedule;
use nvfuser_core::{DataType, Fusion, FusionDefinition};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{nvrtc, GpuArch};

fn fusions() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for &op in UnaryOp::ALL {
        for dtype in [DataType::F32, DataType::BF16, DataType::I64] {
            let mut fd = FusionDefinition::new();
            let x = fd.define_tensor(dtype, &[-1, -1]).unwrap();
            let Ok(y) = fd.unary(op, x) else { continue };
            fd.add_output(y).unwrap();
            out.push((format!("{} {dtype}", op.name()), fd.finish().unwrap()));
        }
    }
    for &op in BinaryOp::ALL {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F16, &[-1, -1]).unwrap();
        let b = fd.define_tensor(DataType::F16, &[-1]).unwrap();
        let Ok(y) = fd.binary(op, x, b) else { continue };
        fd.add_output(y).unwrap();
        out.push((format!("{} [N,H]+[H]", op.name()), fd.finish().unwrap()));
    }
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let w = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let sq = fd.mul(xf, xf).unwrap();
    let ms = fd.mean(sq, &[1], true).unwrap();
    let r = fd.rsqrt(ms).unwrap();
    let n = fd.mul(xf, r).unwrap();
    let wf = fd.cast(w, DataType::F32).unwrap();
    let y = fd.mul(n, wf).unwrap();
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    out.push(("rms_norm".into(), fd.finish().unwrap()));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1]).unwrap();
    let m = fd.max(x, &[2], true).unwrap();
    let d = fd.sub(x, m).unwrap();
    let e = fd.exp(d).unwrap();
    let s = fd.sum(e, &[2], true).unwrap();
    let y = fd.div(e, s).unwrap();
    fd.add_output(y).unwrap();
    out.push(("softmax rank 3".into(), fd.finish().unwrap()));
    out
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn default_schedule_kernels_compile_with_nvrtc() {
    let all = fusions();
    let mut kernels = Vec::new();
    for (name, f) in &all {
        let sf = default_schedule(f).unwrap_or_else(|e| panic!("{name}: {e}"));
        let k = codegen::generate(&sf, &KernelOptions::default()).unwrap();
        kernels.push((name, k));
    }
    if require_nvrtc().is_none() {
        return;
    }
    for (name, k) in &kernels {
        nvrtc::compile(&k.cuda_source(), &k.abi.name, GpuArch::SM90)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    println!(
        "{} default-schedule kernels compiled for sm_90",
        kernels.len()
    );
}
