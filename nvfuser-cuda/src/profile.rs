//! Profiling one kernel launch: [`KernelProfile`], from
//! [`crate::FusionExecutorCache::run_profiled`].
//!
//! The kernel time comes from two CUDA events recorded on the device's stream right
//! before and right after the launch (so it excludes argument checks, output allocation
//! and parameter packing). Bytes are logical: each input tensor's distinct elements (an
//! expanded, stride-0 dim counts once) and each output's elements, times the element
//! size. Bandwidth is compared with the device's theoretical peak
//! ([`crate::DeviceProperties::peak_bandwidth_gb_per_s`]).

pub mod host;

use std::fmt;

#[cfg(feature = "cuda")]
use cudarc::driver::sys::{CUevent_flags, CUfunction_attribute};
#[cfg(feature = "cuda")]
use cudarc::driver::{CudaEvent, CudaFunction};
use serde::{Deserialize, Serialize};

use crate::args::Arg;
use crate::Tensor;
#[cfg(feature = "cuda")]
use crate::{Device, Error};

/// What one profiled kernel launch did and how fast.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// The kernel's name.
    pub kernel: String,
    /// The scheduler that produced it, e.g. `default pointwise`.
    pub scheduler: String,
    /// The device, e.g. `cuda:0 (NVIDIA H100 80GB HBM3)`.
    pub device: String,
    /// Kernel time between the events around the launch, in milliseconds (0 when no
    /// kernel was launched: empty outputs or an empty grid).
    pub time_ms: f64,
    /// Logical bytes read: the input tensors' distinct elements times their sizes.
    pub bytes_read: u64,
    /// Logical bytes written: the outputs' elements times their sizes.
    pub bytes_written: u64,
    /// `(bytes_read + bytes_written) / time`, in GB/s (10^9 bytes per second).
    pub gb_per_s: f64,
    /// The device's theoretical peak DRAM bandwidth, in GB/s.
    pub peak_gb_per_s: f64,
    /// `gb_per_s` as a percentage of `peak_gb_per_s`.
    pub percent_of_peak: f64,
    /// Grid dims (x, y, z).
    pub grid: [u32; 3],
    /// Block dims (x, y, z).
    pub block: [u32; 3],
    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    pub registers_per_thread: u32,
}

impl KernelProfile {
    /// Fills in the derived fields (`gb_per_s`, `percent_of_peak`) from the measured ones.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kernel: String,
        scheduler: String,
        device: String,
        time_ms: f64,
        bytes: (u64, u64),
        peak_gb_per_s: f64,
        launch: ([u32; 3], [u32; 3]),
        registers_per_thread: u32,
    ) -> KernelProfile {
        let (bytes_read, bytes_written) = (bytes.0, bytes.1);
        let gb_per_s = if time_ms > 0.0 {
            (bytes_read + bytes_written) as f64 / (time_ms * 1e-3) / 1e9
        } else {
            0.0
        };
        let percent_of_peak = if peak_gb_per_s > 0.0 {
            100.0 * gb_per_s / peak_gb_per_s
        } else {
            0.0
        };
        KernelProfile {
            kernel,
            scheduler,
            device,
            time_ms,
            bytes_read,
            bytes_written,
            gb_per_s,
            peak_gb_per_s,
            percent_of_peak,
            grid: launch.0,
            block: launch.1,
            registers_per_thread,
        }
    }
}

impl fmt::Display for KernelProfile {
    /// One line: kernel, scheduler, time, bytes, bandwidth, launch config, registers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        write!(
            f,
            "{} [{}] on {}: {:.3} ms, {} read + {} written, {:.1} GB/s ({:.1}% of {:.0} GB/s peak), \
             grid ({gx}, {gy}, {gz}) block ({bx}, {by}, {bz}), {} regs/thread",
            self.kernel,
            self.scheduler,
            self.device,
            self.time_ms,
            human_bytes(self.bytes_read),
            human_bytes(self.bytes_written),
            self.gb_per_s,
            self.percent_of_peak,
            self.peak_gb_per_s,
            self.registers_per_thread,
        )
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Logical bytes of a tensor's distinct elements: a stride-0 (expanded) dim counts once.
pub fn distinct_bytes(t: &Tensor) -> u64 {
    if t.numel() == 0 {
        return 0;
    }
    let distinct: u64 = t
        .sizes()
        .iter()
        .zip(t.strides())
        .map(|(&n, &s)| if s == 0 { 1 } else { n as u64 })
        .product();
    distinct * t.dtype().size_bytes() as u64
}

/// Logical bytes read from the tensor arguments of a call.
pub fn bytes_read(args: &[Arg<'_>]) -> u64 {
    args.iter()
        .map(|a| match a {
            Arg::Tensor(t) => distinct_bytes(t),
            Arg::Scalar(_) => 0,
        })
        .sum()
}

/// Logical bytes written to outputs.
pub fn bytes_written(outputs: &[Tensor]) -> u64 {
    outputs
        .iter()
        .map(|t| t.numel() as u64 * t.dtype().size_bytes() as u64)
        .sum()
}

/// Registers per thread of a loaded kernel (`cuFuncGetAttribute`).
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub fn registers_per_thread(function: &CudaFunction) -> Result<u32, Error> {
    function
        .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)
        .map(|r| r.max(0) as u32)
        .map_err(|e| Error::driver("cuFuncGetAttribute", e))
}

/// Events and launch dims recorded by [`crate::launch`] around one launch.
#[cfg(feature = "cuda")]
#[derive(Default)]
pub(crate) struct LaunchTimer {
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    start: Option<CudaEvent>,
    end: Option<CudaEvent>,
}

#[cfg(feature = "cuda")]
impl LaunchTimer {
    fn record(device: &Device) -> Result<CudaEvent, Error> {
        let stream = device
            .cuda_stream()
            .ok_or(Error::NotAGpu { op: "profile" })?;
        stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| Error::driver("cuEventRecord", e))
    }

    /// Right before the launch.
    pub(crate) fn before(
        &mut self,
        device: &Device,
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<(), Error> {
        self.grid = grid;
        self.block = block;
        self.start = Some(Self::record(device)?);
        Ok(())
    }

    /// Right after the launch.
    pub(crate) fn after(&mut self, device: &Device) -> Result<(), Error> {
        self.end = Some(Self::record(device)?);
        Ok(())
    }

    /// Milliseconds between the events (waits for the end event); 0 when nothing was
    /// launched.
    pub(crate) fn elapsed_ms(&self) -> Result<f64, Error> {
        match (&self.start, &self.end) {
            (Some(start), Some(end)) => start
                .elapsed_ms(end)
                .map(f64::from)
                .map_err(|e| Error::driver("cuEventElapsedTime", e)),
            _ => Ok(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_fields_and_display() {
        let p = KernelProfile::new(
            "nvf_k".into(),
            "default pointwise".into(),
            "cuda:0 (H100)".into(),
            0.5,
            (8_000_000, 4_000_000),
            3000.0,
            ([100, 1, 1], [128, 1, 1]),
            16,
        );
        assert!((p.gb_per_s - 24.0).abs() < 1e-9, "{}", p.gb_per_s);
        assert!((p.percent_of_peak - 0.8).abs() < 1e-9);
        let line = p.to_string();
        assert!(!line.contains('\n'));
        for part in [
            "nvf_k [default pointwise]",
            "0.500 ms",
            "7.6 MiB read + 3.8 MiB written",
            "24.0 GB/s (0.8% of 3000 GB/s peak)",
            "grid (100, 1, 1) block (128, 1, 1)",
            "16 regs/thread",
        ] {
            assert!(line.contains(part), "{part:?} not in {line}");
        }
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<KernelProfile>(&json).unwrap(), p);
        let none = KernelProfile::new(
            "k".into(),
            "s".into(),
            "d".into(),
            0.0,
            (1, 1),
            0.0,
            ([0; 3], [0; 3]),
            0,
        );
        assert_eq!((none.gb_per_s, none.percent_of_peak), (0.0, 0.0));
    }

    #[test]
    fn expanded_inputs_count_each_distinct_element_once() {
        let cpu = crate::Device::cpu();
        let row = cpu.tensor_from_slice(&[1.0f32, 2.0, 3.0], [1, 3]).unwrap();
        let expanded = row.expand(&[1000, 3]).unwrap();
        assert_eq!(distinct_bytes(&row), 12);
        assert_eq!(distinct_bytes(&expanded), 12);
        let full = cpu.zeros(nvfuser_core::DataType::F64, [4, 5]).unwrap();
        assert_eq!(distinct_bytes(&full), 160);
        assert_eq!(
            bytes_read(&[(&expanded).into(), (&full).into(), 2.0f32.into()]),
            172
        );
        assert_eq!(bytes_written(&[full, expanded]), 160 + 12_000);
        let empty = cpu.zeros(nvfuser_core::DataType::F32, [0, 3]).unwrap();
        assert_eq!(distinct_bytes(&empty), 0);
    }
}
