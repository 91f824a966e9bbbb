//! `HostTensor` construction and access, and `compare` with tolerances.

use half::{bf16, f16};
use nvfuser_core::eval::{compare, HostData, HostTensor, Mismatch, Tolerance};
use nvfuser_core::prelude::*;

#[test]
fn typed_constructors_and_accessors() {
    let a = HostTensor::from_vec(vec![1.5f32, -2.0, 3.25, 4.0, 5.5, -6.75], &[2, 3]).unwrap();
    assert_eq!(a.dtype(), DataType::F32);
    assert_eq!(a.shape(), [2, 3]);
    assert_eq!(a.rank(), 2);
    assert_eq!(a.numel(), 6);
    assert_eq!(a.get_f64(&[1, 2]).unwrap(), -6.75);
    assert_eq!(a.get(&[0, 1]).unwrap(), ScalarValue::Float(-2.0));
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        [1.5, -2.0, 3.25, 4.0, 5.5, -6.75]
    );
    assert_eq!(
        a.to_vec::<f64>().unwrap_err().to_string(),
        "HostTensor::to_vec: expected f32 (the tensor's type), found f64"
    );
    assert_eq!(
        a.get_f64(&[2, 0]).unwrap_err().to_string(),
        "HostTensor::get: invalid argument: index [2, 0] is out of range for shape [2, 3]"
    );
    assert!(a.get_f64(&[0]).is_err());
    assert_eq!(
        HostTensor::from_vec(vec![1i32, 2, 3], &[2, 2])
            .unwrap_err()
            .to_string(),
        "HostTensor: shape mismatch: expected 4 values for shape [2, 2], found 3 values"
    );

    let h = HostTensor::from_slice(&[f16::from_f32(0.5), f16::from_f32(-1.25)], &[2]).unwrap();
    assert_eq!(h.dtype(), DataType::F16);
    assert_eq!(
        h.to_vec::<f16>().unwrap(),
        [f16::from_f32(0.5), f16::from_f32(-1.25)]
    );
    let b = HostTensor::from_slice(&[bf16::from_f32(3.0)], &[1]).unwrap();
    assert_eq!(b.dtype(), DataType::BF16);
    let i = HostTensor::from_slice(&[i64::MAX, -3], &[2]).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), [i64::MAX, -3]);
    let t = HostTensor::from_slice(&[true, false], &[2]).unwrap();
    assert_eq!(t.to_f64_vec(), [1.0, 0.0]);

    let s = HostTensor::scalar(2.5f64);
    assert_eq!(s.rank(), 0);
    assert_eq!(s.get_f64(&[]).unwrap(), 2.5);
    let s = HostTensor::scalar(-7i32);
    assert_eq!(
        (s.dtype(), s.to_vec::<i32>().unwrap()),
        (DataType::I32, vec![-7])
    );
}

#[test]
fn strided_views_are_copied_row_major() {
    let data: Vec<i32> = (0..12).map(|v| v * 10 - 5).collect();
    // Transposed [3, 4] -> [4, 3].
    let t = HostTensor::from_strided(&data, &[4, 3], &[1, 4], 0).unwrap();
    assert_eq!(
        t.to_vec::<i32>().unwrap(),
        [-5, 35, 75, 5, 45, 85, 15, 55, 95, 25, 65, 105]
    );
    // Negative stride (reversed) with an offset.
    let r = HostTensor::from_strided(&data, &[3], &[-2], 6).unwrap();
    assert_eq!(r.to_vec::<i32>().unwrap(), [55, 35, 15]);
    // Expanded dim (stride 0) and a size-1 dim with an arbitrary stride.
    let e = HostTensor::from_strided(&data, &[2, 1, 3], &[0, i64::MAX, 1], 9).unwrap();
    assert_eq!(e.to_vec::<i32>().unwrap(), [85, 95, 105, 85, 95, 105]);
    // Empty.
    let z = HostTensor::from_strided(&data, &[0, 5], &[100, 1], 0).unwrap();
    assert_eq!(z.shape(), [0, 5]);
    // Out of bounds.
    let msg = HostTensor::from_strided(&data, &[3, 4], &[4, 1], 1)
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "HostTensor::from_strided: invalid argument: sizes [3, 4], strides [4, 1] and offset 1 address elements 1..=12, expected within 0..12 (the data's length)"
    );
    assert!(HostTensor::from_strided(&data, &[3], &[-5], 4).is_err());
    assert!(HostTensor::from_strided(&data, &[3], &[1, 1], 0).is_err());
}

#[test]
fn full_zeros_cast_and_from_data() {
    let f = HostTensor::full(DataType::BF16, &[2], 0.1).unwrap();
    assert_eq!(f.to_f64_vec(), [0.10009765625; 2]);
    let z = HostTensor::zeros(DataType::I32, &[2, 2]).unwrap();
    assert_eq!(z.to_vec::<i32>().unwrap(), [0; 4]);
    let c = HostTensor::from_slice(&[2.7f64, -2.7, 1e10], &[3])
        .unwrap()
        .cast(DataType::I32);
    assert_eq!(c.to_vec::<i32>().unwrap(), [2, -2, i32::MAX]);

    let d = HostTensor::from_data(
        DataType::F16,
        HostData::Float(ndarray::arr1(&[0.1, 70000.0]).into_dyn()),
    )
    .unwrap();
    assert_eq!(d.to_f64_vec(), [0.0999755859375, f64::INFINITY]);
    let e = HostTensor::from_data(
        DataType::I32,
        HostData::Int(ndarray::arr1(&[1i64 << 40]).into_dyn()),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "HostTensor::from_data: invalid argument: value 1099511627776 is out of range for i32"
    );
    let e = HostTensor::from_data(
        DataType::F32,
        HostData::Bool(ndarray::arr1(&[true]).into_dyn()),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "HostTensor::from_data: expected float storage for f32, found bool storage"
    );
}

#[test]
fn random_test_data() {
    for dtype in DataType::ALL {
        let a = HostTensor::random(dtype, &[3, 5], 42);
        let b = HostTensor::random(dtype, &[3, 5], 42);
        let c = HostTensor::random(dtype, &[3, 5], 43);
        assert_eq!(a, b, "{dtype}: deterministic");
        assert_ne!(a, c, "{dtype}: depends on the seed");
        assert_eq!(a.dtype(), dtype);
        let v = a.to_f64_vec();
        assert!(v.iter().any(|&x| x != v[0]), "{dtype}: not all equal");
        match dtype.category() {
            nvfuser_core::dtype::Category::Floating => {
                assert!(v.iter().all(|x| (-2.0..=2.0).contains(x)));
                // Representable in the dtype.
                let r = a.cast(DataType::F64).cast(dtype);
                assert_eq!(r, a);
            }
            nvfuser_core::dtype::Category::Integer => {
                assert!(v.iter().all(|x| (-8.0..=8.0).contains(x)))
            }
            nvfuser_core::dtype::Category::Bool => {}
        }
    }
    // Two-element bool tensors always hold both values.
    for seed in 0..64 {
        let v = HostTensor::random(DataType::Bool, &[2], seed)
            .to_vec::<bool>()
            .unwrap();
        assert_ne!(v[0], v[1], "seed {seed}");
    }
    assert_eq!(HostTensor::random(DataType::F32, &[0, 4], 1).numel(), 0);
    assert_eq!(HostTensor::random(DataType::F32, &[1], 1).numel(), 1);
}

#[test]
fn compare_passes_within_tolerance() {
    let a = HostTensor::from_slice(&[1.0f32, 2.0, f32::NAN, f32::INFINITY], &[4]).unwrap();
    let b = HostTensor::from_slice(&[1.0f32, 2.00001, f32::NAN, f32::INFINITY], &[4]).unwrap();
    compare(&a, &b, Tolerance::for_dtype(DataType::F32)).unwrap();
    assert!(compare(&a, &b, Tolerance::exact()).is_err());
    let i = HostTensor::from_slice(&[1i64, -5], &[2]).unwrap();
    compare(&i, &i.clone(), Tolerance::for_dtype(DataType::I64)).unwrap();
    assert_eq!(
        Tolerance::for_dtype(DataType::BF16),
        Tolerance::new(1e-2, 1e-5)
    );
    assert_eq!(Tolerance::for_dtype(DataType::I32), Tolerance::exact());
}

#[test]
fn compare_reports_the_worst_element() {
    let a = HostTensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = HostTensor::from_slice(&[1.0f64, 2.5, 3.0, 4.1, 5.0, 6.0], &[2, 3]).unwrap();
    let m = compare(&a, &b, Tolerance::new(1e-3, 1e-3)).unwrap_err();
    match &m {
        Mismatch::Values {
            index,
            actual,
            expected,
            count,
            total,
            ..
        } => {
            assert_eq!(index, &vec![0, 1]);
            assert_eq!(
                (*actual, *expected),
                (ScalarValue::Float(2.0), ScalarValue::Float(2.5))
            );
            assert_eq!((*count, *total), (2, 6));
        }
        other => panic!("{other:?}"),
    }
    let msg = m.to_string();
    assert!(msg.starts_with("2 of 6 elements differ; worst at [0, 1]: actual 2.0, expected 2.5 (|diff| 5e-1 > allowed"), "{msg}");

    // NaN and infinity mismatches rank above any finite difference.
    let a = HostTensor::from_slice(&[1.0f32, 2.0, f32::INFINITY, 0.0], &[2, 2]).unwrap();
    let b = HostTensor::from_slice(&[9.0f32, 2.0, f32::NEG_INFINITY, f32::NAN], &[2, 2]).unwrap();
    let Mismatch::Values { index, count, .. } =
        compare(&a, &b, Tolerance::for_dtype(DataType::F32)).unwrap_err()
    else {
        panic!()
    };
    assert_eq!((index, count), (vec![1, 0], 3));

    // Integers are exact and report their values.
    let a = HostTensor::from_slice(&[1i32, 7], &[2]).unwrap();
    let b = HostTensor::from_slice(&[1i32, 9], &[2]).unwrap();
    let m = compare(&a, &b, Tolerance::new(1.0, 1.0)).unwrap_err();
    assert!(
        m.to_string()
            .starts_with("1 of 2 elements differ; worst at [1]: actual 7, expected 9"),
        "{m}"
    );

    let h = HostTensor::from_slice(&[1.0f32], &[1]).unwrap();
    let g = HostTensor::from_slice(&[1.0f64], &[1]).unwrap();
    assert_eq!(
        compare(&h, &g, Tolerance::exact()).unwrap_err().to_string(),
        "dtype mismatch: expected f64, found f32"
    );
    let k = HostTensor::from_slice(&[1.0f32, 1.0], &[2]).unwrap();
    assert_eq!(
        compare(&h, &k, Tolerance::exact()).unwrap_err().to_string(),
        "shape mismatch: expected [2], found [1]"
    );
}
