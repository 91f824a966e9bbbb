//! [`Element`]: the Rust types a tensor can be built from and read back as.
//!
//! Tensors store elements as the GPU does: little-endian bytes in the dtype's own width
//! (bf16 as its 16 bits, fp8 as its byte, bool as one byte 0 or 1). Host and device buffers share that
//! layout, so uploads and downloads are plain byte copies and a value round-trips bit for
//! bit (NaN payloads included). This trait is the one place that maps a Rust type to its
//! [`DataType`] and to those bytes; it is sealed because the byte layout must match what
//! generated kernels read.

use half::{bf16, f16};
use nvfuser_core::fp8::{f8e4m3, f8e5m2};
use nvfuser_core::DataType;

mod sealed {
    pub trait Sealed {}
}

/// A Rust element type of a tensor: `f32`, `f64`, `half::f16`, `half::bf16`,
/// `nvfuser_core::f8e4m3`, `nvfuser_core::f8e5m2` (one byte: the format's bits), `i32`,
/// `i64` or `bool`.
///
/// ```
/// use nvfuser_cuda::Element;
/// use nvfuser_core::DataType;
/// assert_eq!(<half::bf16 as Element>::DTYPE, DataType::BF16);
/// assert_eq!(<bool as Element>::DTYPE, DataType::Bool);
/// ```
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The tensor dtype of this type.
    const DTYPE: DataType;

    /// Appends the little-endian bytes of `values` to `out`.
    #[doc(hidden)]
    fn encode(values: &[Self], out: &mut Vec<u8>);

    /// Reads values back from little-endian bytes; `bytes.len()` is a multiple of the
    /// dtype's size (the caller guarantees it).
    #[doc(hidden)]
    fn decode(bytes: &[u8]) -> Vec<Self>;
}

macro_rules! numeric_element {
    ($t:ty, $dtype:ident, $n:literal, $to_bits:expr, $from_bits:expr) => {
        impl sealed::Sealed for $t {}

        impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;

            fn encode(values: &[Self], out: &mut Vec<u8>) {
                let to_bits: fn($t) -> [u8; $n] = $to_bits;
                out.reserve(values.len() * $n);
                for &v in values {
                    out.extend_from_slice(&to_bits(v));
                }
            }

            fn decode(bytes: &[u8]) -> Vec<Self> {
                let from_bits: fn([u8; $n]) -> $t = $from_bits;
                bytes
                    .chunks_exact($n)
                    .map(|chunk| {
                        let mut raw = [0u8; $n];
                        raw.copy_from_slice(chunk);
                        from_bits(raw)
                    })
                    .collect()
            }
        }
    };
}

numeric_element!(f32, F32, 4, f32::to_le_bytes, f32::from_le_bytes);
numeric_element!(f64, F64, 8, f64::to_le_bytes, f64::from_le_bytes);
numeric_element!(i32, I32, 4, i32::to_le_bytes, i32::from_le_bytes);
numeric_element!(i64, I64, 8, i64::to_le_bytes, i64::from_le_bytes);
numeric_element!(f16, F16, 2, |v| v.to_bits().to_le_bytes(), |b| {
    f16::from_bits(u16::from_le_bytes(b))
});
numeric_element!(bf16, BF16, 2, |v| v.to_bits().to_le_bytes(), |b| {
    bf16::from_bits(u16::from_le_bytes(b))
});
numeric_element!(f8e4m3, F8E4M3, 1, |v| [v.to_bits()], |b| f8e4m3::from_bits(
    b[0]
));
numeric_element!(f8e5m2, F8E5M2, 1, |v| [v.to_bits()], |b| f8e5m2::from_bits(
    b[0]
));

impl sealed::Sealed for bool {}

impl Element for bool {
    const DTYPE: DataType = DataType::Bool;

    fn encode(values: &[Self], out: &mut Vec<u8>) {
        out.extend(values.iter().map(|&b| u8::from(b)));
    }

    /// Any nonzero byte reads as `true`, as a C++ `bool` load of such a byte would in
    /// practice; kernels only ever store 0 or 1.
    fn decode(bytes: &[u8]) -> Vec<Self> {
        bytes.iter().map(|&b| b != 0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Element + PartialEq + std::fmt::Debug>(values: &[T]) {
        let mut bytes = Vec::new();
        T::encode(values, &mut bytes);
        assert_eq!(bytes.len(), values.len() * T::DTYPE.size_bytes());
        assert_eq!(std::mem::size_of::<T>(), T::DTYPE.size_bytes());
        assert_eq!(T::decode(&bytes), values);
    }

    #[test]
    fn every_element_type_round_trips_through_bytes() {
        round_trip(&[0.0f32, -1.5, f32::INFINITY, f32::MIN_POSITIVE]);
        round_trip(&[0.0f64, -1.5, f64::MAX]);
        round_trip(&[0i32, -7, i32::MAX, i32::MIN]);
        round_trip(&[0i64, -7, i64::MAX]);
        round_trip(&[f16::from_f32(1.5), f16::MAX, f16::NEG_INFINITY]);
        round_trip(&[bf16::from_f32(-2.25), bf16::MIN_POSITIVE]);
        round_trip(&[true, false, true]);
        round_trip(&[f8e4m3::from_f32(448.0), f8e4m3::from_bits(0xff)]);
        round_trip(&[f8e5m2::from_f32(-57344.0), f8e5m2::from_bits(0x7d)]);
        round_trip::<f32>(&[]);
    }

    #[test]
    fn nan_payloads_survive() {
        let nan = f32::from_bits(0x7fc0_1234);
        let mut bytes = Vec::new();
        f32::encode(&[nan], &mut bytes);
        assert_eq!(f32::decode(&bytes)[0].to_bits(), 0x7fc0_1234);
    }

    #[test]
    fn the_byte_layout_is_little_endian() {
        let mut bytes = Vec::new();
        i32::encode(&[0x0102_0304], &mut bytes);
        assert_eq!(bytes, [4, 3, 2, 1]);
        bytes.clear();
        bf16::encode(&[bf16::from_bits(0xabcd)], &mut bytes);
        assert_eq!(bytes, [0xcd, 0xab]);
        assert_eq!(bool::decode(&[0, 1, 2]), [false, true, true]);
    }
}
