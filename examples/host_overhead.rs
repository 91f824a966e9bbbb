//! Host overhead of a cached `FusionExecutorCache::run` of a tiny one-kernel fusion
//! (`a * 2 + b` on 1024 f32) against a bare launch of the same compiled kernel.
//!
//! Three measurements, each after 200 warm-up calls:
//!
//! - **synchronized**: every call is followed by a stream synchronize, inside the timed
//!   region, for both paths, so the difference is the executor's host work per call;
//! - **queued**: only the call itself is timed (the executor returns before its kernel
//!   has run; launches are stream-ordered), with a synchronize every 64 calls outside
//!   the timed region so the launch queue never fills. This is the host cost per call
//!   when a program queues several fusions before reading a result;
//! - **paired** (the headline figure): batches of 32 queued executor calls and 32 bare
//!   launches alternate, 500 pairs, so both see the same machine state; the overhead is
//!   the median of the pairs' differences. The first two measurements run the two
//!   paths minutes apart, and on a shared host their difference moves by ±0.5 µs.
//!   It is measured for the default executor and for one with the launch replay off
//!   ([`FusionExecutorCache::with_replay`]), which runs every check on every call.
//!
//! The executor path is `exec.run(&gpu, &[a, b])`: input signature, runtime lookup,
//! then (a call repeating the recorded one's layout, sizes and strides) the device and
//! scalar checks, output allocation (from the device's caching pool, no memset), the
//! recorded parameters with this call's addresses patched in, `cuLaunchKernel`; the
//! bare path is `cuLaunchKernel` of the same function with parameters packed once
//! beforehand for a preallocated output.
//!
//! Both are measured on the two kinds of device: [`Device::cuda`] (the legacy default
//! stream) and [`Device::cuda_with_own_stream`]. On the latter, the same call is also
//! captured into a CUDA graph ([`Device::capture`]), alone and 16 times in a row, and the
//! graph's replay is timed (per captured call), with the output checked against the
//! eager call's.
//!
//! Run: `cargo run --release --example host_overhead` (needs a GPU and NVRTC; on a
//! machine without a GPU it says so and exits successfully).

use std::time::Instant;

use nvfuser_core::codegen::abi::{ArgRef, PackedArgs};
use nvfuser_core::eval::HostTensor;
use nvfuser_core::{DataType, FusionDefinition};
use nvfuser_cuda::args::{check_args, check_args_with};
use nvfuser_cuda::launch::{launch_kernel, launch_raw};
use nvfuser_cuda::profile::host;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, InputSignature, Tensor};

const N: usize = 1024;
const WARMUP: usize = 200;
const CALLS: usize = 2000;
/// Queued calls between two synchronizes in the queued measurement.
const QUEUE: usize = 64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Times `call` `WARMUP + CALLS` times; with `sync_each`, the synchronize after each call
/// is inside the timed region, otherwise a synchronize every `QUEUE` calls is outside it.
fn measure(
    device: &Device,
    sync_each: bool,
    mut call: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let start = Instant::now();
        call()?;
        if sync_each {
            device.synchronize()?;
        }
        let dt = start.elapsed().as_secs_f64() * 1e6;
        if !sync_each && i % QUEUE == QUEUE - 1 {
            device.synchronize()?;
        }
        if i >= WARMUP {
            us.push(dt);
        }
    }
    device.synchronize()?;
    Ok(median(us))
}

fn tensor_ref(t: &Tensor) -> Option<ArgRef<'_>> {
    Some(ArgRef::Tensor {
        ptr: t.cuda_address()?,
        sizes: t.sizes(),
        strides: t.strides(),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let legacy = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("host_overhead needs a GPU; none is usable here ({e}). Nothing to measure.");
            return Ok(());
        }
    };
    let own = Device::cuda_with_own_stream(0)?;
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let two = fd.constant(2.0);
    let t = fd.mul(a, two)?;
    let y = fd.add(t, b)?;
    fd.add_output(y)?;
    let exec = FusionExecutorCache::new(fd.finish()?);
    println!("a * 2 + b on {N} f32, median of {CALLS} calls after {WARMUP} warm-up calls");
    println!("| device | path | synchronized, us per call | queued, us per call |");
    println!("|---|---|---|---|");
    for (label, device) in [("legacy stream", &legacy), ("own stream", &own)] {
        let ta = device.tensor_from_host(&HostTensor::random(DataType::F32, &[N], 1))?;
        let tb = device.tensor_from_host(&HostTensor::random(DataType::F32, &[N], 2))?;
        let args = [Arg::from(&ta), Arg::from(&tb)];
        // The first call compiles; the rest hit the runtime cache.
        let eager = exec.run(device, &args)?.remove(0).to_vec::<f32>()?;
        let mut run = || -> Result<(), Box<dyn std::error::Error>> {
            drop(exec.run(device, &args)?);
            Ok(())
        };
        let exec_sync = measure(device, true, &mut run)?;
        let exec_queued = measure(device, false, &mut run)?;
        let (bare_sync, bare_queued) = bare(device, &exec, &ta, &tb, &|f| {
            Ok((measure(device, true, &mut *f)?, measure(device, false, f)?))
        })?;
        let pairs = paired_runs(device, &exec, &ta, &tb)?;
        // The launcher alone (launch checks, output allocation, packing, launch) and the
        // argument checks alone: where the executor's time goes.
        let plan = exec.plan(device, &args)?;
        let (_, function) = exec.kernel_and_function(device, &args)?;
        let pk = plan.segments[0].kernel.as_ref().ok_or("a planned kernel")?;
        let mut launch = || -> Result<(), Box<dyn std::error::Error>> {
            drop(launch_kernel(
                device,
                pk.scheduled.fusion(),
                &pk.kernel,
                &function,
                &args,
            )?);
            Ok(())
        };
        let launch_queued = measure(device, false, &mut launch)?;
        let mut checks = || -> Result<(), Box<dyn std::error::Error>> {
            check_args(exec.fusion(), device, &args)?;
            Ok(())
        };
        let checks_queued = measure(device, false, &mut checks)?;
        println!("| {label} | launch_kernel alone | | {launch_queued:.2} |");
        println!("| {label} | argument checks alone | | {checks_queued:.2} |");
        println!("| {label} | executor run (cached) | {exec_sync:.2} | {exec_queued:.2} |");
        println!("| {label} | bare launch | {bare_sync:.2} | {bare_queued:.2} |");
        println!(
            "| {label} | executor overhead | {:.2} | {:.2} |",
            exec_sync - bare_sync,
            exec_queued - bare_queued
        );
        for (what, (e, b, d)) in pairs {
            println!(
                "| {label} | paired batches of {PAIR_BATCH} queued calls, us per call | {what} {:.2}, bare launch {:.2} | overhead {:.2} |",
                e / 1e3,
                b / 1e3,
                d / 1e3
            );
        }
        // Where the cached call's host time goes (means per call, clock reads included).
        host::enable(true);
        let mut dropping = 0.0;
        let _ = host::take();
        for i in 0..CALLS {
            let outs = exec.run(device, &args)?;
            let start = Instant::now();
            drop(outs);
            dropping += start.elapsed().as_secs_f64() * 1e9;
            if i % QUEUE == QUEUE - 1 {
                device.synchronize()?;
            }
        }
        host::enable(false);
        let (calls, phases) = host::take();
        let split: Vec<String> = phases
            .iter()
            .map(|(p, ns)| format!("{} {ns:.0}", p.name()))
            .chain(std::iter::once(format!(
                "dropping the outputs {:.0}",
                dropping / calls.max(1) as f64
            )))
            .collect();
        println!(
            "| {label} | split of a cached call, ns | {} |",
            split.join(", ")
        );
        bulk(label, device, &exec, &args)?;
        if !std::ptr::eq(device, &own) {
            continue;
        }
        for calls in [1usize, 16] {
            let (graph, outs) = device.capture(|| {
                (0..calls)
                    .map(|_| exec.run(device, &args).map(|mut o| o.remove(0)))
                    .collect::<Result<Vec<Tensor>, _>>()
            })?;
            graph.replay()?;
            for o in &outs {
                if o.to_vec::<f32>()? != eager {
                    return Err("a graph replay gave other values than the eager call".into());
                }
            }
            let mut replay = || -> Result<(), Box<dyn std::error::Error>> {
                graph.replay()?;
                Ok(())
            };
            let per = calls as f64;
            let g_sync = measure(device, true, &mut replay)? / per;
            let g_queued = measure(device, false, &mut replay)? / per;
            println!(
                "| {label} | graph replay of {calls} captured call(s), per call | {g_sync:.2} | {g_queued:.2} |"
            );
        }
    }
    let stats = exec.stats();
    println!(
        "runtime cache: {} miss(es), {} reuse(s), {} hits",
        stats.misses, stats.reuses, stats.hits
    );
    Ok(())
}

/// Calls per batch in [`paired`].
const PAIR_BATCH: usize = 32;
/// Batch pairs in [`paired`].
const PAIRS: usize = 500;

/// The executor's call against the bare launch, measured side by side so that both see
/// the same machine state (clock speed, neighbours): `PAIRS` pairs of batches of
/// `PAIR_BATCH` queued calls, the two batches of a pair in alternating order, each
/// started on an empty queue. Returns the median ns per call of each, and the median
/// of the pairs' differences (the overhead).
fn paired(device: &Device, exec: Timed<'_>, bare: Timed<'_>) -> Result<(f64, f64, f64), BoxError> {
    for _ in 0..WARMUP {
        exec()?;
        bare()?;
    }
    let (mut e, mut b, mut d) = (Vec::new(), Vec::new(), Vec::new());
    for p in 0..PAIRS {
        let mut times = [0.0f64; 2];
        for k in 0..2 {
            let which = (k + p) % 2;
            device.synchronize()?;
            let start = Instant::now();
            for _ in 0..PAIR_BATCH {
                if which == 0 {
                    exec()?
                } else {
                    bare()?
                }
            }
            times[which] = start.elapsed().as_secs_f64() * 1e9 / PAIR_BATCH as f64;
        }
        e.push(times[0]);
        b.push(times[1]);
        d.push(times[0] - times[1]);
    }
    device.synchronize()?;
    Ok((median(e), median(b), median(d)))
}

/// [`paired`] for the executor with the launch replay on and off, against the bare
/// launch of the executor's kernel.
type PairedRow = (&'static str, (f64, f64, f64));

fn paired_runs(
    device: &Device,
    exec: &FusionExecutorCache,
    ta: &Tensor,
    tb: &Tensor,
) -> Result<Vec<PairedRow>, BoxError> {
    let args = [Arg::from(ta), Arg::from(tb)];
    let checked = FusionExecutorCache::new(exec.fusion().clone()).with_replay(false);
    let mut pairs = Vec::new();
    for (what, e) in [
        ("executor run", exec),
        ("executor run, no replay", &checked),
    ] {
        let times = bare(device, exec, ta, tb, &|f| {
            let mut run = || -> Result<(), BoxError> {
                drop(e.run(device, &args)?);
                Ok(())
            };
            paired(device, &mut run, f)
        })?;
        pairs.push((what, times));
    }
    Ok(pairs)
}

/// Host costs of the pieces of a cached call, each timed over a batch of `BULK` calls
/// (one clock read per batch, so the clock's own cost is not in the figures): the
/// clock itself, a pooled output allocation and its drop, the argument checks, the
/// input signature, and whole calls against bare launches (queued, a synchronize every
/// `QUEUE` calls, counted in).
fn bulk(
    label: &str,
    device: &Device,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
) -> Result<(), Box<dyn std::error::Error>> {
    const BULK: usize = 20_000;
    let per = |f: &mut dyn FnMut() -> Result<(), Box<dyn std::error::Error>>| {
        for _ in 0..WARMUP {
            f()?;
        }
        device.synchronize()?;
        let start = Instant::now();
        for i in 0..BULK {
            f()?;
            if i % QUEUE == QUEUE - 1 {
                device.synchronize()?;
            }
        }
        device.synchronize()?;
        Ok::<f64, Box<dyn std::error::Error>>(start.elapsed().as_secs_f64() * 1e9 / BULK as f64)
    };
    let mut sink = 0u128;
    let clock = per(&mut || {
        sink = sink.wrapping_add(Instant::now().elapsed().as_nanos());
        Ok(())
    })? - per(&mut || Ok(()))?;
    let alloc = per(&mut || {
        drop(device.uninit(DataType::F32, &[N])?);
        Ok(())
    })?;
    let sizes = nvfuser_core::ir::bind::SizeChecks::of(exec.fusion());
    let checks = per(&mut || {
        check_args_with(exec.fusion(), &sizes, device, args)?;
        Ok(())
    })?;
    let sig = per(&mut || {
        std::hint::black_box(InputSignature::of(device, args));
        Ok(())
    })?;
    let run = per(&mut || {
        drop(exec.run(device, args)?);
        Ok(())
    })?;
    let (ta, tb) = match args {
        [Arg::Tensor(a), Arg::Tensor(b)] => (*a, *b),
        _ => return Err("two tensor arguments".into()),
    };
    let bare = bare(device, exec, ta, tb, &per)?;
    println!(
        "| {label} | batches of {BULK}, ns per call | two clock reads {clock:.0}, pooled alloc + drop {alloc:.0}, argument checks {checks:.0}, input signature {sig:.0}, executor run {run:.0}, bare launch {bare:.0}, overhead {:.0} |",
        run - bare
    );
    std::hint::black_box(sink);
    Ok(())
}

/// The bare launch of the executor's kernel on `device`: parameters packed once by the
/// kernel's ABI for a preallocated output, timed by `time`.
type BoxError = Box<dyn std::error::Error>;
type Timed<'f> = &'f mut dyn FnMut() -> Result<(), BoxError>;
type Timer<'f, T> = &'f dyn Fn(Timed<'_>) -> Result<T, BoxError>;

fn bare<T>(
    device: &Device,
    exec: &FusionExecutorCache,
    ta: &Tensor,
    tb: &Tensor,
    time: Timer<'_, T>,
) -> Result<T, Box<dyn std::error::Error>> {
    let args = [Arg::from(ta), Arg::from(tb)];
    let (kernel, function) = exec.kernel_and_function(device, &args)?;
    let fusion = exec.fusion();
    let out = device.zeros(DataType::F32, [N])?;
    let (ia, ib, io) = (
        fusion.inputs()[0],
        fusion.inputs()[1],
        fusion.outputs()[0].val,
    );
    let mut packed = PackedArgs::new();
    kernel
        .abi
        .pack_into(
            |id| match id {
                _ if id == ia => tensor_ref(ta),
                _ if id == ib => tensor_ref(tb),
                _ if id == io => tensor_ref(&out),
                _ => None,
            },
            &[],
            &mut packed,
        )
        .map_err(|e| format!("packing: {e}"))?;
    let mut params = packed.kernel_params();
    // The kernel's own launch dims for these sizes (whichever scheduler made it).
    let dim = |t: nvfuser_core::ValId, axis: usize| -> Option<i64> {
        let i = fusion.input_position(t)?;
        [ta, tb][i].sizes().get(axis).map(|&s| s as i64)
    };
    let launch_dims = |e: &[nvfuser_core::ir::Extent; 3]| -> Result<[u32; 3], String> {
        let mut d = [1u32; 3];
        for (o, x) in d.iter_mut().zip(e) {
            let v = x
                .eval(&dim, &|_| None)
                .ok_or(format!("launch extent {x}"))?;
            *o = u32::try_from(v).map_err(|_| format!("launch extent {x} = {v}"))?;
        }
        Ok(d)
    };
    let grid = launch_dims(&kernel.launch.grid)?;
    let block = launch_dims(&kernel.launch.block)?;
    let mut bare = || -> Result<(), Box<dyn std::error::Error>> {
        // SAFETY: the parameters were packed by the kernel's own ABI for live buffers
        // (`ta`, `tb`, `out`) of N elements, and grid and block are the kernel's own
        // launch dims for these sizes.
        unsafe { launch_raw(device, &function, grid, block, params.as_mut_slice())? };
        Ok(())
    };
    time(&mut bare)
}
