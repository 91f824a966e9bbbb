//! What the examples share: pick a device, make inputs, compare with a reference, time
//! on a GPU, print. Included by each example with `mod common;` (Cargo does not build
//! `examples/common/` as an example of its own: it has no `main.rs`).

#![allow(dead_code)] // Each example uses a different part.

use nvfuser::eval::HostTensor;
use nvfuser::prelude::*;
use nvfuser::{Error, KernelProfile};

/// The library's warnings (through `log`) on stderr: a minimal logger, so the examples
/// need no logging crate of their own. An application installs its own.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("{}: {}", record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Shows the library's warnings on stderr (once; later calls do nothing).
pub fn init_logging() {
    if log::set_logger(&StderrLogger).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// GPU 0 when there is one; otherwise the CPU reference device. `Device::best()` warns
/// why there is no GPU (shown by [`init_logging`]); this adds what the example will do
/// instead.
pub fn device() -> Device {
    init_logging();
    let device = Device::best();
    if device.is_cpu() {
        println!(
            "No GPU here: this example runs on the CPU reference evaluator instead (f64 math, \
             a smaller problem, no kernel timing). On a GPU the same code runs generated CUDA."
        );
    }
    device
}

/// `gpu` on a GPU, `cpu` on the CPU reference device (which computes in f64 and is far
/// slower, so it gets a smaller problem).
pub fn pick<T>(device: &Device, gpu: T, cpu: T) -> T {
    if device.is_gpu() {
        gpu
    } else {
        cpu
    }
}

/// Deterministic values uniform in [-2, 2) of `dtype`: the host copy (for the
/// reference) and the tensor on `device`.
pub fn random(
    device: &Device,
    dtype: DataType,
    shape: &[usize],
    seed: u64,
) -> Result<(HostTensor, Tensor), Error> {
    let host = HostTensor::random(dtype, shape, seed);
    let tensor = device.tensor_from_host(&host)?;
    Ok((host, tensor))
}

/// The worst `|got - want| / (1 + |want|)` over all elements.
pub fn worst_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g.is_nan() != w.is_nan() {
                f64::INFINITY
            } else if g.is_nan() {
                0.0
            } else {
                (g - w).abs() / (1.0 + w.abs())
            }
        })
        .fold(0.0, f64::max)
}

/// Compares `got` with an independent reference `want` (row-major f64 values) and
/// prints the worst relative error; `tol` is the largest allowed. Returns whether it
/// matched.
pub fn check(label: &str, got: &Tensor, want: &[f64], tol: f64) -> Result<bool, Error> {
    let got = got.to_host_tensor()?.to_f64_vec();
    if got.len() != want.len() {
        println!(
            "  {label}: MISMATCH: {} elements, expected {}",
            got.len(),
            want.len()
        );
        return Ok(false);
    }
    let worst = worst_error(&got, want);
    let ok = worst <= tol;
    println!(
        "  {label}: worst relative error vs a plain-Rust f64 reference: {worst:.2e} (allowed {tol:.1e}) {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}

/// One bf16 rounding of the output: 8 significant bits, plus a little for the f32 math.
pub const BF16_TOL: f64 = 1.0 / 128.0;

/// On a GPU: runs `exec` `repeats` times with `run_profiled` (CUDA events around the
/// kernel) and prints the median run's profile. Nothing on the CPU device.
pub fn profile(
    device: &Device,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
    repeats: usize,
) -> Result<Option<KernelProfile>, Error> {
    if !device.is_gpu() {
        return Ok(None);
    }
    let mut profiles = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        profiles.push(exec.run_profiled(device, args)?.1);
    }
    profiles.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms));
    let p = profiles.swap_remove(profiles.len() / 2);
    println!(
        "  median of {repeats} profiled runs (L2 not flushed; `cargo run --release --example bench` \
         measures properly):\n  {p}"
    );
    Ok(Some(p))
}

/// Prints the fusion and, on a GPU, the generated kernel; says how to see every stage.
pub fn show(
    device: &Device,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
    name: &str,
) -> Result<(), Error> {
    println!("\nThe fusion:\n{}", exec.fusion());
    if device.is_gpu() {
        let src = exec.cuda_source(device, args)?;
        let start = src.find("extern \"C\"").unwrap_or(0);
        println!("The generated CUDA kernel:\n{}", &src[start..]);
    }
    println!(
        "To see the scheduled IR, the CUDA source and the launch of every kernel:\n  \
         NVFUSER_DUMP=scheduled,cuda,launch cargo run --example {name}"
    );
    Ok(())
}

/// Exits with status 1 when a check failed (after everything was printed).
pub fn finish(ok: bool) -> Result<(), Error> {
    if !ok {
        eprintln!("some outputs did not match the reference");
        std::process::exit(1);
    }
    Ok(())
}

/// The first line of a (possibly long, multi-line) message.
pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
