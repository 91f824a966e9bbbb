//! GPUs described from their public specifications, for planning without one: the
//! heuristics, the schedule, the generated CUDA and the params of
//! `run_with_params` need only a [`DeviceInfo`], which [`DeviceInfo::preset`] gives
//! for each model here. Only the launch needs the GPU itself.
//!
//! The figures are the ones NVIDIA publishes for each product (SM count, L2 size,
//! memory clock and bus width) and the per-compute-capability limits of the CUDA
//! programming guide (threads and blocks per SM, registers, shared memory per block
//! after opting in). A real device reports its own through the driver; where the two
//! differ (a cut-down SKU, a clock set by the vendor), the driver is right.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::info::DeviceInfo;

/// A GPU model with a preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum GpuModel {
    /// NVIDIA H100 SXM5 80GB (HBM3), compute capability 9.0.
    H100,
    /// NVIDIA H200 SXM 141GB (HBM3e), compute capability 9.0.
    H200,
    /// NVIDIA A100 SXM4 80GB (HBM2e), compute capability 8.0.
    A100,
    /// NVIDIA L40S 48GB (GDDR6), compute capability 8.9.
    L40S,
    /// NVIDIA GeForce RTX 4090 24GB (GDDR6X), compute capability 8.9.
    Rtx4090,
    /// NVIDIA B200 (HBM3e), compute capability 10.0.
    B200,
}

/// Everything a preset knows about a model: what the driver would report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuSpec {
    /// The name the driver reports.
    pub name: &'static str,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Most resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Most resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Shared memory of one SM, bytes.
    pub shared_memory_per_sm: u32,
    /// Shared memory one block may use after opting in, bytes.
    pub shared_memory_per_block_optin: u32,
    /// L2 cache, bytes.
    pub l2_cache_bytes: u32,
    /// Peak memory clock, kHz.
    pub memory_clock_khz: u32,
    /// Memory bus width, bits.
    pub memory_bus_width_bits: u32,
    /// Boost SM clock, kHz.
    pub sm_clock_khz: u32,
    /// Device memory, bytes.
    pub total_memory_bytes: u64,
}

const MIB: u32 = 1 << 20;

impl GpuModel {
    /// Every model with a preset.
    pub const ALL: [GpuModel; 6] = [
        GpuModel::H100,
        GpuModel::H200,
        GpuModel::A100,
        GpuModel::L40S,
        GpuModel::Rtx4090,
        GpuModel::B200,
    ];

    /// Its public specification.
    pub const fn spec(self) -> GpuSpec {
        // Per compute capability (CUDA programming guide): 8.0 has 164 KiB of shared
        // memory per SM (163 per block) and 2048 threads; 8.9 has 100 KiB (99) and 1536
        // threads in 24 blocks; 9.0 and 10.0 have 228 KiB (227) and 2048 threads.
        match self {
            GpuModel::H100 => GpuSpec {
                name: "NVIDIA H100 80GB HBM3",
                compute_capability: (9, 0),
                sm_count: 132,
                max_threads_per_sm: 2048,
                max_blocks_per_sm: 32,
                shared_memory_per_sm: 228 * 1024,
                shared_memory_per_block_optin: 227 * 1024,
                l2_cache_bytes: 50 * MIB,
                memory_clock_khz: 2_619_000,
                memory_bus_width_bits: 5120,
                sm_clock_khz: 1_980_000,
                total_memory_bytes: 85_520_809_984,
            },
            GpuModel::H200 => GpuSpec {
                name: "NVIDIA H200",
                memory_clock_khz: 3_201_000,
                memory_bus_width_bits: 6144,
                total_memory_bytes: 150_754_820_096,
                ..GpuModel::H100.spec()
            },
            GpuModel::A100 => GpuSpec {
                name: "NVIDIA A100-SXM4-80GB",
                compute_capability: (8, 0),
                sm_count: 108,
                max_threads_per_sm: 2048,
                max_blocks_per_sm: 32,
                shared_memory_per_sm: 164 * 1024,
                shared_memory_per_block_optin: 163 * 1024,
                l2_cache_bytes: 40 * MIB,
                memory_clock_khz: 1_593_000,
                memory_bus_width_bits: 5120,
                sm_clock_khz: 1_410_000,
                total_memory_bytes: 85_198_045_184,
            },
            GpuModel::L40S => GpuSpec {
                name: "NVIDIA L40S",
                compute_capability: (8, 9),
                sm_count: 142,
                max_threads_per_sm: 1536,
                max_blocks_per_sm: 24,
                shared_memory_per_sm: 100 * 1024,
                shared_memory_per_block_optin: 99 * 1024,
                l2_cache_bytes: 96 * MIB,
                memory_clock_khz: 9_001_000,
                memory_bus_width_bits: 384,
                sm_clock_khz: 2_520_000,
                total_memory_bytes: 48_305_799_168,
            },
            GpuModel::Rtx4090 => GpuSpec {
                name: "NVIDIA GeForce RTX 4090",
                sm_count: 128,
                l2_cache_bytes: 72 * MIB,
                memory_clock_khz: 10_501_000,
                total_memory_bytes: 25_393_692_672,
                ..GpuModel::L40S.spec()
            },
            GpuModel::B200 => GpuSpec {
                name: "NVIDIA B200",
                compute_capability: (10, 0),
                sm_count: 148,
                l2_cache_bytes: 126 * MIB,
                memory_clock_khz: 3_996_000,
                memory_bus_width_bits: 8192,
                sm_clock_khz: 1_965_000,
                total_memory_bytes: 192_265_846_784,
                ..GpuModel::H100.spec()
            },
        }
    }

    /// Peak DRAM bandwidth from the memory clock and bus width (double data rate), GB/s.
    pub fn peak_bandwidth_gb_per_s(self) -> f64 {
        let s = self.spec();
        2.0 * f64::from(s.memory_clock_khz) * 1e3 * f64::from(s.memory_bus_width_bits) / 8.0 / 1e9
    }

    /// The short name [`FromStr`] accepts: `h100`, `h200`, `a100`, `l40s`, `rtx4090`,
    /// `b200`.
    pub const fn short_name(self) -> &'static str {
        match self {
            GpuModel::H100 => "h100",
            GpuModel::H200 => "h200",
            GpuModel::A100 => "a100",
            GpuModel::L40S => "l40s",
            GpuModel::Rtx4090 => "rtx4090",
            GpuModel::B200 => "b200",
        }
    }
}

impl fmt::Display for GpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec().name)
    }
}

/// A name that is not one of the presets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU preset {found:?}: expected one of h100, h200, a100, l40s, rtx4090, b200")]
pub struct UnknownGpu {
    /// What was given.
    pub found: String,
}

impl FromStr for GpuModel {
    type Err = UnknownGpu;

    /// Case-insensitive short names; `4090` and `rtx-4090` name the RTX 4090.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let key: String = s
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let key = key.strip_prefix("nvidia").unwrap_or(&key);
        let key = key.strip_prefix("geforce").unwrap_or(key);
        GpuModel::ALL
            .into_iter()
            .find(|m| m.short_name() == key || (*m == GpuModel::Rtx4090 && key == "4090"))
            .ok_or_else(|| UnknownGpu {
                found: s.to_string(),
            })
    }
}

impl DeviceInfo {
    /// The preset of `model` (see [`GpuModel`]): what the heuristics need to know
    /// about it.
    pub const fn preset(model: GpuModel) -> Self {
        let s = model.spec();
        DeviceInfo {
            sm_count: s.sm_count,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_threads_per_sm: s.max_threads_per_sm,
            registers_per_sm: 65_536,
            shared_memory_per_block: s.shared_memory_per_block_optin,
            l2_cache_bytes: s.l2_cache_bytes,
            max_grid_dim: [2_147_483_647, 65_535, 65_535],
        }
    }

    /// **Test fixture**: the H100 preset ([`GpuModel::H100`]: 132 SMs, 64K registers
    /// and 2048 threads per SM, 227 KiB of opt-in shared memory, 50 MiB of L2).
    pub fn h100_for_tests() -> Self {
        DeviceInfo::preset(GpuModel::H100)
    }

    /// **Test fixture**: the A100 preset ([`GpuModel::A100`]: 108 SMs, 163 KiB of
    /// opt-in shared memory, 40 MiB of L2).
    pub fn a100_for_tests() -> Self {
        DeviceInfo::preset(GpuModel::A100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_bandwidths_follow_from_clock_and_bus() {
        // NVIDIA's product pages, GB/s.
        let published = [
            (GpuModel::H100, 3350.0),
            (GpuModel::H200, 4800.0),
            (GpuModel::A100, 2039.0),
            (GpuModel::L40S, 864.0),
            (GpuModel::Rtx4090, 1008.0),
            (GpuModel::B200, 8000.0),
        ];
        for (model, gb) in published {
            let ours = model.peak_bandwidth_gb_per_s();
            assert!(
                (ours - gb).abs() / gb < 0.025,
                "{model}: {ours:.0} GB/s from clock and bus, {gb} published"
            );
        }
    }

    #[test]
    fn presets_keep_the_limits_of_their_compute_capability() {
        for model in GpuModel::ALL {
            let s = model.spec();
            let d = DeviceInfo::preset(model);
            assert!(
                d.shared_memory_per_block <= s.shared_memory_per_sm - 1024,
                "{model}"
            );
            assert_eq!(d.max_threads_per_sm, s.max_threads_per_sm);
            let expected_threads = if s.compute_capability == (8, 9) {
                1536
            } else {
                2048
            };
            assert_eq!(s.max_threads_per_sm, expected_threads, "{model}");
        }
        // The values the snapshot tests have always planned with (the test fixtures are
        // these presets now).
        let h100 = DeviceInfo::preset(GpuModel::H100);
        assert_eq!(
            (
                h100.sm_count,
                h100.shared_memory_per_block,
                h100.l2_cache_bytes
            ),
            (132, 232_448, 52_428_800)
        );
        let a100 = DeviceInfo::preset(GpuModel::A100);
        assert_eq!(
            (
                a100.sm_count,
                a100.shared_memory_per_block,
                a100.l2_cache_bytes
            ),
            (108, 166_912, 41_943_040)
        );
    }

    #[test]
    fn names_parse_forgivingly_and_refuse_the_unknown() {
        for model in GpuModel::ALL {
            assert_eq!(model.short_name().parse::<GpuModel>(), Ok(model));
            assert_eq!(
                model.short_name().to_uppercase().parse::<GpuModel>(),
                Ok(model)
            );
        }
        assert_eq!("RTX-4090".parse::<GpuModel>(), Ok(GpuModel::Rtx4090));
        assert_eq!("4090".parse::<GpuModel>(), Ok(GpuModel::Rtx4090));
        assert_eq!("NVIDIA L40S".parse::<GpuModel>(), Ok(GpuModel::L40S));
        let err = "v100".parse::<GpuModel>().unwrap_err();
        assert_eq!(err.found, "v100");
        assert!(err.to_string().contains("expected one of h100"), "{err}");
    }
}
