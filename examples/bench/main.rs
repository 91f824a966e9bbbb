//! The benchmark: the issue's memory-bound cases and a hidden-size sweep of the norm
//! kernels, each checked against the CPU reference, then timed with CUDA events (L2
//! flushed before every repeat, median), and compared with a device-to-device copy
//! measured in the same run.
//!
//! ```text
//! cargo run --release --example bench                    # everything, results in benches/results/
//! cargo run --release --example bench -- --cases rmsnorm,softmax --no-sweep
//! cargo run --release --example bench -- --help
//! ```
//!
//! Writes `benches/results/nvfuser-rs.json` (format `nvfuser-bench/1`, the same as
//! `scripts/bench/torch_baseline.py` writes) and `.md`; `scripts/bench/report.py` joins
//! them with the PyTorch results. Without a GPU it says so, smoke-checks every case at
//! tiny shapes on the CPU reference evaluator, and exits 0 (writing results only when
//! `--out` is given).

mod cases;
mod check;
mod measure;
mod offline;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use nvfuser::prelude::*;
use nvfuser::Error;

use cases::{Case, Input};
use check::Held;
use measure::{BenchResult, Flusher};
use output::{CaseResult, CopyResult, Report};

const USAGE: &str = "\
usage: bench [options]
  --repeats N     timed repeats per case (default 30; the median is reported)
  --warmup N      untimed calls before timing (default 3)
  --cases A,B     only cases whose name contains one of these strings
  --no-sweep      skip the hidden-size sweep of softmax/LayerNorm/RMSNorm
  --sweep-only    only the sweep
  --copy-mib N    size of the reference device-to-device copy (default 1024)
  --out DIR       where to write <name>.json and <name>.md (default benches/results;
                  without a GPU nothing is written unless --out is given)
  --name NAME     file name of the results (default nvfuser-rs)";

struct Options {
    repeats: usize,
    warmup: usize,
    filters: Vec<String>,
    main: bool,
    sweep: bool,
    copy_mib: usize,
    out: Option<PathBuf>,
    name: String,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        repeats: 30,
        warmup: 3,
        filters: Vec::new(),
        main: true,
        sweep: true,
        copy_mib: 1024,
        out: None,
        name: "nvfuser-rs".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        let number = |flag: &str, v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: expected a number, found {v:?}"))
        };
        match a.as_str() {
            "--repeats" => o.repeats = number("--repeats", value("--repeats")?)?.max(1),
            "--warmup" => o.warmup = number("--warmup", value("--warmup")?)?,
            "--cases" => {
                o.filters = value("--cases")?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            "--no-sweep" => o.sweep = false,
            "--sweep-only" => o.main = false,
            "--copy-mib" => o.copy_mib = number("--copy-mib", value("--copy-mib")?)?.max(1),
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--name" => o.name = value("--name")?,
            "--help" | "-h" => return Err(String::new()),
            // `cargo bench`-style harness flags are ignored.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("bench: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(opts) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn selected(opts: &Options, shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    if opts.main {
        cases.extend(cases::main_cases(shrink)?);
        cases.extend(cases::movement_cases(shrink)?);
        cases.extend(cases::training_cases(shrink)?);
        cases.extend(cases::scan_cases(shrink)?);
        cases.extend(cases::sort_cases(shrink)?);
    }
    if opts.sweep {
        cases.extend(cases::sweep_cases(shrink * shrink)?);
    }
    if !opts.filters.is_empty() {
        cases.retain(|c| opts.filters.iter().any(|f| c.name.contains(f.as_str())));
    }
    Ok(cases)
}

fn run(mut opts: Options) -> BenchResult<ExitCode> {
    let (device, mut flusher, shrink) = match Device::cuda(0) {
        Ok(device) => {
            let flusher = Flusher::new(&device)?;
            (device, Some(flusher), 1)
        }
        Err(why) => {
            println!(
                "bench: this benchmark needs a GPU ({why}).\n\
                 bench: smoke-checking every case at tiny shapes on the CPU reference evaluator \
                 instead (host times, not a benchmark)."
            );
            match measure::check_spin_kernel() {
                Ok(()) => println!("bench: the L2-flush spin kernel compiles with NVRTC for sm_90"),
                Err(e) => println!("bench: the spin kernel did not compile with NVRTC: {e}"),
            }
            offline_plans(&opts)?;
            opts.repeats = opts.repeats.min(3);
            opts.warmup = 0;
            (Device::cpu(), None, 64)
        }
    };
    let cases = selected(&opts, shrink)?;
    let props = device.properties().cloned();
    let copy = match flusher.as_mut() {
        Some(f) => {
            let bytes = opts.copy_mib << 20;
            let (stats, gb_s) = measure::copy_bandwidth(&device, f, bytes, opts.repeats)?;
            Some(CopyResult {
                bytes: bytes as u64,
                time_us: stats.median_us,
                gb_s,
            })
        }
        None => None,
    };
    println!("bench: {} cases on {device}", cases.len());
    if let Some(c) = &copy {
        println!(
            "bench: device-to-device copy of {} MiB: {:.1} us, {:.0} GB/s (median of {})",
            c.bytes >> 20,
            c.time_us,
            c.gb_s,
            opts.repeats
        );
    }
    let copy_gb_s = copy.as_ref().map(|c| c.gb_s);
    let mut results = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let r = run_case(&device, flusher.as_mut(), case, &opts, copy_gb_s, i as u64);
        println!(
            "  {:<28} {:>12} us {:>7} GB/s {:>6} % copy  {:<24} {}",
            r.name,
            r.time_us.map_or("-".into(), |t| format!("{t:.1}")),
            r.gb_s.map_or("-".into(), |t| format!("{t:.0}")),
            r.pct_of_copy.map_or("-".into(), |t| format!("{t:.1}")),
            r.scheduler.as_deref().unwrap_or("-"),
            match &r.error {
                Some(e) => format!("{}: {}", r.status, output::one_line(e, 100)),
                None => output::one_line(&r.check, 100),
            }
        );
        results.push(r);
    }

    let flush_bytes = flusher.as_ref().map_or(0, |f| f.bytes() as u64);
    let report = Report {
        format: "nvfuser-bench/1",
        implementation: "nvfuser-rs".into(),
        device: props.as_ref().map_or_else(
            || "cpu (reference evaluator, tiny shapes: not a benchmark)".to_owned(),
            |p| p.name.clone(),
        ),
        date: measure::utc_now(),
        repeats: opts.repeats,
        timing: if device.is_gpu() {
            format!(
                "Kernel time from CUDA events around the launch (FusionExecutorCache::run_profiled; \
                 a plan of several kernels: events around the whole call), L2 flushed before every repeat by writing {} MiB{}, median of {} after {} warm-up calls; \
                 GB/s = logical bytes (each input and output once) / time.",
                flush_bytes >> 20,
                if flusher.as_ref().is_some_and(Flusher::spins) {
                    " then a 50 us GPU spin to hide host overhead"
                } else {
                    ""
                },
                opts.repeats,
                opts.warmup
            )
        } else {
            "Host time of FusionExecutorCache::run on the CPU reference device (smoke run).".into()
        },
        l2_flush_bytes: flush_bytes,
        peak_gb_s: props.as_ref().map(|p| p.peak_bandwidth_gb_per_s()),
        copy,
        cases: results,
    };
    println!("\n{}", output::markdown(&report));
    let out = match (&opts.out, device.is_gpu()) {
        (Some(dir), _) => Some(dir.clone()),
        (None, true) => Some(PathBuf::from("benches/results")),
        (None, false) => None,
    };
    if let Some(dir) = out {
        output::write(&dir, &opts.name, &report)?;
        println!(
            "bench: wrote {0}/{1}.json and {0}/{1}.md",
            dir.display(),
            opts.name
        );
    }
    let failed = report
        .cases
        .iter()
        .filter(|c| c.status == "mismatch" || c.status == "error")
        .count();
    if failed > 0 {
        eprintln!("bench: {failed} case(s) failed (mismatch or error)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Without a GPU: the scheduler, params and NVRTC compile of every full-size case on
/// an H100's properties (see `offline.rs`).
fn offline_plans(opts: &Options) -> BenchResult<()> {
    let props = nvfuser::DeviceProperties::h100_sxm_for_tests();
    let cases = selected(opts, 1)?;
    println!(
        "bench: the full-size cases on {} (scheduled offline):",
        props.name
    );
    for case in &cases {
        match offline::plan(case, &props) {
            Ok((scheduler, params, compiled)) => {
                println!(
                    "  {:<28} {:<17} {compiled}
  {:<28} {params}",
                    case.name, scheduler, ""
                )
            }
            Err(why) => println!("  {:<28} {why}", case.name),
        }
    }
    Ok(())
}

fn make_args(device: &Device, case: &Case, seed: u64) -> Result<Vec<Held>, Error> {
    case.inputs
        .iter()
        .enumerate()
        .map(|(j, input)| {
            Ok(match input {
                Input::Tensor { dtype, shape } => Held::Tensor(measure::random_tensor(
                    device,
                    *dtype,
                    shape,
                    seed * 16 + j as u64,
                )?),
                Input::Index { shape, bound } => Held::Tensor(measure::index_tensor(
                    device,
                    shape,
                    *bound,
                    seed * 16 + j as u64,
                )?),
                Input::Scalar(s) => Held::Scalar(*s),
            })
        })
        .collect()
}

/// Checks and times one case; never fails (a failure is the result's status).
fn run_case(
    device: &Device,
    flusher: Option<&mut Flusher>,
    case: &Case,
    opts: &Options,
    copy_gb_s: Option<f64>,
    seed: u64,
) -> CaseResult {
    let mut r = CaseResult {
        name: case.name.clone(),
        group: case.group.into(),
        kernel: case.kernel.into(),
        shape: case.shape.clone(),
        dtype: case.dtype.to_string(),
        bytes: case.bytes,
        status: "error".into(),
        error: None,
        check: "not run".into(),
        time_us: None,
        min_us: None,
        max_us: None,
        gb_s: None,
        pct_of_copy: None,
        call_us: None,
        scheduler: None,
        kernel_name: None,
        grid: None,
        block: None,
        registers: None,
        first_call_ms: None,
        params: None,
        note: case.note.into(),
    };
    let held = match make_args(device, case, seed + 1) {
        Ok(h) => h,
        Err(e) => {
            r.error = Some(format!("creating the inputs: {e}"));
            return r;
        }
    };
    let args: Vec<Arg<'_>> = held.iter().map(Held::arg).collect();
    let exec = FusionExecutorCache::new(case.fusion.clone());
    let start = Instant::now();
    // A plan of several kernels is timed as whole calls (events around `run`); one
    // kernel by `run_profiled`'s events right around its launch.
    let kernels = if device.is_gpu() {
        exec.plan(device, &args).map(|p| {
            r.scheduler = Some(
                p.segments
                    .iter()
                    .map(|s| s.scheduler)
                    .collect::<Vec<_>>()
                    .join(" + "),
            );
            p.kernels().count()
        })
    } else {
        Ok(0)
    };
    let whole_calls = kernels.as_ref().is_ok_and(|&k| k > 1);
    let first = match kernels {
        Ok(1) => exec.run_profiled(device, &args).map(|(o, p)| {
            r.scheduler = Some(p.scheduler);
            o
        }),
        Ok(_) => exec.run(device, &args),
        Err(e) => Err(e),
    };
    r.first_call_ms = Some(start.elapsed().as_secs_f64() * 1e3);
    let outputs = match first {
        Ok(o) => o,
        Err(e) => {
            if matches!(e, Error::UnsupportedFusion { .. }) {
                r.status = "unsupported".into();
            }
            r.error = Some(e.to_string());
            return r;
        }
    };
    match check::check_output(case, &held, &outputs[0]) {
        Ok(Ok(summary)) => {
            r.status = "ok".into();
            r.check = summary;
        }
        Ok(Err(why)) => {
            r.status = "mismatch".into();
            r.check = format!("MISMATCH: {why}");
        }
        Err(e) => {
            r.error = Some(format!("checking: {e}"));
            return r;
        }
    }
    drop(outputs);
    if device.is_gpu() {
        r.params = exec
            .heuristics(device, &args)
            .ok()
            .and_then(|p| serde_json::to_value(p).ok());
    }
    let timed = measure::time_case(
        device,
        flusher,
        &exec,
        &args,
        opts.warmup,
        opts.repeats,
        whole_calls,
    );
    match timed {
        Ok(t) => {
            r.time_us = Some(t.kernel.median_us);
            r.min_us = Some(t.kernel.min_us);
            r.max_us = Some(t.kernel.max_us);
            let gb_s = measure::gb_per_s(case.bytes, t.kernel.median_us);
            r.gb_s = Some(gb_s);
            r.pct_of_copy = copy_gb_s.map(|c| 100.0 * gb_s / c);
            r.call_us = t.call.map(|c| c.median_us);
            if let Some(p) = t.profile {
                if p.time_ms == 0.0 {
                    r.check.push_str("; no kernel was launched");
                }
                r.scheduler = Some(p.scheduler);
                r.kernel_name = Some(p.kernel);
                r.grid = Some(p.grid);
                r.block = Some(p.block);
                r.registers = Some(p.registers_per_thread);
            } else if !device.is_gpu() {
                r.scheduler = Some("cpu reference".into());
            }
        }
        Err(e) => {
            r.status = "error".into();
            r.error = Some(format!("timing: {e}"));
        }
    }
    r
}
