//! The kernel ABI: the one description of a kernel's parameters.
//!
//! The CUDA signature ([`KernelAbi::signature`]) and the launch-argument bytes
//! ([`KernelAbi::pack`]) are both derived from [`KernelAbi::params`], so the two cannot
//! drift apart. Each tensor is two parameters: a `__restrict__` data pointer and a
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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dtype::{DataType, ScalarValue};
use crate::ir::ValId;
use crate::sched::{SchedResult, ScheduleError};

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
        }
    }
}

impl KernelAbi {
    /// The kernel's CUDA signature (`extern "C" __global__ void name(...)`).
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| format!("    {}", p.cuda_decl()))
            .collect();
        format!(
            "extern \"C\" __global__ void {}(\n{})",
            self.name,
            params.join(",\n")
        )
    }

    /// The work buffers the launcher must allocate, in parameter order.
    pub fn work_buffers(&self) -> Vec<WorkBuffer> {
        self.params
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match &p.kind {
                ParamKind::WorkBuffer { kind, elements, .. } => Some(WorkBuffer {
                    name: p.name.clone(),
                    param: i,
                    kind: *kind,
                    elements: elements.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The argument bytes for each parameter, in order, checked against the ABI: every
    /// tensor and scalar must be bound, ranks must match, sizes must fit the index type
    /// and scalars must have the parameter's category. A kernel with work buffers needs
    /// [`KernelAbi::pack_with_buffers`].
    pub fn pack(&self, args: &BTreeMap<ValId, KernelArg>) -> SchedResult<Vec<Vec<u8>>> {
        self.pack_with_buffers(args, &[])
    }

    /// [`KernelAbi::pack`] for a kernel with work buffers: `buffers` holds the device
    /// address of each of [`KernelAbi::work_buffers`], in that order.
    pub fn pack_with_buffers(
        &self,
        args: &BTreeMap<ValId, KernelArg>,
        buffers: &[u64],
    ) -> SchedResult<Vec<Vec<u8>>> {
        let bad = |m: String| ScheduleError::Unsupported(format!("launch arguments: {m}"));
        let needed = self.work_buffers().len();
        if buffers.len() != needed {
            return Err(bad(format!(
                "the kernel has {needed} work buffers (KernelAbi::work_buffers), {} addresses given",
                buffers.len()
            )));
        }
        let mut next_buffer = buffers.iter();
        let mut out = Vec::with_capacity(self.params.len());
        for p in &self.params {
            let id = match &p.kind {
                ParamKind::TensorData { tensor, .. } | ParamKind::TensorShape { tensor, .. } => {
                    *tensor
                }
                ParamKind::Scalar { val, .. } => *val,
                ParamKind::WorkBuffer { .. } => {
                    let ptr = next_buffer.next().copied().unwrap_or(0);
                    if ptr == 0 {
                        return Err(bad(format!("{}: a null work buffer", p.name)));
                    }
                    out.push(ptr.to_le_bytes().to_vec());
                    continue;
                }
            };
            let arg = args
                .get(&id)
                .ok_or_else(|| bad(format!("{} (for {}) is not bound", p.name, id)))?;
            let bytes = match (&p.kind, arg) {
                (ParamKind::TensorData { .. }, KernelArg::Tensor { ptr, .. }) => {
                    ptr.to_le_bytes().to_vec()
                }
                (ParamKind::TensorShape { rank, .. }, KernelArg::Tensor { sizes, strides, .. }) => {
                    if sizes.len() != *rank || strides.len() != *rank {
                        return Err(bad(format!(
                            "{}: expected rank {rank}, found {} sizes and {} strides",
                            p.name,
                            sizes.len(),
                            strides.len()
                        )));
                    }
                    let n = (*rank).max(1);
                    let mut b = Vec::with_capacity(2 * n * self.index_type.bytes());
                    for list in [sizes, strides] {
                        for k in 0..n {
                            let v = list.get(k).copied().unwrap_or(0);
                            match self.index_type {
                                IndexType::I32 => {
                                    let v = i32::try_from(v).map_err(|_| {
                                        bad(format!(
                                            "{}: {v} does not fit the kernel's 32-bit index type",
                                            p.name
                                        ))
                                    })?;
                                    b.extend_from_slice(&v.to_le_bytes());
                                }
                                IndexType::I64 => b.extend_from_slice(&v.to_le_bytes()),
                            }
                        }
                    }
                    b
                }
                (ParamKind::Scalar { dtype, .. }, KernelArg::Scalar(v)) => scalar_bytes(*dtype, *v)
                    .ok_or_else(|| {
                        bad(format!("{}: expected a {dtype} scalar, found {v}", p.name))
                    })?,
                _ => {
                    return Err(bad(format!(
                        "{}: tensor/scalar kind does not match",
                        p.name
                    )))
                }
            };
            out.push(bytes);
        }
        Ok(out)
    }
}

fn scalar_bytes(d: DataType, v: ScalarValue) -> Option<Vec<u8>> {
    let float = matches!(v, ScalarValue::Float(_));
    Some(match d {
        DataType::Bool => vec![matches!(v, ScalarValue::Bool(true)) as u8],
        DataType::I32 if !float => (v.as_i64()? as i32).to_le_bytes().to_vec(),
        DataType::I64 if !float => v.as_i64()?.to_le_bytes().to_vec(),
        DataType::F32 => (v.as_f64() as f32).to_le_bytes().to_vec(),
        DataType::F64 => v.as_f64().to_le_bytes().to_vec(),
        DataType::F16 => half::f16::from_f64(v.as_f64())
            .to_bits()
            .to_le_bytes()
            .to_vec(),
        DataType::BF16 => half::bf16::from_f64(v.as_f64())
            .to_bits()
            .to_le_bytes()
            .to_vec(),
        _ => return None,
    })
}
