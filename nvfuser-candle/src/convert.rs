//! Moving values between candle's `CpuStorage` and the fusion library's tensors.
//!
//! Inputs: a candle tensor is a storage plus a `Layout` (shape, strides, start offset),
//! so it may be a transposed, narrowed or broadcast (stride 0) view. The CPU path must
//! copy anyway (the library's CPU device owns its buffers), and that one copy gathers
//! the view into row-major order: every fusion sees contiguous inputs, so a fusion
//! declared with the default (contiguous) layout accepts every candle view. Reads are
//! bounds-checked against the storage before the gather (a layout that addresses past
//! the end is an error, not a panic).
//!
//! Dtypes: f32, f64, f16, bf16, i64 and i32 map one to one. An input the fusion declares
//! `i64` also takes candle's u8, u32, i16 and i32 (converted exactly: labels and token
//! ids are often u32 in candle), and a `bool` input takes u8 (nonzero is true).
//! Outputs: the same one-to-one types, and `bool` as u8 (0 or 1). Other types (fp8,
//! candle's f6/f4 formats) are refused with the list of those accepted.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Layout, Shape};
use half::{bf16, f16};
use nvfuser::{DataType, Device, Tensor};

use crate::error::{Error, Result};

/// The fusion dtype a candle dtype is read as when nothing converts it.
pub fn fusion_dtype(dtype: DType) -> Option<DataType> {
    Some(match dtype {
        DType::F32 => DataType::F32,
        DType::F64 => DataType::F64,
        DType::F16 => DataType::F16,
        DType::BF16 => DataType::BF16,
        DType::I64 => DataType::I64,
        DType::I32 => DataType::I32,
        _ => return None,
    })
}

/// The candle dtype a fusion output of `dtype` becomes.
pub fn candle_dtype(dtype: DataType) -> Option<DType> {
    Some(match dtype {
        DataType::F32 => DType::F32,
        DataType::F64 => DType::F64,
        DataType::F16 => DType::F16,
        DataType::BF16 => DType::BF16,
        DataType::I64 => DType::I64,
        DataType::I32 => DType::I32,
        DataType::Bool => DType::U8,
        _ => return None,
    })
}

/// Whether a fusion input declared `want` accepts a candle tensor of `found`.
pub(crate) fn accepts(want: DataType, found: DType) -> bool {
    match want {
        DataType::I64 => matches!(
            found,
            DType::I64 | DType::I32 | DType::I16 | DType::U32 | DType::U8
        ),
        DataType::Bool => found == DType::U8,
        _ => fusion_dtype(found) == Some(want),
    }
}

/// The candle dtypes a fusion input declared `want` accepts, in words.
pub(crate) fn accepted(want: DataType) -> String {
    match want {
        DataType::I64 => "i64 (or u8, u32, i16, i32, converted exactly)".into(),
        DataType::Bool => "u8 (a bool input: nonzero is true)".into(),
        _ => match candle_dtype(want) {
            Some(d) => d.as_str().to_string(),
            None => format!("{want} (which candle has no type for)"),
        },
    }
}

/// The elements a layout addresses, in row-major order of its shape. `None` when the
/// layout reaches past the end of `data`.
pub(crate) fn gather<T: Copy>(data: &[T], layout: &Layout) -> Option<Vec<T>> {
    if let Some((start, end)) = layout.contiguous_offsets() {
        return data.get(start..end).map(<[T]>::to_vec);
    }
    let dims = layout.dims();
    let strides = layout.stride();
    let start = layout.start_offset();
    let numel: usize = dims.iter().product();
    if numel == 0 {
        return Some(Vec::new());
    }
    // The last element addressed; every other one is at a smaller offset.
    let mut last = start;
    for (&d, &s) in dims.iter().zip(strides) {
        last = last.checked_add((d - 1).checked_mul(s)?)?;
    }
    if last >= data.len() {
        return None;
    }
    let mut out = Vec::with_capacity(numel);
    let Some((&inner, outer_dims)) = dims.split_last() else {
        out.push(data[start]);
        return Some(out);
    };
    let inner_stride = strides[dims.len() - 1];
    let outer_strides = &strides[..outer_dims.len()];
    let mut index = vec![0usize; outer_dims.len()];
    let mut base = start;
    loop {
        out.extend((0..inner).map(|k| data[base + k * inner_stride]));
        // The next row: an odometer over the outer dims.
        let mut d = outer_dims.len();
        loop {
            if d == 0 {
                return Some(out);
            }
            d -= 1;
            index[d] += 1;
            base += outer_strides[d];
            if index[d] < outer_dims[d] {
                break;
            }
            base -= outer_strides[d] * outer_dims[d];
            index[d] = 0;
        }
    }
}

/// A new tensor on `device` (the CPU device) holding the elements of a candle storage
/// view, read as `want`. `op` and `arg` name the call in errors.
pub(crate) fn to_fusion_tensor(
    op: &str,
    arg: &str,
    storage: &CpuStorage,
    layout: &Layout,
    want: DataType,
    device: &Device,
) -> Result<Tensor> {
    let found = storage.dtype();
    if !accepts(want, found) {
        return Err(Error::Dtype {
            op: op.into(),
            arg: arg.into(),
            expected: accepted(want),
            found,
        });
    }
    let dims = layout.dims();
    let out_of_bounds = || Error::Shape {
        op: op.into(),
        arg: arg.into(),
        expected: format!(
            "a layout inside its storage (strides {:?}, offset {})",
            layout.stride(),
            layout.start_offset()
        ),
        found: dims.to_vec(),
    };
    let upload = |r: nvfuser::Error| Error::fusion(op, r);
    macro_rules! read {
        ($v:expr) => {
            gather($v, layout).ok_or_else(out_of_bounds)?
        };
    }
    macro_rules! widen {
        ($v:expr, $t:ty) => {
            read!($v).into_iter().map(<$t>::from).collect::<Vec<$t>>()
        };
    }
    let tensor = match (storage, want) {
        (CpuStorage::F32(v), _) => device.tensor_from_slice(&read!(v), dims),
        (CpuStorage::F64(v), _) => device.tensor_from_slice(&read!(v), dims),
        (CpuStorage::F16(v), _) => device.tensor_from_slice::<f16>(&read!(v), dims),
        (CpuStorage::BF16(v), _) => device.tensor_from_slice::<bf16>(&read!(v), dims),
        (CpuStorage::I32(v), DataType::I32) => device.tensor_from_slice(&read!(v), dims),
        (CpuStorage::I64(v), _) => device.tensor_from_slice(&read!(v), dims),
        (CpuStorage::I32(v), _) => device.tensor_from_slice(&widen!(v, i64), dims),
        (CpuStorage::I16(v), _) => device.tensor_from_slice(&widen!(v, i64), dims),
        (CpuStorage::U32(v), _) => device.tensor_from_slice(&widen!(v, i64), dims),
        (CpuStorage::U8(v), DataType::Bool) => {
            let values: Vec<bool> = read!(v).into_iter().map(|b| b != 0).collect();
            device.tensor_from_slice(&values, dims)
        }
        (CpuStorage::U8(v), _) => device.tensor_from_slice(&widen!(v, i64), dims),
        // `accepts` refused every other pair above.
        _ => {
            return Err(Error::Dtype {
                op: op.into(),
                arg: arg.into(),
                expected: accepted(want),
                found,
            })
        }
    };
    tensor.map_err(upload)
}

/// A fusion output as candle CPU storage and its (contiguous) shape.
pub(crate) fn to_cpu_storage(op: &str, index: usize, t: &Tensor) -> Result<(CpuStorage, Shape)> {
    let read = |e: nvfuser::Error| Error::fusion(op, e);
    let storage = match t.dtype() {
        DataType::F32 => CpuStorage::F32(t.to_vec::<f32>().map_err(read)?),
        DataType::F64 => CpuStorage::F64(t.to_vec::<f64>().map_err(read)?),
        DataType::F16 => CpuStorage::F16(t.to_vec::<f16>().map_err(read)?),
        DataType::BF16 => CpuStorage::BF16(t.to_vec::<bf16>().map_err(read)?),
        DataType::I64 => CpuStorage::I64(t.to_vec::<i64>().map_err(read)?),
        DataType::I32 => CpuStorage::I32(t.to_vec::<i32>().map_err(read)?),
        DataType::Bool => CpuStorage::U8(
            t.to_vec::<bool>()
                .map_err(read)?
                .into_iter()
                .map(u8::from)
                .collect(),
        ),
        other => {
            return Err(Error::Unsupported {
                op: op.into(),
                what: format!(
                    "output {index} has dtype {other}, which candle cannot hold; \
                     cast it in the fusion (f32, f64, f16, bf16, i64, i32 or bool)"
                ),
            })
        }
    };
    Ok((storage, Shape::from(t.sizes().to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_follows_strides_and_offsets() {
        let data: Vec<i32> = (0..12).collect();
        // A [3, 4] row-major buffer read transposed as [4, 3].
        let t = Layout::new(Shape::from((4, 3)), vec![1, 4], 0);
        assert_eq!(
            gather(&data, &t).unwrap(),
            vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
        );
        // Columns 1..3 of each row, from offset 1.
        let n = Layout::new(Shape::from((3, 2)), vec![4, 1], 1);
        assert_eq!(gather(&data, &n).unwrap(), vec![1, 2, 5, 6, 9, 10]);
        // Row 2 broadcast to 3 rows (stride 0).
        let b = Layout::new(Shape::from((3, 4)), vec![0, 1], 8);
        assert_eq!(
            gather(&data, &b).unwrap(),
            vec![8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11]
        );
        // A 0-d view, an empty view, and a view past the end.
        let s = Layout::new(Shape::from(()), vec![], 5);
        assert_eq!(gather(&data, &s).unwrap(), vec![5]);
        let e = Layout::new(Shape::from((0, 3)), vec![1, 7], 100);
        assert_eq!(gather(&data, &e).unwrap(), Vec::<i32>::new());
        let pitched = Layout::new(Shape::from((2, 4)), vec![8, 1], 0);
        assert_eq!(
            gather(&data, &pitched).unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        let past = Layout::new(Shape::from((2, 5)), vec![8, 1], 0);
        assert_eq!(gather(&data, &past), None);
    }

    #[test]
    fn dtypes_map_both_ways() {
        for d in [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I64,
            DType::I32,
        ] {
            let ours = fusion_dtype(d).unwrap();
            assert_eq!(candle_dtype(ours), Some(d));
            assert!(accepts(ours, d));
        }
        assert!(accepts(DataType::I64, DType::U32));
        assert!(accepts(DataType::Bool, DType::U8));
        assert!(!accepts(DataType::F32, DType::BF16));
        assert!(!accepts(DataType::I32, DType::U32));
        assert_eq!(candle_dtype(DataType::F8E4M3), None);
    }
}
