//! The scans (`cumsum`, `cumprod`, `cummax`, `cummin`) on the CPU reference evaluator:
//! built through the builder and through the `fusion!` language (the same fusion), on
//! every dtype family, along every axis of rank-2 and rank-3 tensors, with the dtype
//! rules (bool and integer sums and products in i64, half types in f32), wrap-around,
//! NaN and signed zeros, empty, size-1, broadcast and expanded dims, 0-d tensors and
//! errors; and the printers' round trip. Every expected value is computed by hand (or
//! by a closed form) in the test, never with the evaluator's helpers.

mod common;

use common::{bools, err, f32s, f64s, fusion, i32s, i64s, run, t};
use half::{bf16, f16};
use nvfuser_core::builder::Size;
use nvfuser_core::dsl;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::ir::{IterKind, Op, ScanOp};
use nvfuser_core::prelude::*;

/// Builds the single fn of `src`, panicking with rendered errors.
fn dsl_fusion(src: &str) -> Fusion {
    match dsl::build_str(src) {
        Ok(mut v) => v.remove(0).0,
        Err(errs) => panic!("{}", errs.iter().map(|e| e.render(src)).collect::<String>()),
    }
}

/// The scans of a fusion, in order.
fn scans(f: &Fusion) -> Vec<(ScanOp, usize)> {
    f.exprs()
        .filter_map(|(_, e)| match e.op {
            Op::Scan { op, axis } => Some((op, axis)),
            _ => None,
        })
        .collect()
}

/// `[[1, -2, 3.5], [4, 0.5, -6]]`.
const X23: [f32; 6] = [1.0, -2.0, 3.5, 4.0, 0.5, -6.0];

#[test]
fn four_scans_along_both_axes_of_a_matrix_by_builder_and_by_dsl() {
    let built = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![
            fd.cumsum(x, 0)?,
            fd.cumprod(x, 0)?,
            fd.cummax(x, 0)?,
            fd.cummin(x, 0)?,
            fd.cumsum(x, 1)?,
            fd.cumprod(x, -1)?,
            fd.cummax(x, 1)?,
            fd.cummin(x, -1)?,
        ])
    });
    let parsed = dsl_fusion(
        "fn f(x: Tensor<f32, [_, _]>) -> (
            Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>,
            Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>,
        ) {
            (x.cumsum(0), cumprod(x, axis = 0), x.cummax(axis = -2), cummin(x, 0),
             x.cumsum(1), x.cumprod(-1), cummax(x, 1), x.cummin(axis = -1))
        }",
    );
    assert!(parsed == built, "{parsed}\n{built}");
    // Negative axes are normalized: the IR holds 0 and 1.
    let axes: Vec<usize> = scans(&built).iter().map(|s| s.1).collect();
    assert_eq!(axes, [0, 0, 0, 0, 1, 1, 1, 1]);
    for f in [&built, &parsed] {
        let out = run(f, vec![t(&X23, &[2, 3])]);
        assert!(out
            .iter()
            .all(|o| o.shape() == [2, 3] && o.dtype() == DataType::F32));
        // Down the columns: [1, -2, 3.5] then [1+4, -2+0.5, 3.5-6], ...
        assert_eq!(f32s(&out[0]), [1.0, -2.0, 3.5, 5.0, -1.5, -2.5]);
        assert_eq!(f32s(&out[1]), [1.0, -2.0, 3.5, 4.0, -1.0, -21.0]);
        assert_eq!(f32s(&out[2]), [1.0, -2.0, 3.5, 4.0, 0.5, 3.5]);
        assert_eq!(f32s(&out[3]), [1.0, -2.0, 3.5, 1.0, -2.0, -6.0]);
        // Along the rows: [1, 1-2, 1-2+3.5], [4, 4.5, -1.5], ...
        assert_eq!(f32s(&out[4]), [1.0, -1.0, 2.5, 4.0, 4.5, -1.5]);
        assert_eq!(f32s(&out[5]), [1.0, -2.0, -7.0, 4.0, 2.0, -12.0]);
        assert_eq!(f32s(&out[6]), [1.0, 1.0, 3.5, 4.0, 4.0, 4.0]);
        assert_eq!(f32s(&out[7]), [1.0, -2.0, -2.0, 4.0, 0.5, -6.0]);
    }
}

#[test]
fn every_axis_of_a_rank_3_tensor_by_closed_form() {
    // x[a][b][c] = 12a + 4b + c over [2, 3, 4], i64.
    let (na, nb, nc) = (2i64, 3i64, 4i64);
    let data: Vec<i64> = (0..24).collect();
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1, -1, -1])?;
        Ok(vec![
            fd.cumsum(x, 0)?,
            fd.cumsum(x, 1)?,
            fd.cumsum(x, 2)?,
            fd.cumsum(x, -1)?,
            fd.cumsum(x, -3)?,
        ])
    });
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    let mut want = [vec![], vec![], vec![]];
    for a in 0..na {
        for b in 0..nb {
            for c in 0..nc {
                // Sums of the arithmetic runs up to the index along each axis.
                want[0].push((a + 1) * (4 * b + c) + 12 * a * (a + 1) / 2);
                want[1].push((b + 1) * (12 * a + c) + 4 * b * (b + 1) / 2);
                want[2].push((c + 1) * (12 * a + 4 * b) + c * (c + 1) / 2);
            }
        }
    }
    assert_eq!(i64s(&out[0]), want[0]);
    assert_eq!(i64s(&out[1]), want[1]);
    assert_eq!(i64s(&out[2]), want[2]);
    assert_eq!(i64s(&out[3]), want[2]);
    assert_eq!(i64s(&out[4]), want[0]);

    // The running max and min of a signed rank-3 tensor along its middle dim, by DSL.
    let f = dsl_fusion(
        "fn f(x: Tensor<f64, [_, _, _]>) -> (Tensor<f64, [_, _, _]>, Tensor<f64, [_, _, _]>) {
            (x.cummax(1), x.cummin(-2))
        }",
    );
    // [2, 3, 2]: lane (0, :, 0) = [3, -1, 5], (0, :, 1) = [-4, 2, 0], (1, :, 0) = [0, 0, -7],
    // (1, :, 1) = [2.5, 9, 1].
    let x = [
        3.0, -4.0, -1.0, 2.0, 5.0, 0.0, 0.0, 2.5, 0.0, 9.0, -7.0, 1.0,
    ];
    let out = run(&f, vec![t(&x, &[2, 3, 2])]);
    assert_eq!(
        f64s(&out[0]),
        [3.0, -4.0, 3.0, 2.0, 5.0, 2.0, 0.0, 2.5, 0.0, 9.0, 0.0, 9.0]
    );
    assert_eq!(
        f64s(&out[1]),
        [3.0, -4.0, -1.0, -4.0, -1.0, -4.0, 0.0, 2.5, 0.0, 2.5, -7.0, 1.0]
    );
}

#[test]
fn integer_and_bool_scans_follow_pytorch_dtypes() {
    let f = fusion(|fd| {
        let i = fd.define_tensor(DataType::I32, &[-1])?;
        let b = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![
            fd.cumsum(i, 0)?,
            fd.cumprod(i, 0)?,
            fd.cummax(i, 0)?,
            fd.cummin(i, 0)?,
            fd.cumsum(b, 0)?,
            fd.cumprod(b, 0)?,
            fd.cummax(b, 0)?,
            fd.cummin(b, 0)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[i32::MAX, 1, -3, 2], &[4]),
            t(&[false, true, true, false, true], &[5]),
        ],
    );
    let dtypes: Vec<DataType> = out.iter().map(|o| o.dtype()).collect();
    use DataType::{Bool, I32, I64};
    assert_eq!(dtypes, [I64, I64, I32, I32, I64, I64, Bool, Bool]);
    // i32 sums run in i64: no wrap at i32::MAX.
    assert_eq!(
        i64s(&out[0]),
        [2_147_483_647, 2_147_483_648, 2_147_483_645, 2_147_483_647]
    );
    assert_eq!(
        i64s(&out[1]),
        [
            2_147_483_647,
            2_147_483_647,
            -6_442_450_941,
            -12_884_901_882
        ]
    );
    assert_eq!(i32s(&out[2]), [i32::MAX; 4]);
    assert_eq!(i32s(&out[3]), [i32::MAX, 1, -3, -3]);
    // Bools: a count of the trues, 1 up to the first false, running any, running all.
    assert_eq!(i64s(&out[4]), [0, 1, 2, 2, 3]);
    assert_eq!(i64s(&out[5]), [0, 0, 0, 0, 0]);
    assert_eq!(bools(&out[6]), [false, true, true, true, true]);
    assert_eq!(bools(&out[7]), [false, false, false, false, false]);
    let out = run(
        &f,
        vec![t(&[1i32], &[1]), t(&[true, true, false, true], &[4])],
    );
    assert_eq!(i64s(&out[5]), [1, 1, 0, 0]);
    assert_eq!(bools(&out[7]), [true, true, false, false]);
    // The bool sum is a cast to i64, then the scan; cummax of bool scans the bool.
    let ops: Vec<String> = f.exprs().map(|(_, e)| e.op.name().to_string()).collect();
    assert_eq!(
        ops,
        [
            "cast", "cumsum", "cast", "cumprod", "cummax", "cummin", "cast", "cumsum", "cast",
            "cumprod", "cummax", "cummin"
        ]
    );
}

#[test]
fn i64_products_and_sums_wrap_around() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.cumprod(x, 1)?, fd.cumsum(x, 1)?])
    });
    let out = run(&f, vec![t(&[1 << 62, 4, 3, i64::MAX, 2, 1], &[2, 3])]);
    // 2^62 * 4 = 2^64 = 0 (mod 2^64), and stays 0; (2^63 - 1) * 2 = 2^64 - 2 = -2.
    assert_eq!(i64s(&out[0]), [1 << 62, 0, 0, i64::MAX, -2, -2]);
    // 2^62 + 4 + 3; i64::MAX + 2 wraps to i64::MIN + 1.
    assert_eq!(
        i64s(&out[1]),
        [
            1 << 62,
            (1 << 62) + 4,
            (1 << 62) + 7,
            i64::MAX,
            i64::MIN + 1,
            i64::MIN + 2
        ]
    );
}

#[test]
fn half_sums_accumulate_in_f32() {
    // In f16 steps 2048 + 1 rounds back to 2048 (the spacing is 2 there), so an f16
    // running sum would stay at 2048. The scan runs in f32 and rounds each element to
    // f16 once: 2049 -> 2048 (a tie, to even), 2050, 2051 -> 2052 (a tie, to even), 2052.
    let f = fusion(|fd| {
        let h = fd.define_tensor(DataType::F16, &[-1])?;
        let b = fd.define_tensor(DataType::BF16, &[-1])?;
        Ok(vec![fd.cumsum(h, 0)?, fd.cumsum(b, 0)?, fd.cumprod(h, 0)?])
    });
    let h: Vec<f16> = [2048.0, 1.0, 1.0, 1.0, 1.0]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    // bf16 has spacing 2 at 256.
    let b: Vec<bf16> = [256.0, 1.0, 1.0, 1.0, 1.0]
        .iter()
        .map(|&v| bf16::from_f32(v))
        .collect();
    let out = run(&f, vec![t(&h, &[5]), t(&b, &[5])]);
    assert_eq!(out[0].dtype(), DataType::F16);
    let got: Vec<f32> = out[0]
        .to_vec::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [2048.0, 2048.0, 2050.0, 2052.0, 2052.0]);
    let mut h16 = f16::from_f32(2048.0);
    for _ in 0..4 {
        h16 = f16::from_f32(h16.to_f32() + 1.0);
    }
    assert_eq!(h16.to_f32(), 2048.0, "f16 steps would stick");
    assert_eq!(out[1].dtype(), DataType::BF16);
    let got: Vec<f32> = out[1]
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [256.0, 256.0, 258.0, 260.0, 260.0]);
    // The product: 2048 * 1 * ... = 2048.
    let got: Vec<f32> = out[2]
        .to_vec::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [2048.0; 5]);
    // The IR: cast to f32, the scan in f32, cast back.
    let first: Vec<(String, DataType)> = f
        .exprs()
        .take(3)
        .map(|(_, e)| (e.op.name().to_string(), f.val(e.outputs[0]).dtype))
        .collect();
    assert_eq!(
        first,
        [
            ("cast".to_string(), DataType::F32),
            ("cumsum".to_string(), DataType::F32),
            ("cast".to_string(), DataType::F16)
        ]
    );

    // f32: the running value is f64 and each element rounds once. 1 + 2^-25 and
    // 1 + 2^-24 (a tie) round to 1, 1 + 3 * 2^-25 to 1 + 2^-23 (an f32 running value
    // would stay at 1: within `Tolerance::for_scan`).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![fd.cumsum(x, 0)?])
    });
    let tiny = 2f32.powi(-25);
    let out = run(&f, vec![t(&[1.0, tiny, tiny, tiny], &[4])]);
    assert_eq!(f32s(&out[0]), [1.0, 1.0, 1.0, 1.0 + 2f32.powi(-23)]);
}

#[test]
fn nan_infinities_and_signed_zeros() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![
            fd.cummax(x, 0)?,
            fd.cummin(x, 0)?,
            fd.cumsum(x, 0)?,
            fd.cumprod(x, 0)?,
        ])
    });
    let out = run(&f, vec![t(&[1.0f32, f32::NAN, 3.0, 0.5], &[4])]);
    for (k, o) in out.iter().enumerate() {
        let v = f32s(o);
        assert_eq!(v[0], 1.0, "output {k}");
        assert!(v[1..].iter().all(|x| x.is_nan()), "output {k}: {v:?}");
    }
    // Infinities: inf + -inf is NaN from there on; a max keeps inf.
    let out = run(&f, vec![t(&[f32::INFINITY, f32::NEG_INFINITY, 1.0], &[3])]);
    assert_eq!(f32s(&out[0]), [f32::INFINITY; 3]);
    assert_eq!(
        f32s(&out[1]),
        [f32::INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY]
    );
    let s = f32s(&out[2]);
    assert_eq!(s[0], f32::INFINITY);
    assert!(s[1].is_nan() && s[2].is_nan());
    assert_eq!(
        f32s(&out[3]),
        [f32::INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY]
    );

    // -0 orders below +0 (as maximum/minimum); element 0 is the input itself.
    let bits =
        |o: &HostTensor| -> Vec<bool> { f32s(o).iter().map(|v| v.is_sign_negative()).collect() };
    let out = run(&f, vec![t(&[-0.0f32, 0.0], &[2])]);
    assert_eq!(bits(&out[0]), [true, false], "cummax([-0, +0]) = [-0, +0]");
    assert_eq!(bits(&out[1]), [true, true], "cummin([-0, +0]) = [-0, -0]");
    let out = run(&f, vec![t(&[0.0f32, -0.0], &[2])]);
    assert_eq!(bits(&out[0]), [false, false], "cummax([+0, -0]) = [+0, +0]");
    assert_eq!(bits(&out[1]), [false, true], "cummin([+0, -0]) = [+0, -0]");
    let out = run(&f, vec![t(&[-0.0f32, -0.0], &[2])]);
    assert_eq!(bits(&out[2]), [true, true], "cumsum([-0, -0]) = [-0, -0]");
}

#[test]
fn empty_and_size_one_dims() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![
            fd.cumsum(x, 0)?,
            fd.cummax(x, 1)?,
            fd.cummin(x, 0)?,
            fd.cumprod(x, 1)?,
        ])
    });
    // An empty scanned dim (or another empty dim) gives an empty output; nothing is
    // refused, unlike max/min reductions over an empty dim.
    for shape in [[2usize, 0], [0, 3]] {
        let out = run(&f, vec![t::<f32>(&[], &shape)]);
        for o in &out {
            assert_eq!(o.shape(), shape);
        }
    }
    // A dim of size 1 (symbolic, so not a broadcast): the scan along it is the input.
    let out = run(&f, vec![t(&[1.5f32, -2.0, 3.0], &[1, 3])]);
    assert_eq!(f32s(&out[0]), [1.5, -2.0, 3.0]);
    assert_eq!(f32s(&out[2]), [1.5, -2.0, 3.0]);
    assert_eq!(f32s(&out[1]), [1.5, 1.5, 3.0]);
    let out = run(&f, vec![t(&[1.5f32, -2.0, 3.0], &[3, 1])]);
    assert_eq!(f32s(&out[1]), [1.5, -2.0, 3.0]);
    assert_eq!(f32s(&out[3]), [1.5, -2.0, 3.0]);
    assert_eq!(f32s(&out[0]), [1.5, -0.5, 2.5]);

    // A scanned broadcast dim stays a broadcast dim.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[1, -1])?;
        Ok(vec![fd.cumsum(x, 0)?, fd.cumsum(x, 1)?])
    });
    let kinds = |k: usize| output_kinds(&f, k);
    assert_eq!(kinds(0), [IterKind::Broadcast, IterKind::Iteration]);
    let out = run(&f, vec![t(&[2.0f32, 3.0], &[1, 2])]);
    assert_eq!(f32s(&out[0]), [2.0, 3.0]);
    assert_eq!(f32s(&out[1]), [2.0, 5.0]);
}

#[test]
fn a_scan_along_an_expanded_dim_counts_the_copies() {
    // x [3] -> broadcast [1, 3] -> expand [n, 3]: every row is x; the cumsum down the
    // expanded dim is x, 2x, 3x, ..., an ordinary dim.
    let build = |fd: &mut FusionDefinition| -> Result<Vec<ValId>> {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let n = fd.define_scalar(DataType::I64)?;
        let b = fd.broadcast(x, &[true, false])?;
        let e = fd.expand(b, &[Size::Val(n), Size::Const(-1)])?;
        Ok(vec![fd.cumsum(e, 0)?, fd.cummax(e, 0)?, fd.cumsum(e, 1)?])
    };
    let f = fusion(build);
    let parsed = dsl_fusion(
        "fn f(x: Tensor<f32, [_]>, n: i64) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
            let e = x.broadcast([true, false]).expand([n, -1]);
            (e.cumsum(0), e.cummax(0), e.cumsum(axis = 1))
        }",
    );
    assert!(parsed == f, "{parsed}\n{f}");
    let kinds = |k: usize| output_kinds(&f, k);
    assert_eq!(kinds(0), [IterKind::Iteration, IterKind::Iteration]);
    // Scanned along the other dim, the expanded dim stays expanded.
    assert_eq!(kinds(2), [IterKind::Expanded, IterKind::Iteration]);
    let out = run(&f, vec![t(&[1.0f32, -0.5, 3.0], &[3]), 4i64.into()]);
    assert_eq!(out[0].shape(), [4, 3]);
    assert_eq!(
        f32s(&out[0]),
        [1.0, -0.5, 3.0, 2.0, -1.0, 6.0, 3.0, -1.5, 9.0, 4.0, -2.0, 12.0]
    );
    assert_eq!(f32s(&out[1]), [1.0, -0.5, 3.0].repeat(4));
    assert_eq!(f32s(&out[2]), [1.0, 0.5, 3.5].repeat(4));
}

#[test]
fn a_0d_tensor_is_its_own_scan() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[])?;
        let b = fd.define_tensor(DataType::Bool, &[])?;
        Ok(vec![
            fd.cumsum(x, 0)?,
            fd.cummax(x, -1)?,
            fd.cumsum(b, -1)?,
            fd.cumprod(b, 0)?,
        ])
    });
    assert!(
        scans(&f).is_empty(),
        "no scan expression for a 0-d tensor:\n{f}"
    );
    let out = run(&f, vec![t(&[2.5f32], &[]), t(&[true], &[])]);
    assert_eq!(out[0].shape(), [] as [usize; 0]);
    assert_eq!(f32s(&out[0]), [2.5]);
    assert_eq!(f32s(&out[1]), [2.5]);
    assert_eq!(out[2].dtype(), DataType::I64);
    assert_eq!(i64s(&out[2]), [1]);
    assert_eq!(i64s(&out[3]), [1]);
    // The same through the language.
    let parsed = dsl_fusion(
        "fn f(x: Tensor<f32, []>, b: Tensor<bool, []>) -> (Tensor<f32, []>, Tensor<f32, []>, Tensor<i64, []>, Tensor<i64, []>) {
            (x.cumsum(0), cummax(x, -1), b.cumsum(-1), b.cumprod(axis = 0))
        }",
    );
    assert!(parsed == f, "{parsed}\n{f}");
}

#[test]
fn an_axis_out_of_range_is_a_typed_error() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    for (op, axis) in [(ScanOp::Sum, 2i64), (ScanOp::Max, -3), (ScanOp::Prod, 7)] {
        match fd.scan(op, x, axis) {
            Err(Error::AxisOutOfRange {
                op: name,
                axis: a,
                rank,
            }) => {
                assert_eq!((name.as_str(), a, rank), (op.name(), axis, 2));
            }
            other => panic!("{}: expected AxisOutOfRange, got {other:?}", op.name()),
        }
    }
    assert_eq!(
        fd.cumsum(x, 2).unwrap_err().to_string(),
        "cumsum: axis 2 is out of range for a tensor of rank 2 (expected -2..2)"
    );
    let z = fd.define_tensor(DataType::F32, &[]).unwrap();
    assert!(matches!(
        fd.cummin(z, 1),
        Err(Error::AxisOutOfRange { axis: 1, .. })
    ));
    // The language reports the builder's error at the axis.
    let src = "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x.cumprod(-3) }";
    let errs = dsl::build_str(src).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message,
        "cumprod: axis -3 is out of range for a tensor of rank 2 (expected -2..2)"
    );
    assert_eq!(errs[0].line_column(), (1, 65));

    // IR whose scan axis is past the input's rank (edited by hand) is refused by the
    // evaluator with the same error, not a panic.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![fd.cumsum(x, 0)?])
    });
    let mut json = serde_json::to_value(&f).unwrap();
    let mut edited = 0;
    for e in json["exprs"].as_array_mut().unwrap() {
        if let Some(scan) = e.pointer_mut("/op/Scan") {
            scan["axis"] = 1.into();
            edited += 1;
        }
    }
    assert_eq!(edited, 1, "{json}");
    let broken: Fusion = serde_json::from_value(json).unwrap();
    assert_eq!(scans(&broken), [(ScanOp::Sum, 1)]);
    let e = err(&broken, vec![t(&[1.0f32, 2.0], &[2])]);
    assert!(
        e.contains("cumsum: axis 1 is out of range for a tensor of rank 1"),
        "{e}"
    );
}

#[test]
fn printers_show_scans_and_the_reproducer_round_trips() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::BF16, &[-1, 8])?;
        let i = fd.define_tensor(DataType::I32, &[-1, 8])?;
        let s = fd.cumsum(x, -1)?;
        let p = fd.cumprod(i, 0)?;
        let m = fd.cummax(s, 0)?;
        let n = fd.cummin(i, 1)?;
        Ok(vec![m, p, n])
    });
    let math = f.to_string();
    for line in [
        "T3 = cumsum(T2, axis=1) : f32[T0.size(0), 8]",
        "T6 = cumprod(T5, axis=0) : i64[T1.size(0), 8]",
        "T7 = cummax(T4, axis=0) : bf16[T0.size(0), 8]",
        "T8 = cummin(T1, axis=1) : i32[T1.size(0), 8]",
    ] {
        assert!(math.contains(line), "{line} missing from\n{math}");
    }
    let src = f.to_reproducer("scans");
    for call in [
        "let t3 = t2.cumsum(1);",
        "let t6 = t5.cumprod(0);",
        "let t7 = t4.cummax(0);",
        "let t8 = t1.cummin(1);",
    ] {
        assert!(src.contains(call), "{call} missing from\n{src}");
    }
    let rebuilt = dsl_fusion(&src);
    assert!(rebuilt == f, "{rebuilt}\n{f}");
    assert_eq!(rebuilt.structural_hash(), f.structural_hash());
    // The rebuilt fusion computes the same values.
    let x: Vec<bf16> = (0..16)
        .map(|k| bf16::from_f32(k as f32 * 0.5 - 3.0))
        .collect();
    let i: Vec<i32> = (0..16).map(|k| (k % 5) - 2).collect();
    let inputs: Vec<EvalInput> = vec![t(&x, &[2, 8]), t(&i, &[2, 8])];
    let a = evaluate(&f, &inputs).unwrap();
    let b = evaluate(&rebuilt, &inputs).unwrap();
    assert_eq!(a, b);
    // Row 0 of the bf16 cumsum: -3, -5.5, -7.5, -9, -10, -10.5, -10.5, -10.
    let row0: Vec<f32> = a[0].to_vec::<bf16>().unwrap()[..8]
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(row0, [-3.0, -5.5, -7.5, -9.0, -10.0, -10.5, -10.5, -10.0]);
}

#[test]
fn cumsum_and_cumprod_take_a_dtype_by_builder_and_by_dsl() {
    let built = fusion(|fd| {
        let h = fd.define_tensor(DataType::F16, &[-1])?;
        let i = fd.define_tensor(DataType::I32, &[-1])?;
        let b = fd.define_tensor(DataType::Bool, &[-1])?;
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![
            fd.cumsum_as(h, 0, DataType::F32)?,
            fd.cumsum_as(i, 0, DataType::I32)?,
            fd.scan_as(ScanOp::Prod, i, -1, DataType::I32)?,
            fd.cumsum_as(b, 0, DataType::F32)?,
            fd.cumprod_as(x, 0, DataType::F64)?,
        ])
    });
    let parsed = dsl_fusion(
        "fn f(h: Tensor<f16, [_]>, i: Tensor<i32, [_]>, b: Tensor<bool, [_]>, x: Tensor<f32, [_]>)
            -> (Tensor<f32, [_]>, Tensor<i32, [_]>, Tensor<i32, [_]>, Tensor<f32, [_]>,
                Tensor<f64, [_]>) {
            (h.cumsum(0, dtype = f32), cumsum(i, 0, dtype = i32),
             i.cumprod(axis = -1, dtype = i32), cumsum(b, axis = 0, dtype = f32),
             x.cumprod(0, dtype = f64))
        }",
    );
    assert!(parsed == built, "{parsed}\n{built}");
    // 2049 and 2051 are no f16 values: an f16 result (or f16 steps) would lose them.
    let h: Vec<f16> = [2048.0, 1.0, 1.0, 1.0, 1.0]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let inputs = || {
        vec![
            t(&h, &[5]),
            t(&[i32::MAX, 1, 1, i32::MIN], &[4]),
            t(&[true, false, true, true], &[4]),
            t(&[4097.0f32, 4097.0, 4097.0], &[3]),
        ]
    };
    for f in [&built, &parsed] {
        let out = run(f, inputs());
        let dtypes: Vec<DataType> = out.iter().map(|o| o.dtype()).collect();
        use DataType::{F32, F64, I32};
        assert_eq!(dtypes, [F32, I32, I32, F32, F64]);
        assert_eq!(f32s(&out[0]), [2048.0, 2049.0, 2050.0, 2051.0, 2052.0]);
        // i32 sums wrap in i32: MAX + 1 = MIN, MIN + 1, (MIN + 1) + MIN = 1 - 2^32 = 1.
        assert_eq!(i32s(&out[1]), [i32::MAX, i32::MIN, i32::MIN + 1, 1]);
        // MAX * MIN = 2^31 - 2^62 = 2^31 (mod 2^32), which is MIN as an i32.
        assert_eq!(i32s(&out[2]), [i32::MAX, i32::MAX, i32::MAX, i32::MIN]);
        assert_eq!(f32s(&out[3]), [1.0, 1.0, 2.0, 3.0]);
        // 4097^2 = 16785409 (odd, above 2^24: no f32) and 4097^3 = 68769820673, exact in f64.
        assert_eq!(f64s(&out[4]), [4097.0, 16_785_409.0, 68_769_820_673.0]);
    }
    // The IR: the input cast to the dtype, the scan (an i32 one in i64), the result cast
    // to the dtype; an input already of the dtype is not cast.
    let ops: Vec<(String, DataType)> = built
        .exprs()
        .map(|(_, e)| (e.op.name().to_string(), built.val(e.outputs[0]).dtype))
        .collect();
    let ops: Vec<(&str, DataType)> = ops.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    use DataType::{F32, F64, I32, I64};
    assert_eq!(
        ops,
        [
            ("cast", F32),
            ("cumsum", F32),
            ("cast", I64),
            ("cumsum", I64),
            ("cast", I32),
            ("cast", I64),
            ("cumprod", I64),
            ("cast", I32),
            ("cast", F32),
            ("cumsum", F32),
            ("cast", F64),
            ("cumprod", F64),
        ]
    );
    // The reproducer spells the casts, and rebuilds the same fusion.
    let src = built.to_reproducer("scans_as");
    let rebuilt = dsl_fusion(&src);
    assert!(rebuilt == built, "{rebuilt}\n{built}\n{src}");
    assert_eq!(evaluate(&rebuilt, &inputs()), evaluate(&built, &inputs()));
}

#[test]
fn a_refused_scan_dtype_is_a_typed_error_and_leaves_no_expression() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, -1]).unwrap();
    let refusals = [
        (ScanOp::Max, 0, DataType::F32, "cumsum and cumprod only"),
        (ScanOp::Min, 1, DataType::F64, "cumsum and cumprod only"),
        (ScanOp::Sum, 0, DataType::Bool, "a numeric dtype argument"),
        (ScanOp::Prod, -1, DataType::Bool, "a numeric dtype argument"),
        (ScanOp::Sum, 2, DataType::F32, "out of range"),
        (ScanOp::Prod, -3, DataType::I64, "out of range"),
    ];
    for (op, axis, dtype, what) in refusals {
        let e = fd.scan_as(op, x, axis, dtype).unwrap_err();
        assert!(e.to_string().starts_with(op.name()), "{e}");
        assert!(e.to_string().contains(what), "{e}");
        assert_eq!(fd.fusion().exprs().count(), 0, "{op:?} {axis} {dtype:?}");
    }
    assert!(matches!(
        fd.cumsum_as(x, 2, DataType::F32),
        Err(Error::AxisOutOfRange {
            axis: 2,
            rank: 2,
            ..
        })
    ));
    assert!(matches!(
        fd.cumprod_as(x, 0, DataType::Bool),
        Err(Error::DType { .. })
    ));
    let s = fd.define_scalar(DataType::F32).unwrap();
    assert!(fd.cumsum_as(s, 0, DataType::F64).is_err());
    assert_eq!(fd.fusion().exprs().count(), 0);
    // The language: cummax has no dtype; a bool dtype is the builder's error.
    let src = "fn f(x: Tensor<f32, [_]>) -> Tensor<f32, [_]> { x.cummax(0, dtype = f32) }";
    let errs = dsl::build_str(src).unwrap_err();
    assert!(
        errs[0].message.contains("`cummax` has no argument `dtype`"),
        "{errs:?}"
    );
    let src = "fn f(x: Tensor<f32, [_]>) -> Tensor<f32, [_]> { x.cumsum(0, dtype = bool) }";
    let errs = dsl::build_str(src).unwrap_err();
    assert!(
        errs[0].message.contains("a numeric dtype argument"),
        "{errs:?}"
    );
}

/// The dim kinds of output `k` of `f`.
fn output_kinds(f: &Fusion, k: usize) -> Vec<IterKind> {
    let o = f.outputs()[k].val;
    f.tensor_type(o)
        .unwrap()
        .domain
        .iter()
        .map(|d| d.kind)
        .collect()
}
