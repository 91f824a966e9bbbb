//! The kernel ABI: the one description of a kernel's parameters.
//!
//! The CUDA signature ([`KernelAbi::signature`]) and the launch-argument bytes
//! ([`KernelAbi::pack_into`], and its allocating convenience [`KernelAbi::pack`]) are
//! both derived from [`KernelAbi::params`], so the two cannot drift apart. The launcher
//! packs into a [`PackedArgs`], whose inline storage holds typical argument lists, so a
//! cached launch packs its arguments without a heap allocation. Each tensor is two parameters: a `__restrict__` data pointer and a
//! shape struct `nvf_shape<N>` of `N` sizes followed by `N` strides (in elements), both
//! of the kernel's index type (a rank-0 tensor carries one unused size and stride).
//!
//! Grid (cross-block) reductions add *work buffers* after the tensors and scalars: per
//! grid-reduced tensor `T`, `T_work` (one partial result per block and thread slot, in
//! the reduction's type; need not be initialized) and `T_sem` (one `unsigned int`
//! arrival counter per group of blocks that reduce together; **must be zero** at the
//! first launch; the kernel leaves it zero again, so a buffer can be reused by later
//! launches of the same kernel as long as they do not run concurrently). The launcher
//! allocates them from [`KernelAbi::work_buffers`] and passes their addresses to
//! [`KernelAbi::pack_with_buffers`].
//!
//! A kernel with device-side checks (see [`super::checks`]) takes the *error buffer*
//! last: `unsigned long long* nvf_err`, [`super::checks::ERROR_WORDS`] words that must be
//! zero before the first launch; the parameter carries the kernel's check table, which
//! decodes what a failing thread wrote there. Its address is passed after the work
//! buffers' ([`KernelAbi::buffer_count`]).
//!
//! This file holds the parameter description and the signature; `pack` holds the
//! argument packing ([`PackedArgs`], [`ArgRef`] and the `pack*` methods).

mod pack;

use serde::{Deserialize, Serialize};

use crate::dtype::{DataType, ScalarValue};
use crate::ir::ValId;

pub use pack::{ArgRef, KernelParams, PackedArgs};

/// Width of the index type of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IndexType {
    /// `int`: every tensor has fewer than 2^31 elements.
    I32,
    /// `long long`.
    I64,
}

impl IndexType {
    /// The CUDA type.
    pub fn cuda(self) -> &'static str {
        match self {
            IndexType::I32 => "int",
            IndexType::I64 => "long long",
        }
    }

    /// Bytes per index.
    pub fn bytes(self) -> usize {
        match self {
            IndexType::I32 => 4,
            IndexType::I64 => 8,
        }
    }

    /// The narrowest index type for tensors of these element counts (32-bit unless one
    /// has 2^31 elements or more).
    pub fn for_numels(numels: impl IntoIterator<Item = u64>) -> IndexType {
        if numels.into_iter().any(|n| n >= (1u64 << 31)) {
            IndexType::I64
        } else {
            IndexType::I32
        }
    }
}

/// The CUDA spelling of an element type in generated code.
pub fn cuda_type(d: DataType) -> &'static str {
    match d {
        DataType::Bool => "bool",
        DataType::I32 => "int",
        DataType::I64 => "long long",
        DataType::F16 => "nvf_half",
        DataType::BF16 => "nvf_bfloat",
        DataType::F32 => "float",
        DataType::F64 => "double",
        DataType::F8E4M3 => "nvf_fp8_e4m3",
        DataType::F8E5M2 => "nvf_fp8_e5m2",
    }
}

/// What one kernel parameter is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamKind {
    /// A tensor's data pointer.
    TensorData {
        /// The fusion tensor.
        tensor: ValId,
        /// Element type.
        dtype: DataType,
        /// Read-only (a fusion input).
        input: bool,
    },
    /// A tensor's sizes and strides.
    TensorShape {
        /// The fusion tensor.
        tensor: ValId,
        /// Its rank.
        rank: usize,
    },
    /// A scalar input of the fusion.
    Scalar {
        /// The fusion scalar.
        val: ValId,
        /// Its type.
        dtype: DataType,
    },
    /// The error buffer of a kernel with device-side checks (see the module
    /// documentation and [`super::checks`]).
    ErrorFlag {
        /// The kernel's check sites, in the order of their codes.
        checks: Vec<super::checks::DeviceCheck>,
    },
    /// A work buffer of a grid reduction (see the module documentation).
    WorkBuffer {
        /// The reduction's output tensor.
        tensor: ValId,
        /// What it holds.
        kind: WorkKind,
        /// Number of elements.
        elements: crate::ir::Extent,
    },
}

/// What a work buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkKind {
    /// Partial results of a grid reduction, of this type.
    Partials(DataType),
    /// Arrival counters (`unsigned int`), zero before the first launch.
    Semaphore,
}

impl WorkKind {
    /// The CUDA element type.
    pub fn cuda(self) -> &'static str {
        match self {
            WorkKind::Partials(d) => cuda_type(d),
            WorkKind::Semaphore => "unsigned int",
        }
    }

    /// Bytes per element.
    pub fn elem_bytes(self) -> usize {
        match self {
            WorkKind::Partials(d) => d.size_bytes(),
            WorkKind::Semaphore => 4,
        }
    }

    /// Whether the launcher must zero the buffer before the first launch.
    pub fn zeroed(self) -> bool {
        matches!(self, WorkKind::Semaphore)
    }
}

/// A work buffer the launcher allocates (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkBuffer {
    /// Its parameter name (`T3_work`, `T3_sem`).
    pub name: String,
    /// Position of its parameter in [`KernelAbi::params`].
    pub param: usize,
    /// What it holds.
    pub kind: WorkKind,
    /// Number of elements, over the fusion's input sizes and scalars.
    pub elements: crate::ir::Extent,
}

impl WorkBuffer {
    /// Bytes to allocate for `elements` evaluated to `n`.
    pub fn bytes(&self, n: i64) -> usize {
        n.max(1) as usize * self.kind.elem_bytes()
    }
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// Its name in the CUDA source.
    pub name: String,
    /// What it is.
    pub kind: ParamKind,
}

/// A runtime value for the tensors and scalars of a launch.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelArg {
    /// A device tensor.
    Tensor {
        /// Device address of element 0.
        ptr: u64,
        /// Sizes.
        sizes: Vec<i64>,
        /// Strides in elements.
        strides: Vec<i64>,
    },
    /// A scalar.
    Scalar(ScalarValue),
}

/// The ordered parameter list of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAbi {
    /// The `extern "C"` entry point name.
    pub name: String,
    /// The index type of sizes, strides and index math.
    pub index_type: IndexType,
    /// Parameters in order.
    pub params: Vec<Param>,
}

impl Param {
    /// The parameter's declaration in the CUDA signature.
    pub fn cuda_decl(&self) -> String {
        match &self.kind {
            ParamKind::TensorData { dtype, input, .. } => format!(
                "{}{}* __restrict__ {}",
                if *input { "const " } else { "" },
                cuda_type(*dtype),
                self.name
            ),
            ParamKind::TensorShape { rank, .. } => format!("const nvf_shape<{rank}> {}", self.name),
            ParamKind::Scalar { dtype, .. } => format!("{} {}", cuda_type(*dtype), self.name),
            ParamKind::WorkBuffer { kind, .. } => {
                format!("{}* __restrict__ {}", kind.cuda(), self.name)
            }
            ParamKind::ErrorFlag { .. } => {
                format!("unsigned long long* __restrict__ {}", self.name)
            }
        }
    }
}

impl KernelAbi {
    /// The kernel's CUDA signature (`extern "C" __global__ void name(...)`).
    pub fn signature(&self) -> String {
        self.signature_bounded(None, None)
    }

    /// [`signature`](Self::signature) with `__launch_bounds__(threads)` when given: the
    /// compiler then keeps the registers per thread low enough for a block of that many
    /// threads to launch (spilling if it must) instead of a launch failing with
    /// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`; with `min_blocks` too, that many blocks
    /// fit on one SM at once (`__launch_bounds__(threads, min_blocks)`).
    pub fn signature_bounded(&self, threads: Option<i64>, min_blocks: Option<i64>) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| format!("    {}", p.cuda_decl()))
            .collect();
        let bounds = match (threads, min_blocks) {
            (Some(t), Some(b)) => format!("__launch_bounds__({t}, {b}) "),
            (Some(t), None) => format!("__launch_bounds__({t}) "),
            _ => String::new(),
        };
        format!(
            "extern \"C\" __global__ void {bounds}{}(\n{})",
            self.name,
            params.join(",\n")
        )
    }

    /// The check table of the kernel's error buffer; `None` for a kernel without
    /// device-side checks.
    pub fn error_checks(&self) -> Option<&[super::checks::DeviceCheck]> {
        self.params.iter().find_map(|p| match &p.kind {
            ParamKind::ErrorFlag { checks } => Some(&checks[..]),
            _ => None,
        })
    }

    /// How many device addresses [`KernelAbi::pack_into`] takes in `buffers`: one per
    /// work buffer, plus one for the error buffer of a kernel with device-side checks.
    pub fn buffer_count(&self) -> usize {
        self.work_buffer_refs().count() + self.error_checks().is_some() as usize
    }

    /// The work buffers the launcher must allocate, in parameter order.
    pub fn work_buffers(&self) -> Vec<WorkBuffer> {
        self.work_buffer_refs()
            .map(|w| WorkBuffer {
                name: w.name.to_owned(),
                param: w.param,
                kind: w.kind,
                elements: w.elements.clone(),
            })
            .collect()
    }

    /// [`KernelAbi::work_buffers`] without copying anything (the launcher's hot path).
    pub fn work_buffer_refs(&self) -> impl Iterator<Item = WorkBufferRef<'_>> + '_ {
        self.params
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match &p.kind {
                ParamKind::WorkBuffer { kind, elements, .. } => Some(WorkBufferRef {
                    name: &p.name,
                    param: i,
                    kind: *kind,
                    elements,
                }),
                _ => None,
            })
    }
}

/// A work buffer of [`KernelAbi::work_buffer_refs`], borrowed from the ABI.
#[derive(Clone, Copy, Debug)]
pub struct WorkBufferRef<'a> {
    /// Its parameter name (`T3_work`, `T3_sem`).
    pub name: &'a str,
    /// Position of its parameter in [`KernelAbi::params`].
    pub param: usize,
    /// What it holds.
    pub kind: WorkKind,
    /// Number of elements, over the fusion's input sizes and scalars.
    pub elements: &'a crate::ir::Extent,
}

impl WorkBufferRef<'_> {
    /// Bytes to allocate for `elements` evaluated to `n` (as [`WorkBuffer::bytes`]).
    pub fn bytes(&self, n: i64) -> usize {
        n.max(1) as usize * self.kind.elem_bytes()
    }
}
