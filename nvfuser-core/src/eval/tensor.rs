//! [`HostTensor`]: a typed n-d array on the host, the evaluator's value type.

use std::fmt;

use half::{bf16, f16};

use crate::fp8::{f8e4m3, f8e5m2};
use ndarray::{ArrayD, IxDyn};

use crate::dtype::round_to;
use crate::dtype::{Category, DataType, ScalarValue};
use crate::error::{Error, Result};

/// The most bytes of storage one host tensor may take, 2^38 (256 GiB: 2^35 elements in
/// the 8-byte storage of floats and integers). Larger shapes are errors, not aborts.
pub const MAX_HOST_BYTES: usize = 1 << 38;

/// Checks that a tensor of `shape` can be allocated: its element count fits `usize`
/// (and so `ndarray`'s `isize` limit), its storage (at most 8 bytes an element) is at
/// most [`MAX_HOST_BYTES`], and the allocator grants that much memory now (a fallible
/// `try_reserve_exact` probe, released at once). Returns the element count.
pub(crate) fn check_alloc(op: &str, shape: &[usize]) -> Result<usize> {
    let limit = || format!("{MAX_HOST_BYTES} bytes (2^38) of host storage");
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| Error::SizeLimit {
            op: op.into(),
            what: format!("element count of shape {shape:?}"),
            limit: limit(),
            found: "a product that overflows usize".into(),
        })?;
    let bytes = numel.saturating_mul(8);
    if bytes > MAX_HOST_BYTES {
        return Err(Error::SizeLimit {
            op: op.into(),
            what: format!("storage of shape {shape:?} ({numel} elements)"),
            limit: limit(),
            found: format!("{bytes} bytes"),
        });
    }
    let mut probe: Vec<u64> = Vec::new();
    probe
        .try_reserve_exact(numel)
        .map_err(|e| Error::SizeLimit {
            op: op.into(),
            what: format!("storage of shape {shape:?} ({numel} elements)"),
            limit: "what the allocator grants".into(),
            found: format!("{bytes} bytes refused ({e})"),
        })?;
    Ok(numel)
}

/// The elements of a [`HostTensor`], in one of three storage kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// Every float type (f16, bf16, f32, f64, f8e4m3, f8e5m2), held in f64.
    Float(ArrayD<f64>),
    /// i32 and i64, held in i64.
    Int(ArrayD<i64>),
    /// bool.
    Bool(ArrayD<bool>),
}

impl HostData {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            HostData::Float(a) => a.shape(),
            HostData::Int(a) => a.shape(),
            HostData::Bool(a) => a.shape(),
        }
    }

    /// The storage kind's name, for messages.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            HostData::Float(_) => "float",
            HostData::Int(_) => "integer",
            HostData::Bool(_) => "bool",
        }
    }
}

/// A dtype plus an n-d array of values.
///
/// Invariant of every tensor this module hands out: float values are representable in
/// the tensor's dtype (an f16 tensor holds only f16 values, widened to f64), i32 values
/// are within i32 range, and the storage kind matches the dtype's category. (Inside
/// [`evaluate`](super::evaluate) intermediate float values are held unrounded; they are
/// rounded at casts and fusion outputs.)
///
/// Equality (`==`) compares dtype, shape and values exactly (so NaN != NaN); use
/// [`compare`](super::compare) for tolerances.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub(super) dtype: DataType,
    pub(super) data: HostData,
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust element type that maps to a [`DataType`]: `f32`, `f64`, `half::f16`,
/// `half::bf16`, [`f8e4m3`](crate::fp8::f8e4m3), [`f8e5m2`](crate::fp8::f8e5m2),
/// `i32`, `i64` and `bool`.
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The matching dtype.
    const DTYPE: DataType;
    /// Builds storage from row-major values.
    #[doc(hidden)]
    fn store(values: Vec<Self>, shape: &[usize]) -> Result<HostData>;
    /// Reads one stored value back (the caller checks the dtype).
    #[doc(hidden)]
    fn load(data: &HostData) -> Vec<Self>;
    /// The value as a [`ScalarValue`].
    fn to_scalar(self) -> ScalarValue;
}

fn shape_error(op: &str, shape: &[usize], len: usize) -> Error {
    let numel: Option<usize> = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    Error::shape(
        op,
        format!(
            "{} values for shape {shape:?}",
            numel.map_or("an addressable number of".to_string(), |n| n.to_string())
        ),
        format!("{len} values"),
    )
}

fn array<T>(values: Vec<T>, shape: &[usize]) -> Result<ArrayD<T>> {
    let len = values.len();
    ArrayD::from_shape_vec(IxDyn(shape), values).map_err(|_| shape_error("HostTensor", shape, len))
}

macro_rules! float_element {
    ($t:ty, $dt:ident, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            fn store(values: Vec<Self>, shape: &[usize]) -> Result<HostData> {
                let to: fn($t) -> f64 = $to;
                Ok(HostData::Float(array(
                    values.into_iter().map(to).collect(),
                    shape,
                )?))
            }
            fn load(data: &HostData) -> Vec<Self> {
                let from: fn(f64) -> $t = $from;
                match data {
                    HostData::Float(a) => a.iter().map(|&v| from(v)).collect(),
                    HostData::Int(a) => a.iter().map(|&v| from(v as f64)).collect(),
                    HostData::Bool(a) => a.iter().map(|&v| from(v as u8 as f64)).collect(),
                }
            }
            fn to_scalar(self) -> ScalarValue {
                let to: fn($t) -> f64 = $to;
                ScalarValue::Float(to(self))
            }
        }
    };
}

float_element!(f64, F64, |v| v, |v| v);
float_element!(f32, F32, |v| v as f64, |v| v as f32);
float_element!(f16, F16, |v| v.to_f64(), f16::from_f64);
float_element!(bf16, BF16, |v| v.to_f64(), bf16::from_f64);
float_element!(f8e4m3, F8E4M3, |v| v.to_f64(), f8e4m3::from_f64);
float_element!(f8e5m2, F8E5M2, |v| v.to_f64(), f8e5m2::from_f64);

macro_rules! int_element {
    ($t:ty, $dt:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            fn store(values: Vec<Self>, shape: &[usize]) -> Result<HostData> {
                Ok(HostData::Int(array(
                    values.into_iter().map(|v| v as i64).collect(),
                    shape,
                )?))
            }
            fn load(data: &HostData) -> Vec<Self> {
                match data {
                    HostData::Int(a) => a.iter().map(|&v| v as $t).collect(),
                    HostData::Float(a) => a.iter().map(|&v| v as $t).collect(),
                    HostData::Bool(a) => a.iter().map(|&v| v as $t).collect(),
                }
            }
            fn to_scalar(self) -> ScalarValue {
                ScalarValue::Int(self as i64)
            }
        }
    };
}

int_element!(i32, I32);
int_element!(i64, I64);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DataType = DataType::Bool;
    fn store(values: Vec<Self>, shape: &[usize]) -> Result<HostData> {
        Ok(HostData::Bool(array(values, shape)?))
    }
    fn load(data: &HostData) -> Vec<Self> {
        match data {
            HostData::Bool(a) => a.iter().copied().collect(),
            HostData::Int(a) => a.iter().map(|&v| v != 0).collect(),
            HostData::Float(a) => a.iter().map(|&v| v != 0.0).collect(),
        }
    }
    fn to_scalar(self) -> ScalarValue {
        ScalarValue::Bool(self)
    }
}

/// The storage category a dtype needs.
fn storage_matches(dtype: DataType, data: &HostData) -> bool {
    matches!(
        (dtype.category(), data),
        (Category::Floating, HostData::Float(_))
            | (Category::Integer, HostData::Int(_))
            | (Category::Bool, HostData::Bool(_))
    )
}

impl HostTensor {
    /// Internal constructor: no checks, no rounding (the evaluator's intermediates).
    pub(crate) fn raw(dtype: DataType, data: HostData) -> Self {
        debug_assert!(storage_matches(dtype, &data));
        HostTensor { dtype, data }
    }

    /// A tensor from row-major values and a shape (`values.len()` must equal the
    /// product of `shape`).
    /// The storage is checked as [`full`](Self::full)'s.
    pub fn from_vec<T: Element>(values: Vec<T>, shape: &[usize]) -> Result<Self> {
        check_alloc("HostTensor::from_vec", shape)?;
        Ok(HostTensor {
            dtype: T::DTYPE,
            data: T::store(values, shape)?,
        })
    }

    /// A tensor from a row-major slice and a shape.
    pub fn from_slice<T: Element>(values: &[T], shape: &[usize]) -> Result<Self> {
        Self::from_vec(values.to_vec(), shape)
    }

    /// A tensor viewing `data` with `sizes`, `strides` (in elements, any sign; 0 for an
    /// expanded dim) and `offset` (element `idx` is `data[offset + Σ idx[d] * strides[d]]`).
    /// The values are copied into a new row-major tensor. Every addressed element must
    /// lie inside `data`.
    pub fn from_strided<T: Element>(
        data: &[T],
        sizes: &[usize],
        strides: &[i64],
        offset: usize,
    ) -> Result<Self> {
        let op = "HostTensor::from_strided";
        if sizes.len() != strides.len() {
            return Err(Error::arity(
                op,
                "strides (one per size)",
                sizes.len(),
                strides.len(),
            ));
        }
        let numel = sizes
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b))
            .ok_or_else(|| Error::invalid(op, format!("sizes {sizes:?} overflow")))?;
        if numel == 0 {
            return Self::from_vec(Vec::<T>::new(), sizes);
        }
        // The lowest and highest addressed offsets.
        let (mut lo, mut hi) = (offset as i128, offset as i128);
        for (&n, &s) in sizes.iter().zip(strides) {
            let span = (n as i128 - 1) * s as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        if lo < 0 || hi >= data.len() as i128 {
            return Err(Error::invalid(
                op,
                format!(
                    "sizes {sizes:?}, strides {strides:?} and offset {offset} address elements {lo}..={hi}, \
                     expected within 0..{} (the data's length)",
                    data.len()
                ),
            ));
        }
        let rank = sizes.len();
        let mut out = Vec::with_capacity(numel);
        let mut idx = vec![0usize; rank];
        let mut pos = offset as i64;
        for _ in 0..numel {
            // In range by the bound check above.
            out.push(data[pos as usize]);
            // Odometer increment, innermost dim fastest.
            // Wrapping: a size-1 dim may carry any stride; the net change is exact.
            for d in (0..rank).rev() {
                idx[d] += 1;
                pos = pos.wrapping_add(strides[d]);
                if idx[d] < sizes[d] {
                    break;
                }
                pos = pos.wrapping_sub(strides[d].wrapping_mul(sizes[d] as i64));
                idx[d] = 0;
            }
        }
        Self::from_vec(out, sizes)
    }

    /// A 0-d tensor holding one value.
    pub fn scalar<T: Element>(value: T) -> Self {
        Self::full_unchecked(T::DTYPE, &[], value.to_scalar())
    }

    /// A tensor of `shape` filled with `value` converted to `dtype` as a cast would.
    /// A shape whose element count overflows, or whose storage exceeds
    /// [`MAX_HOST_BYTES`] or what the allocator grants, is an error
    /// ([`Error::SizeLimit`]) instead of a panic or an abort.
    pub fn full(dtype: DataType, shape: &[usize], value: impl Into<ScalarValue>) -> Result<Self> {
        check_alloc("HostTensor::full", shape)?;
        Ok(Self::full_unchecked(dtype, shape, value.into()))
    }

    /// [`full`](Self::full) for shapes known to be small (0-d scalars).
    fn full_unchecked(dtype: DataType, shape: &[usize], value: ScalarValue) -> Self {
        let data = match value {
            ScalarValue::Bool(b) => HostData::Bool(ArrayD::from_elem(IxDyn(shape), b)),
            ScalarValue::Int(i) => HostData::Int(ArrayD::from_elem(IxDyn(shape), i)),
            ScalarValue::Float(f) => HostData::Float(ArrayD::from_elem(IxDyn(shape), f)),
        };
        let dt = match value {
            ScalarValue::Bool(_) => DataType::Bool,
            ScalarValue::Int(_) => DataType::I64,
            ScalarValue::Float(_) => DataType::F64,
        };
        HostTensor { dtype: dt, data }.cast(dtype)
    }

    /// A tensor of zeros (`false` for bool); errors as [`full`](Self::full).
    pub fn zeros(dtype: DataType, shape: &[usize]) -> Result<Self> {
        Self::full(dtype, shape, ScalarValue::Int(0))
    }

    /// Deterministic test data from `seed`: floats uniform in [-2, 2] (rounded to the
    /// dtype), integers in -8..=8, bools of both values. A tensor of two or more elements
    /// never has all elements equal.
    ///
    /// # Panics
    ///
    /// If the shape is refused by [`full`](Self::full)'s checks: this helper is for tests
    /// and examples, not for sizes taken from user input.
    pub fn random(dtype: DataType, shape: &[usize], seed: u64) -> Self {
        let mut state = seed ^ 0x5851_f42d_4c95_7f2d;
        let mut next = move || {
            // SplitMix64.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        if let Err(e) = check_alloc("HostTensor::random", shape) {
            panic!("{e}");
        }
        let sh = IxDyn(shape);
        let data = match dtype.category() {
            Category::Floating => {
                let unit = |z: u64| (z >> 11) as f64 / (1u64 << 53) as f64;
                let mut v =
                    ArrayD::from_shape_simple_fn(sh, || round_to(-2.0 + 4.0 * unit(next()), dtype));
                if let Some(first) = all_equal(&v) {
                    if let Some(x) = v.iter_mut().nth(1) {
                        *x = round_to(
                            if first > 0.0 {
                                first - 1.0
                            } else {
                                first + 1.0
                            },
                            dtype,
                        );
                    }
                }
                HostData::Float(v)
            }
            Category::Integer => {
                let mut v = ArrayD::from_shape_simple_fn(sh, || (next() % 17) as i64 - 8);
                if let Some(first) = all_equal(&v) {
                    if let Some(x) = v.iter_mut().nth(1) {
                        *x = if first > 0 { first - 1 } else { first + 1 };
                    }
                }
                HostData::Int(v)
            }
            Category::Bool => {
                let mut v = ArrayD::from_shape_simple_fn(sh, || next() & 1 == 1);
                if let Some(first) = all_equal(&v) {
                    if let Some(x) = v.iter_mut().nth(1) {
                        *x = !first;
                    }
                }
                HostData::Bool(v)
            }
        };
        HostTensor { dtype, data }
    }

    /// A tensor from storage. Float values are rounded to `dtype`; i32 values must be in
    /// range; the storage kind must match the dtype's category.
    pub fn from_data(dtype: DataType, data: HostData) -> Result<Self> {
        if !storage_matches(dtype, &data) {
            return Err(Error::dtype(
                "HostTensor::from_data",
                format!("{} storage for {dtype}", dtype_storage_name(dtype)),
                format!("{} storage", data.kind_name()),
            ));
        }
        let data = match data {
            HostData::Float(mut a) => {
                round_array(&mut a, dtype);
                HostData::Float(a)
            }
            HostData::Int(a) => {
                if dtype == DataType::I32 {
                    if let Some(v) = a.iter().find(|&&v| v != v as i32 as i64) {
                        return Err(Error::invalid(
                            "HostTensor::from_data",
                            format!("value {v} is out of range for i32"),
                        ));
                    }
                }
                HostData::Int(a)
            }
            b => b,
        };
        Ok(HostTensor { dtype, data })
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The sizes.
    pub fn shape(&self) -> &[usize] {
        self.data.shape()
    }

    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// The storage.
    pub fn data(&self) -> &HostData {
        &self.data
    }

    /// Takes the storage out.
    pub fn into_data(self) -> HostData {
        self.data
    }

    /// The values in row-major order as `T`, which must be the tensor's own element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::dtype(
                "HostTensor::to_vec",
                format!("{} (the tensor's type)", self.dtype),
                T::DTYPE,
            ));
        }
        Ok(T::load(&self.data))
    }

    /// The values in row-major order as f64 (bool as 0 or 1; i64 beyond 2^53 rounds).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            HostData::Float(a) => a.iter().copied().collect(),
            HostData::Int(a) => a.iter().map(|&v| v as f64).collect(),
            HostData::Bool(a) => a.iter().map(|&v| v as u8 as f64).collect(),
        }
    }

    /// One element as a [`ScalarValue`].
    pub fn get(&self, index: &[usize]) -> Result<ScalarValue> {
        let out_of_range = || {
            Error::invalid(
                "HostTensor::get",
                format!(
                    "index {index:?} is out of range for shape {:?}",
                    self.shape()
                ),
            )
        };
        if index.len() != self.rank() {
            return Err(out_of_range());
        }
        let ix = IxDyn(index);
        Ok(match &self.data {
            HostData::Float(a) => ScalarValue::Float(*a.get(ix).ok_or_else(out_of_range)?),
            HostData::Int(a) => ScalarValue::Int(*a.get(ix).ok_or_else(out_of_range)?),
            HostData::Bool(a) => ScalarValue::Bool(*a.get(ix).ok_or_else(out_of_range)?),
        })
    }

    /// One element as f64 (bool as 0 or 1).
    pub fn get_f64(&self, index: &[usize]) -> Result<f64> {
        Ok(self.get(index)?.as_f64())
    }

    /// The value of a one-element tensor as a [`ScalarValue`], typed like the tensor.
    pub(crate) fn item(&self) -> Option<ScalarValue> {
        if self.numel() != 1 {
            return None;
        }
        Some(match &self.data {
            HostData::Float(a) => ScalarValue::Float(*a.iter().next()?),
            HostData::Int(a) => ScalarValue::Int(*a.iter().next()?),
            HostData::Bool(a) => ScalarValue::Bool(*a.iter().next()?),
        })
    }

    /// Rounds float values to the dtype (the evaluator's outputs).
    pub(crate) fn into_rounded(self) -> Self {
        match self.data {
            HostData::Float(mut a) => {
                round_array(&mut a, self.dtype);
                HostTensor {
                    dtype: self.dtype,
                    data: HostData::Float(a),
                }
            }
            _ => self,
        }
    }

    /// A 0-d tensor of `dtype` from a scalar, converted as a cast would.
    pub(crate) fn from_scalar_value(value: ScalarValue, dtype: DataType) -> Self {
        Self::full_unchecked(dtype, &[], value)
    }
}

fn dtype_storage_name(d: DataType) -> &'static str {
    match d.category() {
        Category::Floating => "float",
        Category::Integer => "integer",
        Category::Bool => "bool",
    }
}

impl fmt::Display for HostTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?} ", self.dtype, self.shape())?;
        match &self.data {
            HostData::Float(a) => write!(f, "{a}"),
            HostData::Int(a) => write!(f, "{a}"),
            HostData::Bool(a) => write!(f, "{a}"),
        }
    }
}

/// The common value when an array of two or more elements has all elements equal.
fn all_equal<T: Copy + PartialEq>(a: &ArrayD<T>) -> Option<T> {
    let mut it = a.iter();
    let first = *it.next()?;
    let mut count = 1;
    for &x in it {
        if x != first {
            return None;
        }
        count += 1;
    }
    (count >= 2).then_some(first)
}

/// Rounds every element to `dtype` (no-op for f64).
pub(crate) fn round_array(a: &mut ArrayD<f64>, dtype: DataType) {
    if dtype == DataType::F32 || dtype.is_narrow_float() {
        a.mapv_inplace(|v| round_to(v, dtype));
    }
}
