//! An optimizer step written as in-place outputs: SGD with momentum,
//! `m <- 0.9 m + g` and `p <- p - lr m`, with `p` and `m` in f32 and the gradient in
//! bf16, both updates stored into their inputs (`add_output_alias`).
//!
//! Checks the updated buffers against the CPU reference, then (on a GPU) times three
//! ways of running the step and prints a table: the in-place fusion (one kernel that
//! writes `p` and `m` straight into their buffers), the same with that turned off
//! (`with_direct_in_place(false)`: the kernel writes new buffers that are copied in
//! after it), and the same math returning new tensors. GB/s count
//! the logical bytes: `p`, `m` and `g` read, `p` and `m` written (18 bytes a
//! parameter). `scripts/bench/torch_inplace.py` times PyTorch's in-place ops on the
//! same step.
//!
//!     cargo run --release --example inplace_step [-- PARAMS]

mod common;

use std::time::Instant;

use nvfuser::eval::{compare, HostTensor, Tolerance};
use nvfuser::prelude::*;
use nvfuser::Error;

/// The step; `in_place`: the updates are stored into `p` and `m`, else returned.
fn step(in_place: bool) -> Result<Fusion, Error> {
    let mut fd = FusionDefinition::new();
    let p = fd.define_tensor(DataType::F32, &[-1])?;
    let m = fd.define_tensor(DataType::F32, &[-1])?;
    let g = fd.define_tensor(DataType::BF16, &[-1])?;
    let lr = fd.define_scalar(DataType::F64)?;
    let beta = fd.constant(0.9f32);
    let gf = fd.cast(g, DataType::F32)?;
    let decayed = fd.mul(m, beta)?;
    let m_next = fd.add(decayed, gf)?;
    let delta = fd.mul(m_next, lr)?;
    let p_next = fd.sub(p, delta)?;
    if in_place {
        fd.add_output_alias(p_next, p)?;
        fd.add_output_alias(m_next, m)?;
    } else {
        fd.add_output(p_next)?;
        fd.add_output(m_next)?;
    }
    Ok(fd.finish()?)
}

/// Microseconds per step over `iters` steps, after three untimed ones.
fn time(
    device: &Device,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
    iters: usize,
) -> Result<f64, Error> {
    for _ in 0..3 {
        exec.run(device, args)?;
    }
    device.synchronize()?;
    let start = Instant::now();
    for _ in 0..iters {
        exec.run(device, args)?;
    }
    device.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

fn main() -> Result<(), Error> {
    let device = common::device();
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|_| Error::InvalidInput {
            kernel: "inplace_step".into(),
            what: format!("PARAMS must be a count of parameters, found {a:?}"),
        })?,
        None => common::pick(&device, 1 << 26, 1 << 12),
    };
    let lr = ScalarValue::Float(1e-3);
    let (p0, m0, g0) = (
        HostTensor::random(DataType::F32, &[n], 1),
        HostTensor::random(DataType::F32, &[n], 2),
        HostTensor::random(DataType::BF16, &[n], 3),
    );
    // Two steps on this device, against two on the CPU reference device.
    let mut finals = Vec::new();
    for d in [device.clone(), Device::cpu()] {
        let exec = FusionExecutorCache::new(step(true)?);
        let (p, m, g) = (
            d.tensor_from_host(&p0)?,
            d.tensor_from_host(&m0)?,
            d.tensor_from_host(&g0)?,
        );
        for _ in 0..2 {
            exec.run(
                &d,
                &[(&p).into(), (&m).into(), (&g).into(), Arg::Scalar(lr)],
            )?;
        }
        finals.push((p.to_host_tensor()?, m.to_host_tensor()?));
    }
    let tol = Tolerance::new(1e-5, 1e-5);
    let ok = compare(&finals[0].0, &finals[1].0, tol).is_ok()
        && compare(&finals[0].1, &finals[1].1, tol).is_ok();
    println!(
        "p and m after two in-place steps of {n} parameters on {device}: {}",
        if ok {
            "equal to the CPU reference (ok)"
        } else {
            "DIFFERENT from the CPU reference"
        }
    );
    if !device.is_gpu() {
        println!("(no timing without a GPU)");
        return common::finish(ok);
    }
    let bytes = 18.0 * n as f64;
    let (p, m, g) = (
        device.tensor_from_host(&p0)?,
        device.tensor_from_host(&m0)?,
        device.tensor_from_host(&g0)?,
    );
    let direct = FusionExecutorCache::new(step(true)?);
    let stored = FusionExecutorCache::new(step(true)?).with_direct_in_place(false);
    let fresh = FusionExecutorCache::new(step(false)?);
    let args = [(&p).into(), (&m).into(), (&g).into(), Arg::Scalar(lr)];
    println!("| variant | us per step | GB/s |");
    println!("|---|---:|---:|");
    for (name, exec) in [
        ("in place, written directly", &direct),
        ("in place, copied in after the kernel", &stored),
        ("new tensors (no in-place)", &fresh),
    ] {
        let args = &args;
        let us = time(&device, exec, args, 50)?;
        println!("| {name} | {us:.1} | {:.0} |", bytes / us / 1e3);
    }
    println!(
        "direct in-place calls: {} of {}",
        direct.stats().direct_in_place,
        direct.stats().hits + direct.stats().misses
    );
    common::finish(ok)
}
