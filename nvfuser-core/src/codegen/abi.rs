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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

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

    /// The argument bytes for each parameter, in order, checked against the ABI: every
    /// tensor and scalar must be bound, ranks must match, sizes must fit the index type
    /// and scalars must have the parameter's category. A kernel with work buffers needs
    /// [`KernelAbi::pack_with_buffers`]. (A convenience over [`KernelAbi::pack_into`],
    /// which the launcher uses without allocating.)
    pub fn pack(&self, args: &BTreeMap<ValId, KernelArg>) -> SchedResult<Vec<Vec<u8>>> {
        self.pack_with_buffers(args, &[])
    }

    /// [`KernelAbi::pack`] for a kernel with work buffers or an error buffer: `buffers`
    /// holds the device address of each of [`KernelAbi::work_buffers`], in that order,
    /// then that of the error buffer (see [`KernelAbi::buffer_count`]).
    pub fn pack_with_buffers(
        &self,
        args: &BTreeMap<ValId, KernelArg>,
        buffers: &[u64],
    ) -> SchedResult<Vec<Vec<u8>>> {
        let bad = |m: String| ScheduleError::Unsupported(format!("launch arguments: {m}"));
        // Unsigned copies of the sizes and strides, so that they can be lent as `ArgRef`s.
        let mut dims: BTreeMap<ValId, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
        for (&id, arg) in args {
            if let KernelArg::Tensor { sizes, strides, .. } = arg {
                let unsigned = |list: &[i64]| -> SchedResult<Vec<usize>> {
                    list.iter()
                        .map(|&v| {
                            usize::try_from(v)
                                .map_err(|_| bad(format!("{id}: a negative size or stride ({v})")))
                        })
                        .collect()
                };
                dims.insert(id, (unsigned(sizes)?, unsigned(strides)?));
            }
        }
        let mut packed = PackedArgs::new();
        self.pack_into(
            |id| match args.get(&id)? {
                KernelArg::Tensor { ptr, .. } => {
                    let (sizes, strides) = dims.get(&id)?;
                    Some(ArgRef::Tensor {
                        ptr: *ptr,
                        sizes,
                        strides,
                    })
                }
                KernelArg::Scalar(v) => Some(ArgRef::Scalar(*v)),
            },
            buffers,
            &mut packed,
        )?;
        Ok(packed.to_vecs())
    }

    /// Packs the launch arguments into `out` (cleared first), one parameter after the
    /// other in [`KernelAbi::params`] order, with the same checks as [`KernelAbi::pack`].
    /// `arg` gives the runtime value of each fusion tensor and scalar the parameters
    /// name; `buffers` the device address of each work buffer, in order, then that of
    /// the error buffer when the kernel has one ([`KernelAbi::buffer_count`]). Nothing is
    /// allocated unless the arguments outgrow [`PackedArgs`]'s inline storage.
    pub fn pack_into<'a>(
        &self,
        arg: impl Fn(ValId) -> Option<ArgRef<'a>>,
        buffers: &[u64],
        out: &mut PackedArgs,
    ) -> SchedResult<()> {
        let bad = |m: String| ScheduleError::Unsupported(format!("launch arguments: {m}"));
        out.clear();
        let needed = self.buffer_count();
        if buffers.len() != needed {
            return Err(bad(format!(
                "the kernel has {needed} buffers (KernelAbi::buffer_count: work buffers, then the error buffer), {} addresses given",
                buffers.len()
            )));
        }
        let work = self.work_buffer_refs().count();
        let (work_addresses, error_address) = buffers.split_at(work);
        let mut next_buffer = work_addresses.iter();
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
                    out.begin_param();
                    out.put(&ptr.to_le_bytes());
                    continue;
                }
                ParamKind::ErrorFlag { .. } => {
                    let ptr = error_address.first().copied().unwrap_or(0);
                    if ptr == 0 {
                        return Err(bad(format!("{}: a null error buffer", p.name)));
                    }
                    out.begin_param();
                    out.put(&ptr.to_le_bytes());
                    continue;
                }
            };
            let value =
                arg(id).ok_or_else(|| bad(format!("{} (for {}) is not bound", p.name, id)))?;
            match (&p.kind, value) {
                (ParamKind::TensorData { .. }, ArgRef::Tensor { ptr, .. }) => {
                    out.begin_param();
                    out.put(&ptr.to_le_bytes());
                }
                (ParamKind::TensorShape { rank, .. }, ArgRef::Tensor { sizes, strides, .. }) => {
                    if sizes.len() != *rank || strides.len() != *rank {
                        return Err(bad(format!(
                            "{}: expected rank {rank}, found {} sizes and {} strides",
                            p.name,
                            sizes.len(),
                            strides.len()
                        )));
                    }
                    out.begin_param();
                    // A rank-0 tensor carries one unused size and stride.
                    let n = (*rank).max(1);
                    for list in [sizes, strides] {
                        for k in 0..n {
                            let v = list.get(k).copied().unwrap_or(0);
                            let fits = |_| {
                                bad(format!(
                                    "{}: {v} does not fit the kernel's {}-bit index type",
                                    p.name,
                                    8 * self.index_type.bytes()
                                ))
                            };
                            match self.index_type {
                                IndexType::I32 => {
                                    out.put(&i32::try_from(v).map_err(fits)?.to_le_bytes())
                                }
                                IndexType::I64 => {
                                    out.put(&i64::try_from(v).map_err(fits)?.to_le_bytes())
                                }
                            }
                        }
                    }
                }
                (ParamKind::Scalar { dtype, .. }, ArgRef::Scalar(v)) => {
                    out.begin_param();
                    if !put_scalar(out, *dtype, v) {
                        return Err(bad(format!(
                            "{}: expected a {dtype} scalar, found {v}",
                            p.name
                        )));
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "{}: tensor/scalar kind does not match",
                        p.name
                    )))
                }
            }
        }
        Ok(())
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

/// The runtime value of one fusion tensor or scalar for [`KernelAbi::pack_into`],
/// borrowed from the caller (no copies of sizes and strides).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgRef<'a> {
    /// A device tensor.
    Tensor {
        /// Device address of element 0.
        ptr: u64,
        /// Sizes.
        sizes: &'a [usize],
        /// Strides in elements.
        strides: &'a [usize],
    },
    /// A scalar.
    Scalar(ScalarValue),
}

/// Words of inline storage in [`PackedArgs`] (512 bytes: a dozen rank-4 tensors with
/// 32-bit indexing, or six with 64-bit indexing).
const INLINE_WORDS: usize = 64;
/// Parameters with inline offsets in [`PackedArgs`].
const INLINE_PARAMS: usize = 32;

/// Packed kernel arguments: every parameter's bytes, each starting at an 8-byte
/// boundary of one buffer, as `cuLaunchKernel` reads them through one pointer per
/// parameter. Inline storage covers typical kernels, so packing allocates nothing;
/// reuse one value across launches to keep a spilled buffer.
#[derive(Clone, Debug, Default)]
pub struct PackedArgs {
    words: SmallVec<[u64; INLINE_WORDS]>,
    /// Per parameter: byte offset into `words` and byte length.
    params: SmallVec<[(u32, u32); INLINE_PARAMS]>,
    /// Bytes used.
    len: usize,
}

impl PackedArgs {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every parameter, keeping the storage.
    pub fn clear(&mut self) {
        self.words.clear();
        self.params.clear();
        self.len = 0;
    }

    /// Number of packed parameters.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// True when nothing is packed.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// True when the arguments outgrew the inline storage (a heap allocation was made).
    pub fn spilled(&self) -> bool {
        self.words.spilled() || self.params.spilled()
    }

    /// The bytes of parameter `i`.
    pub fn param(&self, i: usize) -> Option<Vec<u8>> {
        let &(off, len) = self.params.get(i)?;
        let (off, len) = (off as usize, len as usize);
        Some(
            (off..off + len)
                .map(|b| self.words[b / 8].to_ne_bytes()[b % 8])
                .collect(),
        )
    }

    /// Every parameter's bytes (tests and tools; the launcher uses
    /// [`PackedArgs::kernel_params`]).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        (0..self.len()).filter_map(|i| self.param(i)).collect()
    }

    /// One pointer per parameter, to its bytes, in order: the `kernelParams` array of
    /// `cuLaunchKernel`. The pointers stay valid while the returned value lives (it
    /// borrows `self` mutably, so the buffer can neither move nor change meanwhile).
    pub fn kernel_params(&mut self) -> KernelParams<'_> {
        let base = self.words.as_mut_ptr().cast::<u8>();
        let pointers = self
            .params
            .iter()
            .map(|&(off, _)| base.wrapping_add(off as usize).cast::<std::ffi::c_void>())
            .collect();
        KernelParams {
            pointers,
            _buffer: std::marker::PhantomData,
        }
    }

    /// Starts a new parameter at the next 8-byte boundary.
    fn begin_param(&mut self) {
        self.len = self.len.next_multiple_of(8);
        self.params.push((self.len as u32, 0));
    }

    /// Appends bytes to the current parameter.
    fn put(&mut self, bytes: &[u8]) {
        for &b in bytes {
            let (w, k) = (self.len / 8, self.len % 8);
            if w == self.words.len() {
                self.words.push(0);
            }
            let mut word = self.words[w].to_ne_bytes();
            word[k] = b;
            self.words[w] = u64::from_ne_bytes(word);
            self.len += 1;
        }
        if let Some(last) = self.params.last_mut() {
            last.1 += bytes.len() as u32;
        }
    }
}

/// The `kernelParams` array of one launch, borrowing the [`PackedArgs`] it points into.
#[derive(Debug)]
pub struct KernelParams<'a> {
    pointers: SmallVec<[*mut std::ffi::c_void; INLINE_PARAMS]>,
    _buffer: std::marker::PhantomData<&'a mut PackedArgs>,
}

impl KernelParams<'_> {
    /// The pointers, one per parameter, for `cuLaunchKernel`.
    pub fn as_mut_slice(&mut self) -> &mut [*mut std::ffi::c_void] {
        &mut self.pointers
    }
}

/// Writes a scalar of parameter type `d`; false when `v` cannot be one (a float for an
/// integer parameter).
fn put_scalar(out: &mut PackedArgs, d: DataType, v: ScalarValue) -> bool {
    match scalar_bytes(d, v) {
        Some((bytes, n)) => {
            out.put(&bytes[..n]);
            true
        }
        None => false,
    }
}

/// The little-endian bytes of scalar `v` as parameter type `d` (in the first `n` of 8),
/// or `None` when `v` cannot be one (a float for an integer parameter).
fn scalar_bytes(d: DataType, v: ScalarValue) -> Option<([u8; 8], usize)> {
    let float = matches!(v, ScalarValue::Float(_));
    let mut b = [0u8; 8];
    let n = match d {
        DataType::Bool => {
            b[0] = matches!(v, ScalarValue::Bool(true)) as u8;
            1
        }
        DataType::I32 if !float => {
            b[..4].copy_from_slice(&(v.as_i64()? as i32).to_le_bytes());
            4
        }
        DataType::I64 if !float => {
            b.copy_from_slice(&v.as_i64()?.to_le_bytes());
            8
        }
        DataType::F32 => {
            b[..4].copy_from_slice(&(v.as_f64() as f32).to_le_bytes());
            4
        }
        DataType::F64 => {
            b.copy_from_slice(&v.as_f64().to_le_bytes());
            8
        }
        DataType::F16 => {
            b[..2].copy_from_slice(&half::f16::from_f64(v.as_f64()).to_bits().to_le_bytes());
            2
        }
        DataType::BF16 => {
            b[..2].copy_from_slice(&half::bf16::from_f64(v.as_f64()).to_bits().to_le_bytes());
            2
        }
        _ => return None,
    };
    Some((b, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{corpus, generate, KernelOptions};

    /// Binds every tensor parameter of `abi` to a made-up `[5, 3000]`-like layout of
    /// its rank, and every scalar to 1.
    fn bind(abi: &KernelAbi) -> BTreeMap<ValId, KernelArg> {
        let mut args = BTreeMap::new();
        for (i, p) in abi.params.iter().enumerate() {
            match &p.kind {
                ParamKind::TensorShape { tensor, rank } => {
                    let sizes: Vec<i64> = (0..*rank as i64).map(|d| 3 + d).collect();
                    let mut strides = vec![1i64; *rank];
                    for d in (0..rank.saturating_sub(1)).rev() {
                        strides[d] = strides[d + 1] * sizes[d + 1];
                    }
                    args.insert(
                        *tensor,
                        KernelArg::Tensor {
                            ptr: 0x1000 * (i as u64 + 1),
                            sizes,
                            strides,
                        },
                    );
                }
                ParamKind::Scalar { val, .. } => {
                    args.insert(*val, KernelArg::Scalar(ScalarValue::Int(1)));
                }
                _ => {}
            }
        }
        args
    }

    #[test]
    fn pack_into_matches_pack_and_stays_inline() {
        for (name, sf) in corpus::all().unwrap() {
            let k = generate(&sf, &KernelOptions::default()).unwrap();
            let args = bind(&k.abi);
            let buffers: Vec<u64> = (0..k.abi.buffer_count())
                .map(|i| 0x9000 + 0x100 * i as u64)
                .collect();
            let expected = k.abi.pack_with_buffers(&args, &buffers).unwrap();
            let dims: BTreeMap<ValId, (Vec<usize>, Vec<usize>)> = args
                .iter()
                .filter_map(|(&id, a)| match a {
                    KernelArg::Tensor { sizes, strides, .. } => Some((
                        id,
                        (
                            sizes.iter().map(|&v| v as usize).collect(),
                            strides.iter().map(|&v| v as usize).collect(),
                        ),
                    )),
                    KernelArg::Scalar(_) => None,
                })
                .collect();
            let mut packed = PackedArgs::new();
            k.abi
                .pack_into(
                    |id| match args.get(&id)? {
                        KernelArg::Tensor { ptr, .. } => Some(ArgRef::Tensor {
                            ptr: *ptr,
                            sizes: &dims[&id].0,
                            strides: &dims[&id].1,
                        }),
                        KernelArg::Scalar(v) => Some(ArgRef::Scalar(*v)),
                    },
                    &buffers,
                    &mut packed,
                )
                .unwrap();
            assert_eq!(packed.to_vecs(), expected, "{name}");
            assert_eq!(packed.len(), k.abi.params.len(), "{name}");
            assert!(!packed.spilled(), "{name}: packing allocated");
            let mut params = packed.kernel_params();
            let ptrs = params.as_mut_slice();
            assert_eq!(ptrs.len(), k.abi.params.len());
            for p in ptrs.iter() {
                assert_eq!(
                    *p as usize % 8,
                    0,
                    "{name}: parameters start 8-byte aligned"
                );
            }
            // Reading through the pointers gives the packed bytes.
            for (i, p) in ptrs.iter().enumerate() {
                let want = &expected[i];
                // SAFETY: each pointer points at `want.len()` initialized bytes of the
                // packed buffer, which `params` keeps borrowed.
                let got = unsafe { std::slice::from_raw_parts(*p as *const u8, want.len()) };
                assert_eq!(got, &want[..], "{name} param {i}");
            }
        }
    }

    #[test]
    fn scalars_pack_to_their_parameter_type() {
        let mut out = PackedArgs::new();
        for (d, v, bytes) in [
            (
                DataType::F32,
                ScalarValue::Float(1.5),
                1.5f32.to_le_bytes().to_vec(),
            ),
            (
                DataType::I64,
                ScalarValue::Int(-2),
                (-2i64).to_le_bytes().to_vec(),
            ),
            (
                DataType::I32,
                ScalarValue::Int(7),
                7i32.to_le_bytes().to_vec(),
            ),
            (DataType::Bool, ScalarValue::Bool(true), vec![1]),
            (
                DataType::BF16,
                ScalarValue::Float(1.0),
                half::bf16::ONE.to_bits().to_le_bytes().to_vec(),
            ),
        ] {
            out.clear();
            out.begin_param();
            assert!(put_scalar(&mut out, d, v));
            assert_eq!(out.param(0).unwrap(), bytes, "{d}");
        }
        out.begin_param();
        assert!(!put_scalar(
            &mut out,
            DataType::I64,
            ScalarValue::Float(1.5)
        ));
    }

    #[test]
    fn large_argument_lists_spill_but_stay_correct() {
        let mut out = PackedArgs::new();
        for i in 0..100u64 {
            out.begin_param();
            out.put(&i.to_le_bytes());
            out.put(&[i as u8; 3]);
        }
        assert!(out.spilled());
        for i in 0..100u64 {
            let mut want = i.to_le_bytes().to_vec();
            want.extend([i as u8; 3]);
            assert_eq!(out.param(i as usize).unwrap(), want);
        }
    }
}
