//! Heuristics as data: compute the pointwise scheduler's params for a fusion and its
//! inputs, edit the unroll and vector width, run with the edited params, and check that
//! every variant computes exactly what the automatic path computes.
//!
//! `cargo run --example tune_heuristics`. On a GPU: `FusionExecutorCache::heuristics`,
//! `run_with_params` and `run_profiled_with` (kernel time of each variant). Without a
//! GPU: the params are computed for an H100's properties (`DeviceProperties::
//! h100_sxm_for_tests`), applied with `scheduler::schedule_with`, generated, and
//! compiled with NVRTC when it is installed (`source scripts/nvrtc-env.sh`).

mod common;

use nvfuser::codegen::{self, KernelOptions};
use nvfuser::fusion;
use nvfuser::prelude::*;
use nvfuser::scheduler::{self, HeuristicParams};
use nvfuser::DeviceProperties;

/// Scheduling errors and run errors in one type.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fusion! {
    /// GELU with the tanh approximation, bf16 in and out, f32 math.
    pub fn gelu_tanh(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        ((x as f32).gelu_tanh()) as bf16
    }
}

/// The automatic params with `unroll` and `vectorize` replaced (pointwise only).
fn edited(auto: &HeuristicParams, unroll: i64, vectorize: i64) -> Option<HeuristicParams> {
    match auto {
        HeuristicParams::Pointwise(p) => {
            let mut p = p.clone();
            p.unroll = unroll;
            p.vectorize = vectorize;
            Some(HeuristicParams::Pointwise(p))
        }
        _ => None,
    }
}

/// The variants tried: the automatic params, then a few edits.
const VARIANTS: [(i64, i64); 5] = [(1, 8), (2, 8), (4, 8), (1, 4), (4, 2)];

fn main() -> Result<()> {
    let device = common::device();
    let (n, h) = common::pick(&device, (16384, 16384), (64, 1024));
    let (_, xd) = common::random(&device, DataType::BF16, &[n, h], 1)?;
    let exec = FusionExecutorCache::new(gelu_tanh_fusion()?.clone());
    let args = [(&xd).into()];

    // 1. The params the registry picks for these inputs on this device.
    let auto = if device.is_gpu() {
        exec.heuristics(&device, &args)?
    } else {
        let props = DeviceProperties::h100_sxm_for_tests();
        let info = nvfuser::executor::runtime_info(&props, &args);
        scheduler::compute_heuristics(exec.fusion(), &info)
            .map_err(|r| format!("no scheduler: {r:?}"))?
    };
    let json = serde_json::to_string_pretty(&auto)?;
    println!(
        "gelu_tanh [{n}, {h}] bf16: the {} scheduler's params:\n{json}",
        auto.kind()
    );

    // 2. Params are plain data: save them, edit them, load them back.
    let loaded: HeuristicParams = serde_json::from_str(&json)?;
    assert_eq!(loaded, auto);

    // 3. Invalid params are an error, never a broken kernel.
    if let Some(bad) = edited(&auto, 1, 3) {
        let err = if device.is_gpu() {
            exec.run_with_params(&device, &args, &bad)
                .err()
                .map(|e| e.to_string())
        } else {
            scheduler::schedule_with(exec.fusion(), &bad)
                .err()
                .map(|e| e.to_string())
        };
        println!(
            "vectorize = 3: {}",
            err.as_deref().unwrap_or("accepted (unexpected)")
        );
    }

    if device.is_gpu() {
        run_variants(&device, &exec, &args, &auto)
    } else {
        schedule_variants(&exec, &auto)
    }
}

/// On a GPU: every variant runs, is compared bit for bit with the automatic path, and
/// is timed (median of 20 `run_profiled_with`; L2 not flushed).
fn run_variants(
    device: &Device,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
    auto: &HeuristicParams,
) -> Result<()> {
    let reference: Vec<bf16> = exec.run(device, args)?[0].to_vec()?;
    let mut ok = true;
    let mut variants = vec![("automatic".to_owned(), auto.clone())];
    for (unroll, vectorize) in VARIANTS {
        if let Some(p) = edited(auto, unroll, vectorize) {
            variants.push((format!("unroll {unroll}, vectorize {vectorize}"), p));
        }
    }
    println!(
        "\n| params | same values as automatic | kernel time (us) | GB/s |\n|---|---|---:|---:|"
    );
    for (label, params) in &variants {
        let got: Vec<bf16> = match exec.run_with_params(device, args, params) {
            Ok(out) => out[0].to_vec()?,
            Err(e) => {
                println!(
                    "| {label} | refused: {} | - | - |",
                    common::first_line(&e.to_string())
                );
                continue;
            }
        };
        let same = got
            .iter()
            .zip(&reference)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        ok &= same;
        let mut times = Vec::new();
        let mut gb_s = Vec::new();
        for _ in 0..20 {
            let (_, p) = exec.run_profiled_with(device, args, Some(params))?;
            times.push(p.time_ms * 1e3);
            gb_s.push(p.gb_per_s);
        }
        times.sort_by(f64::total_cmp);
        gb_s.sort_by(f64::total_cmp);
        println!(
            "| {label} | {} | {:.1} | {:.0} |",
            if same { "yes" } else { "NO" },
            times[10],
            gb_s[10]
        );
    }
    Ok(common::finish(ok)?)
}

/// Without a GPU: every variant is scheduled, generated and (with NVRTC) compiled.
fn schedule_variants(exec: &FusionExecutorCache, auto: &HeuristicParams) -> Result<()> {
    println!();
    for (unroll, vectorize) in VARIANTS {
        let Some(params) = edited(auto, unroll, vectorize) else {
            break;
        };
        let sf = scheduler::schedule_with(exec.fusion(), &params)?;
        let kernel = codegen::generate(&sf, &KernelOptions::default())?;
        let compiled = nvfuser_cuda::nvrtc::compile(
            &kernel.cuda_source(),
            &kernel.abi.name,
            nvfuser_cuda::GpuArch::SM90,
        );
        println!(
            "unroll {unroll}, vectorize {vectorize}: scheduled ({} primitives), {}",
            sf.history().len(),
            match compiled {
                Ok(k) => format!("compiled for sm_90 ({} bytes of CUBIN)", k.cubin.len()),
                Err(e) => format!("not compiled ({})", common::first_line(&e.to_string())),
            }
        );
    }
    println!(
        "\nNo GPU: nothing was launched. On a GPU each variant runs with \
         FusionExecutorCache::run_with_params and is compared with the automatic path."
    );
    Ok(())
}
