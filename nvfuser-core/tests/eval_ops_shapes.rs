//! The CPU reference evaluator, op by op: broadcasting and input layouts (permuted,
//! expanded, size-one and empty inputs), shape ops (broadcast, expand, reshape, permute,
//! squeeze, slice, pad, cat, full, iota) and indexing ops (index_select, select, gather,
//! take_along_axis). Every expected value is computed by hand in the test, never with
//! the evaluator's own helpers.

mod common;

use common::{err, f32s, f64s, fusion, i32s, i64s, run, t};
use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::eval::HostTensor;
use nvfuser_core::ir::IterKind;
use nvfuser_core::prelude::*;

// ----- broadcasting and layouts -----

#[test]
fn broadcasting_with_rank_extension_and_broadcast_dims() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let w = fd.define_tensor(DataType::F32, &[-1])?;
        let c = fd.define_tensor(DataType::F32, &[-1, 1])?;
        let y = fd.add(x, w)?;
        let z = fd.mul(y, c)?;
        let k = fd.constant(0.5);
        Ok(vec![y, fd.sub(z, k)?])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]),
            t(&[10.0f32, 20.0, 30.0], &[3]),
            t(&[2.0f32, -1.0], &[2, 1]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 3]);
    assert_eq!(f32s(&out[0]), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    assert_eq!(f32s(&out[1]), [21.5, 43.5, 65.5, -14.5, -25.5, -36.5]);
}

#[test]
fn broadcast_size_mismatch_is_an_error_naming_op_and_sizes() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let w = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![fd.add(x, w)?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3]), t(&[1.0f32; 4], &[4])]);
    assert_eq!(
        msg,
        "argument 1 dim 0: size 4, but it must equal argument 0 dim 1 (size 3): the fusion adds them"
    );
    // A symbolic dim of runtime size 1 does not broadcast.
    let msg = err(
        &f,
        vec![t(&[1.0f32, 2.0, 3.0], &[3, 1]), t(&[1.0f32, 2.0], &[2])],
    );
    assert_eq!(
        msg,
        "argument 1 dim 0: size 2, but it must equal argument 0 dim 1 (size 1): the fusion adds them"
    );
}

#[test]
fn non_contiguous_permuted_and_expanded_inputs() {
    // A transposed view of row-major [[1, 2, 3], [4, 5, 6]].
    let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let xt = HostTensor::from_strided(&data, &[3, 2], &[1, 3], 0).unwrap();
    // Every other element of 0..12 starting at 1, rows 4 apart.
    let data12: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let xs = HostTensor::from_strided(&data12, &[3, 2], &[4, 2], 1).unwrap();
    assert_eq!(f32s(&xs), [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
    // An expanded (stride 0) [4, 3] tensor.
    let row = [1.5f32, -2.0, 4.0];
    let xe = HostTensor::from_strided(&row, &[4, 3], &[0, 1], 0).unwrap();

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let e = fd.define_tensor_from_strides(DataType::F32, &[4, 3], &[0, 1], false)?;
        Ok(vec![fd.sub(a, b)?, fd.sum(e, &[0], false)?, fd.mul(e, e)?])
    });
    let out = run(&f, vec![xt.into(), xs.into(), xe.into()]);
    // [[1, 4], [2, 5], [3, 6]] - [[1, 3], [5, 7], [9, 11]]
    assert_eq!(f32s(&out[0]), [0.0, 1.0, -3.0, -2.0, -6.0, -5.0]);
    assert_eq!(f32s(&out[1]), [6.0, -8.0, 16.0]);
    assert_eq!(out[2].shape(), [4, 3]);
    assert_eq!(f32s(&out[2])[9..], [2.25, 4.0, 16.0]);
}

#[test]
fn size_one_and_empty_inputs() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F64, &[-1])?;
        let y = fd.add(x, b)?;
        Ok(vec![
            y,
            fd.sum(x, &[0], false)?,
            fd.prod(x, &[0], false)?,
            fd.mean(x, &[0], false)?,
            fd.sum(x, &[1], false)?,
        ])
    });
    let out = run(&f, vec![t::<f64>(&[], &[0, 3]), t(&[1.5, -2.0, 3.0], &[3])]);
    assert_eq!(out[0].shape(), [0, 3]);
    assert_eq!(f64s(&out[1]), [0.0; 3]);
    assert_eq!(f64s(&out[2]), [1.0; 3]);
    assert!(f64s(&out[3]).iter().all(|v| v.is_nan()));
    assert_eq!(out[4].shape(), [0]);
    // Size-1 symbolic dims are ordinary dims.
    let out = run(
        &f,
        vec![t(&[2.5, -1.0, 4.0], &[1, 3]), t(&[1.5, -2.0, 3.0], &[3])],
    );
    assert_eq!(f64s(&out[0]), [4.0, -3.0, 7.0]);
    assert_eq!(f64s(&out[2]), [2.5, -1.0, 4.0]);
    assert_eq!(f64s(&out[4]), [5.5]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.max(x, &[0], false)?])
    });
    let msg = err(&f, vec![t::<f32>(&[], &[0, 3])]);
    assert_eq!(msg, "max: invalid argument: cannot reduce over an empty dimension: the max of zero elements is not defined (and an output with elements depends on it)");
}

/// Issue #12 case 10: a max over an empty dim is refused only when an output with
/// elements observes its (undefined) values. Softmax over an empty dim returns its
/// empty result, as PyTorch's; a max whose own output is empty returns it.
#[test]
fn empty_max_is_refused_only_when_observed() {
    let softmax = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let m = fd.max(x, &[1], true)?;
        let d = fd.sub(x, m)?;
        let e = fd.exp(d)?;
        let s = fd.sum(e, &[1], true)?;
        Ok(vec![fd.div(e, s)?])
    });
    let out = run(&softmax, vec![t::<f32>(&[], &[3, 0])]);
    assert_eq!(out[0].shape(), [3, 0]);
    // The same softmax on rows with elements is still right.
    let out = run(&softmax, vec![t(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2])]);
    assert_eq!(f32s(&out[0]), [0.5, 0.5, 0.5, 0.5]);

    let max_of = |axis| {
        fusion(move |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
            let m = fd.max(x, &[axis], false)?;
            Ok(vec![fd.neg(m)?])
        })
    };
    // [0, 0] over dim 1: the output has no elements, nothing is observed.
    assert_eq!(
        run(&max_of(1), vec![t::<f32>(&[], &[0, 0])])[0].shape(),
        [0]
    );
    // [3, 0] over dim 1: three undefined values would be returned.
    assert!(err(&max_of(1), vec![t::<f32>(&[], &[3, 0])])
        .starts_with("max: invalid argument: cannot reduce over an empty dimension"));
    // The softmax's max as a second output is observed.
    let both = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let m = fd.max(x, &[1], true)?;
        let d = fd.sub(x, m)?;
        Ok(vec![d, m])
    });
    assert!(err(&both, vec![t::<f32>(&[], &[3, 0])]).contains("the max of zero elements"));
    assert_eq!(run(&both, vec![t::<f32>(&[], &[0, 0])])[1].shape(), [0, 1]);
}

// ----- shape ops -----

#[test]
fn broadcast_expand_and_broadcast_in_dim() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[1, -1])?;
        let n = fd.define_scalar(DataType::I64)?;
        let v = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![
            fd.expand(x, &[Size::Const(4), Size::Const(-1)])?,
            fd.expand(x, &[Size::Val(n), Size::Const(3)])?,
            fd.broadcast_in_dim(v, &[Size::Const(2), Size::Const(3)], &[1])?,
            fd.broadcast(v, &[true, false, true])?,
            fd.unsqueeze(v, -1)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[5i64, -6, 7], &[1, 3]),
            2i64.into(),
            t(&[8i64, 9, 10], &[3]),
        ],
    );
    assert_eq!(out[0].shape(), [4, 3]);
    assert_eq!(i64s(&out[0]), [5i64, -6, 7].repeat(4));
    assert_eq!(out[1].shape(), [2, 3]);
    assert_eq!(i64s(&out[2]), [8, 9, 10, 8, 9, 10]);
    assert_eq!(out[3].shape(), [1, 3, 1]);
    assert_eq!(out[4].shape(), [3, 1]);

    // Only broadcast dims expand.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.expand(x, &[Size::Const(5), Size::Const(-1)])?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3])]);
    assert_eq!(
        msg,
        "argument 0 dim 0: size 2, but it must equal 5: expand only changes the size of broadcast dims (-1 keeps a dim)"
    );
}

#[test]
fn reshape_permute_squeeze() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let p = fd.permute(x, &[1, 0])?;
        Ok(vec![
            fd.reshape(x, &[Size::Const(3), Size::Const(-1)])?,
            fd.reshape(p, &[Size::Const(-1)])?,
        ])
    });
    let out = run(&f, vec![t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])]);
    assert_eq!(out[0].shape(), [3, 2]);
    assert_eq!(f32s(&out[0]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        f32s(&out[1]),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        "reshape reads the permuted tensor row-major"
    );
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.reshape(x, &[Size::Const(4), Size::Const(-1)])?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3])]);
    assert_eq!(msg, "reshape: shape mismatch: expected sizes with 6 elements (input shape [2, 3]), found [4, -1]");

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1, -1])?;
        Ok(vec![fd.permute(x, &[2, 0, 1])?])
    });
    let data: Vec<i32> = (0..24).map(|i| i * 3 - 7).collect();
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    assert_eq!(out[0].shape(), [4, 2, 3]);
    // out[c][a][b] = x[a][b][c] = (12a + 4b + c) * 3 - 7
    for (c, a, b) in [(0, 0, 0), (3, 1, 2), (2, 0, 1), (1, 1, 0)] {
        assert_eq!(
            out[0].get_f64(&[c, a, b]).unwrap(),
            ((12 * a + 4 * b + c) * 3) as f64 - 7.0
        );
    }

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
        Ok(vec![fd.squeeze(x, &[1])?])
    });
    let out = run(&f, vec![t(&[1.5f32, 2.5, 3.5, 4.5], &[2, 1, 2])]);
    assert_eq!(out[0].shape(), [2, 2]);
    assert_eq!(f32s(&out[0]), [1.5, 2.5, 3.5, 4.5]);
}

#[test]
fn slices_clamp_like_python() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![
            fd.slice(x, &[Slice::range(-3i64, i64::MAX)])?,
            fd.slice(x, &[Slice::step(1i64, 8i64, 3)])?,
            fd.slice(x, &[Slice::range(5i64, 100i64)])?,
            fd.slice(x, &[Slice::range(8i64, 2i64)])?,
            fd.slice(x, &[Slice::range(-100i64, 2i64)])?,
            fd.slice(x, &[Slice::step(0i64, -1i64, 4)])?,
        ])
    });
    let data: Vec<i64> = (0..10).map(|i| i * 10 + 1).collect();
    let out = run(&f, vec![t(&data, &[10])]);
    assert_eq!(i64s(&out[0]), [71, 81, 91]);
    assert_eq!(i64s(&out[1]), [11, 41, 71]);
    assert_eq!(i64s(&out[2]), [51, 61, 71, 81, 91]);
    assert_eq!(out[3].shape(), [0]);
    assert_eq!(i64s(&out[4]), [1, 11]);
    assert_eq!(i64s(&out[5]), [1, 41, 81]);

    // Scalar bounds must lie within 0..=size.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let a = fd.define_scalar(DataType::I64)?;
        let b = fd.define_scalar(DataType::I64)?;
        Ok(vec![fd.slice(x, &[Slice::all(), Slice::range(a, b)])?])
    });
    let x: Vec<f32> = (0..8).map(|i| i as f32 - 2.5).collect();
    let out = run(&f, vec![t(&x, &[2, 4]), 1i64.into(), 3i64.into()]);
    assert_eq!(f32s(&out[0]), [-1.5, -0.5, 2.5, 3.5]);
    let msg = err(&f, vec![t(&x, &[2, 4]), 1i64.into(), 5i64.into()]);
    assert_eq!(
        msg,
        "slice: invalid argument: stop 5 at dim 1 is out of range for a dim of size 4 (bounds given by scalars must be within 0..=4)"
    );
    let msg = err(&f, vec![t(&x, &[2, 4]), (-1i64).into(), 2i64.into()]);
    assert!(
        msg.starts_with("slice: invalid argument: start -1 at dim 1 is out of range"),
        "{msg}"
    );
}

#[test]
fn pad_and_cat() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let v = fd.constant(-9.7);
        Ok(vec![fd.pad(x, &[(1, 0), (0, 2)], v)?])
    });
    let out = run(&f, vec![t(&[1i32, 2, 3, 4], &[2, 2])]);
    assert_eq!(out[0].shape(), [3, 4]);
    assert_eq!(i32s(&out[0]), [-9, -9, -9, -9, 1, 2, -9, -9, 3, 4, -9, -9]);

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let c = fd.define_tensor(DataType::F32, &[1, -1])?;
        Ok(vec![
            fd.cat(&[a, b], 1)?,
            fd.cat(&[a, c], -1)?,
            fd.cat(&[b, b], 0)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0f32, 2.0], &[2, 1]),
            t(&[3.0f32, 4.0, 5.0, 6.0], &[2, 2]),
            t(&[7.0f32, 8.0], &[1, 2]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 3]);
    assert_eq!(f32s(&out[0]), [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    assert_eq!(
        f32s(&out[1]),
        [1.0, 7.0, 8.0, 2.0, 7.0, 8.0],
        "a declared broadcast dim broadcasts"
    );
    assert_eq!(out[2].shape(), [4, 2]);
    assert_eq!(f32s(&out[2]), [3.0, 4.0, 5.0, 6.0, 3.0, 4.0, 5.0, 6.0]);

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.cat(&[a, b], 1)?])
    });
    let msg = err(
        &f,
        vec![t(&[1.0f32, 2.0], &[2, 1]), t(&[0.5f32; 6], &[3, 2])],
    );
    assert_eq!(msg, "argument 1 dim 0: size 3, but it must equal argument 0 dim 0 (size 2): the fusion concatenates them along dim 1 (cat), so the other dims must match");
}

#[test]
fn full_iota_and_size() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let n = fd.size(x, -1)?;
        let v = fd.constant(2.5);
        let seven = fd.constant(7i64);
        let tenth = fd.constant(0.1);
        let start = fd.constant(3i64);
        let step = fd.constant(-2i64);
        let fstart = fd.constant(0.5);
        let fstep = fd.constant(0.25);
        let big = fd.constant(2_147_483_646i64);
        let one = fd.constant(1i64);
        Ok(vec![
            fd.full(&[Size::Const(2), Size::Val(n)], v, DataType::F16)?,
            fd.full(&[Size::Const(2)], seven, DataType::F32)?,
            fd.full(&[Size::Const(1)], tenth, DataType::BF16)?,
            fd.iota(Size::Const(5), start, step, DataType::I64)?,
            fd.iota(Size::Val(n), fstart, fstep, DataType::F32)?,
            fd.iota(Size::Const(3), big, one, DataType::I32)?,
            fd.add(x, n)?,
        ])
    });
    let out = run(
        &f,
        vec![t(&[0.5f32, 1.5, -2.5, 4.0, 1.0, 0.25, -1.0, 2.0], &[2, 4])],
    );
    assert_eq!(out[0].shape(), [2, 4]);
    assert_eq!(out[0].to_f64_vec(), [2.5; 8]);
    assert_eq!(f32s(&out[1]), [7.0, 7.0]);
    assert_eq!(out[2].to_f64_vec(), [0.10009765625]);
    assert_eq!(i64s(&out[3]), [3, 1, -1, -3, -5]);
    assert_eq!(f32s(&out[4]), [0.5, 0.75, 1.0, 1.25]);
    assert_eq!(
        i32s(&out[5]),
        [i32::MAX - 1, i32::MAX, i32::MIN],
        "i32 iota wraps"
    );
    assert_eq!(f32s(&out[6]), [4.5, 5.5, 1.5, 8.0, 5.0, 4.25, 3.0, 6.0]);
}

#[test]
fn scalar_only_arithmetic_feeds_tensors() {
    let f = fusion(|fd| {
        let s = fd.define_scalar(DataType::F64)?;
        let k = fd.define_scalar(DataType::I64)?;
        let two = fd.constant(2.0);
        let d = fd.mul(s, two)?;
        let three = fd.constant(3i64);
        let m = fd.remainder(k, three)?;
        Ok(vec![
            fd.full(&[Size::Const(2)], d, DataType::F64)?,
            fd.full(&[Size::Const(1)], m, DataType::I64)?,
        ])
    });
    let out = run(&f, vec![1.75f64.into(), (-7i64).into()]);
    assert_eq!(f64s(&out[0]), [3.5, 3.5]);
    assert_eq!(i64s(&out[1]), [2]);
}

// ----- indexing -----

#[test]
fn index_select_select_gather_take_along_axis() {
    let x32: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let j = fd.define_tensor(DataType::I64, &[-1])?;
        let k = fd.define_scalar(DataType::I64)?;
        Ok(vec![
            fd.index_select(x, 0, i)?,
            fd.index_select(x, -1, j)?,
            fd.select(x, 0, Size::Const(-1))?,
            fd.select(x, 1, Size::Val(k))?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 0, 2], &[3]),
            t(&[1i64], &[1]),
            0i64.into(),
        ],
    );
    assert_eq!(f32s(&out[0]), [5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
    assert_eq!(out[1].shape(), [3, 1]);
    assert_eq!(f32s(&out[1]), [2.0, 4.0, 6.0]);
    assert_eq!(f32s(&out[2]), [5.0, 6.0]);
    assert_eq!(f32s(&out[3]), [1.0, 3.0, 5.0]);
    let msg = err(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 0, 2], &[3]),
            t(&[1i64], &[1]),
            2i64.into(),
        ],
    );
    assert_eq!(
        msg,
        "select: invalid argument: index 2 is out of range for dim 1 of size 2 (expected -2..2)"
    );
    let msg = err(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 3, 0], &[3]),
            t(&[1i64], &[1]),
            0i64.into(),
        ],
    );
    assert_eq!(msg, "index_select: invalid argument: index 3 at position [1] is out of range for dim 0 of size 3 (expected 0..3)");

    let x9: Vec<i32> = (1..=9).collect();
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.gather(x, 1, i)?, fd.gather(x, 0, i)?])
    });
    let out = run(&f, vec![t(&x9, &[3, 3]), t(&[0i64, 2, 1, 0], &[2, 2])]);
    // out[i][j] = x[i][idx[i][j]] and x[idx[i][j]][j]
    assert_eq!(i32s(&out[0]), [1, 3, 5, 4]);
    assert_eq!(i32s(&out[1]), [1, 8, 4, 2]);
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64, 2, 3, 0], &[2, 2])]);
    assert_eq!(msg, "gather: invalid argument: index 3 at position [1, 0] is out of range for dim 1 of size 3 (expected 0..3)");
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64, -1], &[1, 2])]);
    assert!(
        msg.contains("index -1 at position [0, 1] is out of range"),
        "{msg}"
    );
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64; 8], &[4, 2])]);
    assert_eq!(msg, "argument 1 dim 0: size 4, but it must be at most argument 0 dim 0 (size 3): gather reads the input at the index's positions outside dim 1");

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[1, -1])?;
        let c = fd.define_tensor(DataType::F64, &[-1, 1])?;
        let j = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![
            fd.take_along_axis(x, i, 1)?,
            fd.take_along_axis(c, j, 0)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], &[2, 3]),
            t(&[2i64, 0], &[1, 2]),
            t(&[1.5, 2.5, 3.5], &[3, 1]),
            t(&[2i64, 0, 1, 1], &[2, 2]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 2]);
    assert_eq!(f64s(&out[0]), [30.0, 10.0, 60.0, 40.0]);
    assert_eq!(out[1].shape(), [2, 2]);
    assert_eq!(f64s(&out[1]), [3.5, 1.5, 2.5, 2.5]);
}

#[test]
fn triu_and_tril_keep_one_triangle_of_the_last_two_dims() {
    // x[b][r][c] = 10 r + c + 1 (+ 100 b); 3 x 4 matrices, two of them.
    let data: Vec<f32> = (0..2)
        .flat_map(|b| {
            (0..3).flat_map(move |r| (0..4).map(move |c| (100 * b + 10 * r + c + 1) as f32))
        })
        .collect();
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1, -1])?;
        Ok(vec![
            fd.triu(x, 0)?,
            fd.tril(x, 0)?,
            fd.triu(x, 1)?,
            fd.tril(x, -1)?,
        ])
    });
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    #[rustfmt::skip]
    let triu0 = [
        1.0, 2.0, 3.0, 4.0,
        0.0, 12.0, 13.0, 14.0,
        0.0, 0.0, 23.0, 24.0,
    ];
    #[rustfmt::skip]
    let tril0 = [
        1.0, 0.0, 0.0, 0.0,
        11.0, 12.0, 0.0, 0.0,
        21.0, 22.0, 23.0, 0.0,
    ];
    #[rustfmt::skip]
    let triu1 = [
        0.0, 2.0, 3.0, 4.0,
        0.0, 0.0, 13.0, 14.0,
        0.0, 0.0, 0.0, 24.0,
    ];
    #[rustfmt::skip]
    let tril_m1 = [
        0.0, 0.0, 0.0, 0.0,
        11.0, 0.0, 0.0, 0.0,
        21.0, 22.0, 0.0, 0.0,
    ];
    for (o, want) in out.iter().zip([triu0, tril0, triu1, tril_m1]) {
        assert_eq!(o.shape(), [2, 3, 4]);
        let got = f32s(o);
        // The second matrix is the first plus 100 where kept.
        let second: Vec<f32> = want
            .iter()
            .map(|&v| if v != 0.0 { v + 100.0 } else { 0.0 })
            .collect();
        assert_eq!(&got[..12], &want[..]);
        assert_eq!(&got[12..], &second[..]);
    }
    // The DSL names; rank 1 is refused.
    let dsl = nvfuser_core::dsl::build_str(
        "fn f(x: Tensor<i32, [R, C]>) -> Tensor<i32, [R, C]> { x.triu(diagonal = 1) + tril(x) }",
    )
    .unwrap()
    .remove(0)
    .0;
    let m: Vec<i32> = (1..=9).collect();
    let out = run(&dsl, vec![t(&m, &[3, 3])]);
    assert_eq!(i32s(&out[0]), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let mut fd = FusionDefinition::new();
    let v = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let e = fd.triu(v, 0).unwrap_err().to_string();
    assert!(e.contains("rank 2 or more, found rank 1"), "{e}");
}

/// Fuzz seed 5126885: a slice of an expanded dim to one element declared the expanded
/// size (2) as its extent; the reference refused its own IR while a GPU kernel ran on
/// the declared size. The slice is an ordinary dim of the sliced size.
#[test]
fn slice_of_an_expanded_dim_to_one_element() {
    let mut shapes = Vec::new();
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[1, -1])?;
        let e = fd.expand(x, &[Size::Const(2), Size::Const(-1)])?;
        let s = fd.slice(e, &[Slice::range(1, i64::MAX), Slice::all()])?;
        shapes.push(fd.fusion().tensor_type(s).unwrap().domain.clone());
        let y = fd.mul(s, s)?;
        Ok(vec![y])
    });
    let d = &shapes[0][0];
    assert_eq!(
        (d.extent.as_const(), d.kind),
        (Some(1), IterKind::Iteration)
    );
    let out = run(&f, vec![t(&[1.0f32, -2.0, 3.0], &[1, 3])]);
    assert_eq!(out[0].shape(), [1, 3]);
    assert_eq!(f32s(&out[0]), [1.0, 4.0, 9.0]);
}
