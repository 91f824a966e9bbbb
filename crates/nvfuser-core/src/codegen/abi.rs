//! The kernel ABI: the one description of a kernel's parameters.
//!
//! The CUDA signature ([`KernelAbi::signature`]) and the launch-argument bytes
//! ([`KernelAbi::pack`]) are both derived from [`KernelAbi::params`], so the two cannot
//! drift apart. Each tensor is two parameters: a `__restrict__` data pointer and a
//! shape struct `nvf_shape<N>` of `N` sizes followed by `N` strides (in elements), both
//! of the kernel's index type (a rank-0 tensor carries one unused size and stride).

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

    /// The argument bytes for each parameter, in order, checked against the ABI: every
    /// tensor and scalar must be bound, ranks must match, sizes must fit the index type
    /// and scalars must have the parameter's category.
    pub fn pack(&self, args: &BTreeMap<ValId, KernelArg>) -> SchedResult<Vec<Vec<u8>>> {
        let bad = |m: String| ScheduleError::Unsupported(format!("launch arguments: {m}"));
        let mut out = Vec::with_capacity(self.params.len());
        for p in &self.params {
            let id = match &p.kind {
                ParamKind::TensorData { tensor, .. } | ParamKind::TensorShape { tensor, .. } => {
                    *tensor
                }
                ParamKind::Scalar { val, .. } => *val,
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
