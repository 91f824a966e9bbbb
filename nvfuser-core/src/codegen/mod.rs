//! Lowering of a scheduled fusion to a kernel IR, and CUDA C++ code generation.
//!
//! Pipeline: [`crate::sched::validate`] → `lower` (loop nests from loop domains and
//! compute-at positions, index math from the recorded transforms, predicates,
//! allocations, reductions) → `cuda` (prints self-contained CUDA C++ with the
//! [`preamble`] runtime support). The kernel's parameters come from one
//! [`abi::KernelAbi`], which prints the signature and packs launch arguments.
//!
//! Architecture invariant: nothing here links or loads CUDA; the result is a string.
//! NVRTC compilation happens in `nvfuser-cuda`.

pub mod abi;
pub mod checks;
#[doc(hidden)]
pub mod corpus;
mod cuda;
pub mod index;
pub mod kir;
mod lower;
pub mod preamble;
pub mod sort_support;

use serde::{Deserialize, Serialize};

pub use abi::{IndexType, KernelAbi, KernelArg, Param, ParamKind, WorkBuffer, WorkKind};
pub use checks::{CheckKind, DeviceAssert, DeviceCheck};
pub use kir::{Requirement, Stmt};

use crate::ir::Extent;
use crate::sched::{SchedResult, ScheduledFusion};

/// Options of code generation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelOptions {
    /// Name of the `extern "C"` entry point.
    pub name: String,
    /// Index type; raised to 64-bit when a static shape needs it.
    pub index_type: IndexType,
    /// Blocks that must fit on one SM at once (the second argument of
    /// `__launch_bounds__`): a kernel that synchronizes its grid is launched with all
    /// its blocks resident, so its scheduler sizes the grid from this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_blocks_per_sm: Option<i64>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            name: "nvfuser_kernel".into(),
            index_type: IndexType::I32,
            min_blocks_per_sm: None,
        }
    }
}

/// Grid and block extents, as extents over the fusion's inputs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchDims {
    /// `gridDim.x/y/z`.
    pub grid: [Extent; 3],
    /// `blockDim.x/y/z`.
    pub block: [Extent; 3],
}

/// A generated kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Parameters (the signature and the argument packing both come from here).
    pub abi: KernelAbi,
    /// Launch dims.
    pub launch: LaunchDims,
    /// Conditions the launcher checks on the actual arguments.
    pub requirements: Vec<Requirement>,
    /// Static shared memory buffers: (name, dtype, elements).
    pub shared: Vec<(String, crate::dtype::DataType, i64)>,
    /// The kernel body.
    pub body: Vec<Stmt>,
    /// The data-dependent reads of its fusion, which the launcher checks on each call's
    /// arguments (empty for most kernels).
    pub reads: crate::ir::reads::ReadChecks,
    /// The kernel synchronizes its whole grid (`nvf_grid_sync`): it must be launched
    /// cooperatively, every block resident at once.
    pub grid_sync: bool,
    /// See [`KernelOptions::min_blocks_per_sm`].
    pub min_blocks_per_sm: Option<i64>,
    /// Bytes of dynamic shared memory each block gets at launch (a sort kernel's rows,
    /// [`sort_support`]); 0 for every other kernel. Above 48 KiB the launcher first
    /// raises the function's limit (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub dynamic_shared: u32,
}

impl Kernel {
    /// The complete CUDA C++ source.
    pub fn cuda_source(&self) -> String {
        cuda::print(self)
    }
}

/// Validates, lowers and returns the kernel for a scheduled fusion.
pub fn generate(sf: &ScheduledFusion, opts: &KernelOptions) -> SchedResult<Kernel> {
    // A block sort has no loop nests to validate: its lowering checks its one
    // expression itself.
    if let Some(layout) = sf.schedule().sort {
        return lower::sort::lower(sf, layout, opts);
    }
    sf.validate()?;
    lower::lower(sf, opts)
}
