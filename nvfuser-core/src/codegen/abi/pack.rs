//! Packing launch arguments: [`KernelAbi::pack_into`] writes each parameter's bytes,
//! checked against the ABI, into a [`PackedArgs`] whose inline storage holds typical
//! argument lists (a cached launch packs without a heap allocation);
//! [`KernelAbi::pack`] and [`KernelAbi::pack_with_buffers`] are allocating conveniences
//! over it.

use std::collections::BTreeMap;

use super::{IndexType, KernelAbi, KernelArg, ParamKind};
use crate::dtype::{DataType, ScalarValue};
use crate::ir::ValId;
use crate::sched::{SchedResult, ScheduleError};
use smallvec::SmallVec;

impl KernelAbi {
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
                    let width = self.index_type.bytes();
                    let mut bytes = [0u8; 8 * 2 * 16];
                    let mut used = 0;
                    for list in [sizes, strides] {
                        for k in 0..n {
                            let v = list.get(k).copied().unwrap_or(0);
                            let fits = |_| {
                                bad(format!(
                                    "{}: {v} does not fit the kernel's {}-bit index type",
                                    p.name,
                                    8 * width
                                ))
                            };
                            let le: [u8; 8] = match self.index_type {
                                IndexType::I32 => {
                                    let x = i32::try_from(v).map_err(fits)?.to_le_bytes();
                                    [x[0], x[1], x[2], x[3], 0, 0, 0, 0]
                                }
                                IndexType::I64 => i64::try_from(v).map_err(fits)?.to_le_bytes(),
                            };
                            if used + width > bytes.len() {
                                out.put(&bytes[..used]);
                                used = 0;
                            }
                            bytes[used..used + width].copy_from_slice(&le[..width]);
                            used += width;
                        }
                    }
                    out.put(&bytes[..used]);
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

    /// Overwrites parameter `i`, a device address (8 bytes), with `address`; false when
    /// `i` is not an 8-byte parameter. A launcher that packed a call once patches the
    /// addresses of the next call with the same sizes into a copy.
    pub fn set_address(&mut self, i: usize, address: u64) -> bool {
        match self.params.get(i) {
            Some(&(off, 8)) => {
                // Parameters start at 8-byte boundaries (`begin_param`).
                self.words[off as usize / 8] = u64::from_ne_bytes(address.to_le_bytes());
                true
            }
            _ => false,
        }
    }

    /// Overwrites parameter `i`, a scalar of type `d`, with `v` (the bytes
    /// [`KernelAbi::pack_into`] would write); false when `v` cannot be a `d` or `i` is
    /// not a parameter of that size.
    pub fn set_scalar(&mut self, i: usize, d: DataType, v: ScalarValue) -> bool {
        let (Some(&(off, len)), Some((bytes, n))) = (self.params.get(i), scalar_bytes(d, v)) else {
            return false;
        };
        if len as usize != n {
            return false;
        }
        // The parameter starts at a word boundary and is at most 8 bytes: one word.
        let word = &mut self.words[off as usize / 8];
        let mut mem = word.to_ne_bytes();
        mem[..n].copy_from_slice(&bytes[..n]);
        *word = u64::from_ne_bytes(mem);
        true
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
        let end = self.len + bytes.len();
        let words = end.div_ceil(8);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        // SAFETY: a `u64` slice seen as its bytes: `u8` has no alignment or validity
        // requirement, the length is the slice's size in bytes, and the view ends before
        // `self.words` is used again.
        let view = unsafe {
            std::slice::from_raw_parts_mut(
                self.words.as_mut_ptr().cast::<u8>(),
                self.words.len() * 8,
            )
        };
        view[self.len..end].copy_from_slice(bytes);
        self.len = end;
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
        DataType::F8E4M3 => {
            b[0] = crate::fp8::f8e4m3::from_f64(v.as_f64()).to_bits();
            1
        }
        DataType::F8E5M2 => {
            b[0] = crate::fp8::f8e5m2::from_f64(v.as_f64()).to_bits();
            1
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

    /// Unsigned copies of the tensors' sizes and strides, to lend as `ArgRef`s.
    fn unsigned_dims(
        args: &BTreeMap<ValId, KernelArg>,
    ) -> BTreeMap<ValId, (Vec<usize>, Vec<usize>)> {
        let unsigned = |v: &[i64]| v.iter().map(|&x| x as usize).collect();
        args.iter()
            .filter_map(|(&id, a)| match a {
                KernelArg::Tensor { sizes, strides, .. } => {
                    Some((id, (unsigned(sizes), unsigned(strides))))
                }
                KernelArg::Scalar(_) => None,
            })
            .collect()
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
            let dims = unsigned_dims(&args);
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

    /// Patching a packed call's addresses and scalars gives the bytes a fresh packing
    /// of the new values gives, parameter by parameter, and a patch of the wrong kind
    /// of parameter is refused.
    #[test]
    fn patched_addresses_and_scalars_match_a_fresh_packing() {
        let mut tested = 0;
        for (name, sf) in corpus::all().unwrap() {
            let k = generate(&sf, &KernelOptions::default()).unwrap();
            let mut args = bind(&k.abi);
            let buffers: Vec<u64> = (0..k.abi.buffer_count())
                .map(|i| 0x9000 + 0x100 * i as u64)
                .collect();
            let first = k.abi.pack_with_buffers(&args, &buffers).unwrap();
            let mut packed = PackedArgs::new();
            let dims = unsigned_dims(&args);
            let bound = |args: &BTreeMap<ValId, KernelArg>, id: ValId| match args.get(&id)? {
                KernelArg::Tensor { ptr, .. } => Some(ArgRef::Tensor {
                    ptr: *ptr,
                    sizes: &dims[&id].0,
                    strides: &dims[&id].1,
                }),
                KernelArg::Scalar(v) => Some(ArgRef::Scalar(*v)),
            };
            k.abi
                .pack_into(|id| bound(&args, id), &buffers, &mut packed)
                .unwrap();
            assert_eq!(packed.to_vecs(), first, "{name}");
            // New addresses and scalar values, patched into a copy.
            let mut patched = packed.clone();
            for (i, p) in k.abi.params.iter().enumerate() {
                match &p.kind {
                    ParamKind::TensorData { tensor, .. } => {
                        let Some(KernelArg::Tensor { ptr, .. }) = args.get_mut(tensor) else {
                            panic!("{name}: unbound tensor");
                        };
                        *ptr += 0x40_0000;
                        assert!(patched.set_address(i, *ptr), "{name} param {i}");
                    }
                    ParamKind::Scalar { val, dtype } => {
                        let v = if dtype.is_float() {
                            ScalarValue::Float(-0.75)
                        } else {
                            ScalarValue::Int(7)
                        };
                        args.insert(*val, KernelArg::Scalar(v));
                        assert!(patched.set_scalar(i, *dtype, v), "{name} param {i}");
                        tested += 1;
                    }
                    ParamKind::TensorShape { rank, .. } if *rank > 1 => {
                        assert!(!patched.set_address(i, 1), "{name}: a shape is no address");
                    }
                    _ => {}
                }
            }
            let mut fresh = PackedArgs::new();
            k.abi
                .pack_into(|id| bound(&args, id), &buffers, &mut fresh)
                .unwrap();
            assert_eq!(patched.to_vecs(), fresh.to_vecs(), "{name}");
        }
        assert!(tested > 0, "some corpus kernel has a scalar parameter");
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
