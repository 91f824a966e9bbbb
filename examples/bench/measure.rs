//! Timing: CUDA events on the device's stream, L2 flushed before every repeat, medians;
//! the device-to-device copy that results are compared with; the input data.
//!
//! The flush writes a buffer of twice the L2 size (from `DeviceProperties`) with a
//! memset on the same stream, so every repeat starts with none of the case's data in
//! L2, then queues a short spin kernel (about 50 us) so that the host has queued the
//! timed work before the GPU reaches the start event: the events then measure GPU work,
//! not host overhead. The PyTorch baseline (`scripts/bench/torch_baseline.py`) does the
//! same (`zero_()` of a buffer twice the L2, `torch.cuda._sleep`).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use nvfuser::cudarc::driver::sys::CUevent_flags;
use nvfuser::cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, CudaStream};
use nvfuser::prelude::*;
use nvfuser::{Error, KernelProfile};

/// Errors of the benchmark's own CUDA calls and of the library, as one boxed error.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Median, minimum and maximum of repeated measurements, in microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

impl Stats {
    /// Statistics of `samples_us` (not empty).
    pub fn of(mut samples_us: Vec<f64>) -> Stats {
        samples_us.sort_by(f64::total_cmp);
        let n = samples_us.len();
        let median_us = if n % 2 == 1 {
            samples_us[n / 2]
        } else {
            0.5 * (samples_us[n / 2 - 1] + samples_us[n / 2])
        };
        Stats {
            median_us,
            min_us: samples_us[0],
            max_us: samples_us[n - 1],
        }
    }
}

/// Writes a buffer larger than L2 before each timed repeat, then keeps the GPU busy
/// for a moment.
pub struct Flusher {
    device: Device,
    stream: Arc<CudaStream>,
    buffer: CudaSlice<u8>,
    /// The spin kernel and its length in clock cycles; `None` when NVRTC could not
    /// build it (the flush still works, host overhead may then show in short cases).
    spin: Option<(CudaFunction, i64)>,
}

const SPIN_SOURCE: &str = r#"extern "C" __global__ void nvf_bench_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}"#;

/// Compiles the spin kernel for sm_90 with NVRTC (the CPU smoke run's check that the
/// GPU run will have it).
pub fn check_spin_kernel() -> Result<(), Error> {
    nvfuser_cuda::nvrtc::compile(SPIN_SOURCE, "nvf_bench_spin", nvfuser_cuda::GpuArch::SM90)
        .map(|_| ())
}

/// The GPU time the spin kernel waits after each flush.
const SPIN_US: f64 = 50.0;

impl Flusher {
    /// A flush buffer of twice the device's L2 (at least 8 MiB) and the spin kernel.
    pub fn new(device: &Device) -> BenchResult<Flusher> {
        let props = device.properties().ok_or("the L2 flush needs a GPU")?;
        let stream = device
            .cuda_stream()
            .ok_or("the L2 flush needs a GPU")?
            .clone();
        let bytes = (2 * props.l2_cache_bytes as usize).max(8 << 20);
        let buffer = stream.alloc_zeros::<u8>(bytes)?;
        let spin = nvfuser_cuda::nvrtc::compile(SPIN_SOURCE, "nvf_bench_spin", props.arch())
            .and_then(|k| device.load_function(&k, "nvf_bench_spin"));
        let spin = match spin {
            Ok(f) => Some((
                f,
                (f64::from(props.sm_clock_khz) * 1e3 * SPIN_US * 1e-6) as i64,
            )),
            Err(e) => {
                eprintln!("bench: no spin kernel after the L2 flush ({e}); host overhead may show in short cases");
                None
            }
        };
        Ok(Flusher {
            device: device.clone(),
            stream,
            buffer,
            spin,
        })
    }

    /// The flush buffer's size in bytes.
    pub fn bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Whether a spin kernel follows each flush.
    pub fn spins(&self) -> bool {
        self.spin.is_some()
    }

    /// Queues the flush (and the spin) on the device's stream.
    pub fn flush(&mut self) -> BenchResult<()> {
        self.stream.memset_zeros(&mut self.buffer)?;
        if let Some((f, cycles)) = &self.spin {
            let mut cycles = *cycles;
            let mut params = [&mut cycles as *mut i64 as *mut c_void];
            // SAFETY: the spin kernel takes one `long long` by value; `params` points at
            // an i64 that lives across the call; one thread is within every limit.
            unsafe { nvfuser::launch::launch_raw(&self.device, f, [1; 3], [1; 3], &mut params)? };
        }
        Ok(())
    }
}

fn record(stream: &Arc<CudaStream>) -> BenchResult<CudaEvent> {
    Ok(stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Milliseconds between two events, after the end event completed.
fn elapsed_us(start: &CudaEvent, end: &CudaEvent) -> BenchResult<f64> {
    Ok(f64::from(start.elapsed_ms(end)?) * 1e3)
}

/// The device-to-device copy: `bytes` copied with `cuMemcpyDtoDAsync`, timed with
/// events, L2 flushed before each repeat. Returns the statistics and the median
/// bandwidth in GB/s (bytes read + bytes written over time).
pub fn copy_bandwidth(
    device: &Device,
    flusher: &mut Flusher,
    bytes: usize,
    repeats: usize,
) -> BenchResult<(Stats, f64)> {
    let stream = device.cuda_stream().ok_or("the copy needs a GPU")?.clone();
    let src = stream.alloc_zeros::<u8>(bytes)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes)?;
    stream.memcpy_dtod(&src, &mut dst)?; // warm-up
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        flusher.flush()?;
        let start = record(&stream)?;
        stream.memcpy_dtod(&src, &mut dst)?;
        let end = record(&stream)?;
        samples.push(elapsed_us(&start, &end)?);
    }
    let stats = Stats::of(samples);
    Ok((stats, gb_per_s(2 * bytes as u64, stats.median_us)))
}

/// `bytes / time` in GB/s (10^9 bytes per second).
pub fn gb_per_s(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e-6) / 1e9
    } else {
        0.0
    }
}

/// What timing one case gave.
pub struct Timing {
    /// Kernel time: events right around the launch (`run_profiled`), L2 flushed before.
    pub kernel: Stats,
    /// Time of a whole `FusionExecutorCache::run` on the device's timeline (output
    /// allocation, launch, and any host gaps in between), L2 flushed before. `None` on
    /// the CPU.
    pub call: Option<Stats>,
    /// The last profile (scheduler, launch dims, registers); `None` on the CPU.
    pub profile: Option<KernelProfile>,
}

/// Times `exec` on `args`: `warmup` untimed calls, then `repeats` timed ones.
///
/// On a GPU the kernel time comes from `FusionExecutorCache::run_profiled` (events
/// recorded on the device's stream right around the launch) after an L2 flush; the
/// call time from events around a whole `run`. A plan of several kernels
/// (`whole_calls`) has no single launch to profile: its kernel time is the call time.
/// On the CPU device, host time of `run`.
pub fn time_case(
    device: &Device,
    flusher: Option<&mut Flusher>,
    exec: &FusionExecutorCache,
    args: &[Arg<'_>],
    warmup: usize,
    repeats: usize,
    whole_calls: bool,
) -> BenchResult<Timing> {
    let Some(flusher) = flusher else {
        let mut samples = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            let start = Instant::now();
            exec.run(device, args)?;
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
        return Ok(Timing {
            kernel: Stats::of(samples),
            call: None,
            profile: None,
        });
    };
    let mut kernel = Vec::with_capacity(repeats);
    let mut profile = None;
    if !whole_calls {
        for _ in 0..warmup {
            exec.run_profiled(device, args)?;
        }
        for _ in 0..repeats {
            flusher.flush()?;
            let (outputs, p) = exec.run_profiled(device, args)?;
            drop(outputs);
            kernel.push(p.time_ms * 1e3);
            profile = Some(p);
        }
    }
    let stream = device.cuda_stream().ok_or("timing needs a GPU")?.clone();
    for _ in 0..warmup {
        drop(exec.run(device, args)?);
    }
    let mut call = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        flusher.flush()?;
        let start = record(&stream)?;
        let outputs = exec.run(device, args)?;
        let end = record(&stream)?;
        call.push(elapsed_us(&start, &end)?);
        drop(outputs);
    }
    let call = Stats::of(call);
    Ok(Timing {
        kernel: if whole_calls { call } else { Stats::of(kernel) },
        call: Some(call),
        profile,
    })
}

/// A tensor of `shape` with deterministic values uniform in [-2, 2) (SplitMix64 per
/// chunk, filled on every core: the largest inputs have 2^29 elements).
pub fn random_tensor(
    device: &Device,
    dtype: DataType,
    shape: &[usize],
    seed: u64,
) -> Result<Tensor, Error> {
    let n: usize = shape.iter().product();
    match dtype {
        DataType::BF16 => device.tensor_from_slice(&fill(n, seed, bf16::from_f32), shape),
        DataType::F16 => device.tensor_from_slice(&fill(n, seed, f16::from_f32), shape),
        _ => device.tensor_from_slice(&fill(n, seed, |v| v), shape),
    }
}

/// An i64 tensor of `shape` holding indices in `0..bound`, deterministic in `seed`.
pub fn index_tensor(
    device: &Device,
    shape: &[usize],
    bound: usize,
    seed: u64,
) -> Result<Tensor, Error> {
    let n: usize = shape.iter().product();
    let values = fill(n, seed, |v| v);
    let bound = bound.max(1) as f32;
    let ids: Vec<i64> = values
        .iter()
        .map(|&v| (((v + 2.0) / 4.0 * bound) as i64).clamp(0, bound as i64 - 1))
        .collect();
    device.tensor_from_slice(&ids, shape)
}

fn fill<T: Copy + Default + Send>(n: usize, seed: u64, convert: fn(f32) -> T) -> Vec<T> {
    let mut values = vec![T::default(); n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads).max(1 << 16);
    std::thread::scope(|scope| {
        for (c, part) in values.chunks_mut(chunk).enumerate() {
            scope.spawn(move || {
                let mut state = seed ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for v in part {
                    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^= z >> 31;
                    let unit = (z >> 40) as f32 / (1u64 << 24) as f32;
                    *v = convert(-2.0 + 4.0 * unit);
                }
            });
        }
    });
    values
}

/// Now, as an ISO 8601 UTC timestamp (`2026-11-22T10:04:05Z`).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}
