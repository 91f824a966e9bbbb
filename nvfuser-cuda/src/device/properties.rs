//! [`DeviceProperties`]: the GPU limits that schedulers and heuristics read.
//!
//! Every number comes from the driver (`cuDeviceGetAttribute` through cudarc) when a
//! [`Device`](super::Device) is opened; nothing is assumed from the GPU's name. The struct
//! is plain serde data so that heuristics can be computed, tested and tuned for a device
//! that is not present: [`DeviceProperties::h100_sxm_for_tests`] is such a fixture, for
//! tests on machines without a GPU, and a real device's properties can be saved as JSON
//! and loaded elsewhere.

use nvfuser_core::scheduler::GpuModel;
use serde::{Deserialize, Serialize};

#[cfg(feature = "cuda")]
use cudarc::driver::sys::CUdevice_attribute as Attr;
#[cfg(feature = "cuda")]
use cudarc::driver::CudaContext;

#[cfg(feature = "cuda")]
use crate::error::Error;
use crate::nvrtc::GpuArch;

/// What a GPU offers, read from the driver.
///
/// Sizes are in bytes, clocks in kHz (as the driver reports them). The struct is
/// `non_exhaustive`: fields will be added; build one with [`DeviceProperties::h100_sxm_for_tests`]
/// or from JSON, then change fields as needed.
///
/// ```
/// use nvfuser_cuda::DeviceProperties;
/// let mut props = DeviceProperties::h100_sxm_for_tests();
/// props.sm_count = 114; // heuristics tests can vary one limit at a time
/// assert_eq!(props.arch().to_string(), "sm_90");
/// assert!(props.peak_bandwidth_gb_per_s() > 3000.0);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeviceProperties {
    /// The GPU's marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// The major compute capability (9 for Hopper).
    pub compute_capability_major: u32,
    /// The minor compute capability.
    pub compute_capability_minor: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// The most threads one block may have.
    pub max_threads_per_block: u32,
    /// The most threads resident on one SM.
    pub max_threads_per_sm: u32,
    /// The most blocks resident on one SM.
    pub max_blocks_per_sm: u32,
    /// The largest block, per dimension (x, y, z).
    pub max_block_dim: [u32; 3],
    /// The largest grid, per dimension (x, y, z).
    pub max_grid_dim: [u32; 3],
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    /// Shared memory a block may use without opting in (48 KiB on every GPU so far).
    pub shared_memory_per_block: u32,
    /// Shared memory a block may use after opting in with
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub shared_memory_per_block_optin: u32,
    /// Shared memory of one SM, shared by its resident blocks.
    pub shared_memory_per_sm: u32,
    /// Shared memory the system reserves for each block (counts against the SM's).
    pub reserved_shared_memory_per_block: u32,
    /// L2 cache size.
    pub l2_cache_bytes: u32,
    /// Peak memory clock, in kHz.
    pub memory_clock_khz: u32,
    /// Global memory bus width, in bits.
    pub memory_bus_width_bits: u32,
    /// Peak SM clock, in kHz.
    pub sm_clock_khz: u32,
    /// Total global memory.
    pub total_memory_bytes: u64,
}

impl DeviceProperties {
    /// The architecture kernels are compiled for on this device.
    pub fn arch(&self) -> GpuArch {
        GpuArch::new(self.compute_capability_major, self.compute_capability_minor)
    }

    /// The theoretical peak DRAM bandwidth in bytes per second: two transfers per memory
    /// clock (double data rate) across the whole bus. Measured copy bandwidth is lower
    /// (about 90% on an H100); profiles report both.
    pub fn peak_bandwidth_bytes_per_s(&self) -> f64 {
        2.0 * f64::from(self.memory_clock_khz) * 1e3 * f64::from(self.memory_bus_width_bits) / 8.0
    }

    /// [`peak_bandwidth_bytes_per_s`](Self::peak_bandwidth_bytes_per_s) in GB/s (10^9).
    pub fn peak_bandwidth_gb_per_s(&self) -> f64 {
        self.peak_bandwidth_bytes_per_s() / 1e9
    }

    /// The most warps resident on one SM.
    pub fn max_warps_per_sm(&self) -> u32 {
        self.max_threads_per_sm / self.warp_size.max(1)
    }

    /// **Test fixture**: the H100 preset ([`DeviceProperties::preset`]), named as a
    /// fixture. Never use it to run kernels: a real [`Device`](super::Device) reads its
    /// own properties from the driver.
    pub fn h100_sxm_for_tests() -> Self {
        DeviceProperties {
            name: "NVIDIA H100 80GB HBM3 (test fixture)".to_owned(),
            ..DeviceProperties::preset(GpuModel::H100)
        }
    }

    /// The properties `model` has by its public specification
    /// ([`GpuModel::spec`]): plan, schedule, generate and compile (NVRTC needs no GPU,
    /// [`DeviceProperties::arch`]) for a GPU this machine does not have. The driver
    /// of a real device reports its own.
    pub fn preset(model: GpuModel) -> Self {
        let s = model.spec();
        let info = nvfuser_core::scheduler::DeviceInfo::preset(model);
        DeviceProperties {
            name: s.name.to_owned(),
            compute_capability_major: s.compute_capability.0,
            compute_capability_minor: s.compute_capability.1,
            sm_count: info.sm_count,
            warp_size: info.warp_size,
            max_threads_per_block: info.max_threads_per_block,
            max_threads_per_sm: info.max_threads_per_sm,
            max_blocks_per_sm: s.max_blocks_per_sm,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: info.max_grid_dim,
            registers_per_sm: info.registers_per_sm,
            registers_per_block: info.registers_per_sm,
            shared_memory_per_block: 48 * 1024,
            shared_memory_per_block_optin: info.shared_memory_per_block,
            shared_memory_per_sm: s.shared_memory_per_sm,
            reserved_shared_memory_per_block: 1024,
            l2_cache_bytes: info.l2_cache_bytes,
            memory_clock_khz: s.memory_clock_khz,
            memory_bus_width_bits: s.memory_bus_width_bits,
            sm_clock_khz: s.sm_clock_khz,
            total_memory_bytes: s.total_memory_bytes,
        }
    }

    /// Reads every property of the context's device from the driver.
    #[cfg(feature = "cuda")]
    pub(crate) fn query(ctx: &CudaContext) -> Result<Self, Error> {
        let attr = |a: Attr| -> Result<u32, Error> {
            let value = ctx.attribute(a).map_err(|e| Error::Driver {
                call: "cuDeviceGetAttribute",
                code: format!("{:?} for {a:?}", e.0),
            })?;
            u32::try_from(value).map_err(|_| Error::Driver {
                call: "cuDeviceGetAttribute",
                code: format!("a negative value {value} for {a:?}"),
            })
        };
        let name = ctx
            .name()
            .map_err(|e| Error::driver("cuDeviceGetName", e))?;
        let total_memory = ctx
            .total_mem()
            .map_err(|e| Error::driver("cuDeviceTotalMem", e))?;
        Ok(DeviceProperties {
            name,
            compute_capability_major: attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            compute_capability_minor: attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            warp_size: attr(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_blocks_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            max_block_dim: [
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            registers_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            registers_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            shared_memory_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_memory_per_block_optin: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            shared_memory_per_sm: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            )?,
            reserved_shared_memory_per_block: attr(
                Attr::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
            )?,
            l2_cache_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            memory_clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_width_bits: attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            sm_clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            total_memory_bytes: u64::try_from(total_memory).unwrap_or(u64::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h100_fixture_has_the_published_bandwidth() {
        let p = DeviceProperties::h100_sxm_for_tests();
        // 3.35 TB/s is NVIDIA's figure for the H100 SXM5.
        assert!(
            (p.peak_bandwidth_gb_per_s() - 3352.3).abs() < 1.0,
            "{}",
            p.peak_bandwidth_gb_per_s()
        );
        assert_eq!(p.max_warps_per_sm(), 64);
        assert_eq!(p.arch(), GpuArch::SM90);
        assert!(p.name.contains("test fixture"));
    }

    #[test]
    fn properties_round_trip_through_json() {
        let p = DeviceProperties::h100_sxm_for_tests();
        let json = serde_json::to_string_pretty(&p).unwrap();
        assert!(json.contains("\"sm_count\": 132"), "{json}");
        let back: DeviceProperties = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
    }
}
