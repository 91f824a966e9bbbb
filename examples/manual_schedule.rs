//! Scheduling by hand: the primitives (`cache_after`/`cache_before`, `merge`, `split`,
//! `parallelize` onto blocks, threads and vector lanes, `rfactor`, `transform_like`,
//! `parallelize_like`, `inline_most`) applied to two fusions built with the run-time
//! builder, printed as scheduled IR, as plain data (JSON) and as the generated CUDA.
//!
//! `cargo run --example manual_schedule`. On a GPU each kernel runs through
//! `nvfuser::launch::run_scheduled` and is compared with the CPU reference evaluator.
//! Without a GPU the same schedules are generated (and compiled with NVRTC for sm_90 when
//! NVRTC is installed, `source scripts/nvrtc-env.sh`), and the CPU reference shows what
//! they compute.

mod common;

use nvfuser::codegen::{self, KernelOptions};
use nvfuser::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser::prelude::*;
use nvfuser::sched::{ParallelType::*, ScheduledFusion};

/// Scheduling errors (`ScheduleError`) and run errors (`nvfuser::Error`) in one type:
/// `nvfuser::Error` has no `From<ScheduleError>`.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// SiLU-mul over `[N, H]` bf16: one thread handles 8 consecutive elements, read and
/// written with 16-byte vector accesses (H a multiple of 1024).
fn silu_mul_vectorized() -> Result<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let gate = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let up = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let g = fd.cast(gate, DataType::F32)?;
    let u = fd.cast(up, DataType::F32)?;
    let s = fd.silu(g)?;
    let y = fd.mul(s, u)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    let mut s = ScheduledFusion::new(fd.finish()?)?;

    // Registers between global memory and the math: loads into `gate_r`/`up_r`, the
    // result computed into `y_r`, then stored to `y`.
    let gate_r = s.cache_after(gate)?;
    let up_r = s.cache_after(up)?;
    let y_r = s.cache_before(y)?;
    // [N, H] -> [N, H/8, 8] -> [N, H/1024, 128, 8] -> [N*H/1024, 128, 8]: blocks,
    // threads, 8 elements per thread. The vectorized dim must be an inner split of the
    // innermost logical dim, so H is split before the outer dims are merged (and H
    // must be a multiple of 1024: `run_scheduled` checks it before launching).
    s.split(y, 1, 8)?;
    s.split(y, 1, 128)?;
    s.merge(y, 0)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 1, TIDx)?;
    // Every other tensor of the kernel takes the same loop structure.
    let others: Vec<ValId> = s
        .schedule()
        .tensors
        .keys()
        .copied()
        .filter(|&t| t != y && !s.schedule().is_input(t))
        .collect();
    s.transform_like(y, &others)?;
    s.parallelize_like(y, &others)?;
    // 16-byte accesses: the loads into registers and the store.
    for t in [gate_r, up_r, y] {
        s.parallelize(t, -1, Vectorize)?;
    }
    s.parallelize(y_r, -1, Unroll)?;
    s.inline_most()?;
    Ok(s)
}

/// Row sums of `[N, K]` f32: one row per block; each of 128 threads sums a strided part
/// of the row serially (the `rfactor`ed partial), then the block reduces the partials.
fn row_sum_rfactor() -> Result<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    let mut s = ScheduledFusion::new(fd.finish()?)?;
    let x_r = s.cache_after(x)?;
    // [N, K] -> [N, K/128, 128]; the serial K/128 part becomes its own reduction.
    s.split(r, 1, 128)?;
    let partial = s.rfactor(r, &[1])?;
    s.parallelize(partial, 0, BIDx)?;
    s.parallelize(partial, 2, TIDx)?;
    s.parallelize(r, 0, BIDx)?;
    s.parallelize(r, 1, TIDx)?;
    s.transform_like(partial, &[x_r])?;
    s.parallelize_like(partial, &[x_r])?;
    s.inline_most()?;
    Ok(s)
}

fn show_and_run(
    device: &Device,
    title: &str,
    sf: &ScheduledFusion,
    inputs: &[HostTensor],
    tolerance: Tolerance,
) -> Result<bool> {
    println!("==== {title}\n\nThe fusion:\n{}", sf.fusion());
    println!(
        "The scheduled IR (loop domains after the primitives):\n{}",
        sf.scheduled_ir()
    );
    let history = serde_json::to_string(sf.history()).unwrap_or_else(|e| e.to_string());
    println!(
        "The schedule as data ({} primitives, replayable with ScheduledFusion::replay):\n{history}\n",
        sf.history().len()
    );
    let kernel = codegen::generate(sf, &KernelOptions::default())?;
    let src = kernel.cuda_source();
    let start = src.find("extern \"C\"").unwrap_or(0);
    println!("The generated CUDA kernel:\n{}", &src[start..]);

    let want = evaluate(
        sf.fusion(),
        &inputs.iter().map(EvalInput::from).collect::<Vec<_>>(),
    )?;
    if device.is_cpu() {
        match nvfuser_cuda::nvrtc::compile(&src, &kernel.abi.name, nvfuser_cuda::GpuArch::SM90) {
            Ok(k) => println!(
                "NVRTC compiled it for sm_90: {} bytes of CUBIN.",
                k.cubin.len()
            ),
            Err(e) => println!("(not compiled: {})", common::first_line(&e.to_string())),
        }
        println!(
            "No GPU: the CPU reference computed {} outputs of shape {:?} instead.\n",
            want.len(),
            want[0].shape()
        );
        return Ok(true);
    }
    let tensors = inputs
        .iter()
        .map(|h| device.tensor_from_host(h))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let args: Vec<Arg<'_>> = tensors.iter().map(Arg::from).collect();
    let got = nvfuser::launch::run_scheduled(device, sf, &args)?;
    let got = got[0].to_host_tensor()?;
    let ok = match compare(&got, &want[0], tolerance) {
        Ok(()) => {
            println!("Ran on {device}: matches the CPU reference.\n");
            true
        }
        Err(m) => {
            println!("Ran on {device}: MISMATCH against the CPU reference: {m}\n");
            false
        }
    };
    Ok(ok)
}

fn main() -> Result<()> {
    let device = common::device();
    let (n, h) = common::pick(&device, (4096, 8192), (16, 1024));
    let gate = HostTensor::random(DataType::BF16, &[n, h], 1);
    let up = HostTensor::random(DataType::BF16, &[n, h], 2);
    let ok = show_and_run(
        &device,
        "SiLU-mul, vectorized by 8",
        &silu_mul_vectorized()?,
        &[gate, up],
        Tolerance::new(1.6e-2, 1e-3),
    )?;
    let x = HostTensor::random(DataType::F32, &[n, h], 3);
    let ok = show_and_run(
        &device,
        "Row sums with an rfactor and a block reduction",
        &row_sum_rfactor()?,
        &[x],
        Tolerance::new(1e-4, 1e-6 * h as f64),
    )? && ok;
    Ok(common::finish(ok)?)
}
