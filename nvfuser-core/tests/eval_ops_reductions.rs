//! The CPU reference evaluator, op by op: reductions (keepdim, negative axes, dtypes,
//! NaN, var / var_mean / welford), random ops (uniform and normal against philox), and
//! the rest (set and aliased outputs, scalar inputs, a large LayerNorm, broadcast dims
//! meeting expanded dims, f32 rounding of f32::MAX rows). Every expected value is
//! computed by hand (or with `std`) in the test, never with the evaluator's own helpers.

mod common;

use common::{f32s, f64s, fusion, i32s, i64s, run, t};
use half::{bf16, f16};
use nvfuser_core::builder::Slice;
use nvfuser_core::eval::{EvalInput, HostTensor};
use nvfuser_core::ir::ReductionOp;
use nvfuser_core::prelude::*;

// ----- reductions -----

const X23: [f32; 6] = [1.0, -2.0, 3.5, 4.0, 0.5, -6.0];

#[test]
fn reductions_with_keepdim_and_negative_axes() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![
            fd.sum(x, &[-1], false)?,
            fd.sum(x, &[-1], true)?,
            fd.sum(x, &[0, 1], false)?,
            fd.prod(x, &[0], false)?,
            fd.max(x, &[1], false)?,
            fd.min(x, &[-2], true)?,
            fd.mean(x, &[0], false)?,
        ])
    });
    let out = run(&f, vec![t(&X23, &[2, 3])]);
    assert_eq!(out[0].shape(), [2]);
    assert_eq!(f32s(&out[0]), [2.5, -1.5]);
    assert_eq!(out[1].shape(), [2, 1]);
    assert_eq!(f32s(&out[1]), [2.5, -1.5]);
    assert_eq!(out[2].shape(), [] as [usize; 0]);
    assert_eq!(f32s(&out[2]), [1.0]);
    assert_eq!(f32s(&out[3]), [4.0, -1.0, -21.0]);
    assert_eq!(f32s(&out[4]), [3.5, 4.0]);
    assert_eq!(out[5].shape(), [1, 3]);
    assert_eq!(f32s(&out[5]), [1.0, -2.0, -6.0]);
    assert_eq!(f32s(&out[6]), [2.5, -0.75, -1.25]);

    // 3-D: x[a][b][c] = (12a + 4b + c) / 2 - 3; summing over c and a leaves 6 + 16b.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1, -1])?;
        Ok(vec![fd.sum(x, &[-1, 0], true)?])
    });
    let data: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    assert_eq!(out[0].shape(), [1, 3, 1]);
    assert_eq!(f64s(&out[0]), [6.0, 22.0, 38.0]);
}

#[test]
fn reduction_dtypes_and_nan() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.max(x, &[1], false)?, fd.min(x, &[0], false)?])
    });
    let out = run(&f, vec![t(&[1.0f32, f32::NAN, 2.0, 3.0], &[2, 2])]);
    let m = f32s(&out[0]);
    assert!(m[0].is_nan());
    assert_eq!(m[1], 3.0);
    let m = f32s(&out[1]);
    assert_eq!(m[0], 1.0);
    assert!(m[1].is_nan());

    // i32 sums accumulate (and return) i64; bool sums count.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![
            fd.sum(x, &[1], false)?,
            fd.max(x, &[1], false)?,
            fd.sum(b, &[0], false)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[i32::MAX, 1, -4, -9], &[2, 2]),
            t(&[true, false, true], &[3]),
        ],
    );
    assert_eq!(out[0].dtype(), DataType::I64);
    assert_eq!(i64s(&out[0]), [2_147_483_648, -13]);
    assert_eq!(i32s(&out[1]), [i32::MAX, -4]);
    assert_eq!(i64s(&out[2]), [2]);

    // bf16 sums run in f32: 1 + 2^-8 + 2^-8 = 1 + 2^-7 (bf16 steps would stick at 1).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::BF16, &[-1])?;
        Ok(vec![fd.sum(x, &[0], false)?])
    });
    let v = [
        bf16::from_f32(1.0),
        bf16::from_f32(0.00390625),
        bf16::from_f32(0.00390625),
    ];
    let out = run(&f, vec![t(&v, &[3])]);
    assert_eq!(out[0].dtype(), DataType::BF16);
    assert_eq!(
        out[0].to_vec::<bf16>().unwrap(),
        [bf16::from_f32(1.0078125)]
    );
}

#[test]
fn var_with_corrections_var_mean_and_welford() {
    let rows = [1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 4.0, 6.0];
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let v0 = fd.var(x, &[1], 0, false)?;
        let v1 = fd.var(x, &[-1], 1, true)?;
        let (v, m) = fd.var_mean(x, &[1], 1, false)?;
        let (wm, ws, wc) = fd.welford(x, &[1])?;
        Ok(vec![v0, v1, v, m, wm, ws, wc])
    });
    let out = run(&f, vec![t(&rows, &[2, 4])]);
    // Row 0: mean 2.5, M2 = 2.25 + 0.25 + 0.25 + 2.25 = 5; row 1: mean 4, M2 = 8.
    assert_eq!(f64s(&out[0]), [1.25, 2.0]);
    assert_eq!(out[1].shape(), [2, 1]);
    assert_eq!(f64s(&out[1]), [5.0 / 3.0, 8.0 / 3.0]);
    assert_eq!(f64s(&out[2]), [5.0 / 3.0, 8.0 / 3.0]);
    assert_eq!(f64s(&out[3]), [2.5, 4.0]);
    assert_eq!(f64s(&out[4]), [2.5, 4.0]);
    assert_eq!(f64s(&out[5]), [5.0, 8.0]);
    assert_eq!(out[6].dtype(), DataType::I64);
    assert_eq!(out[6].shape(), [2]);
    assert_eq!(i64s(&out[6]), [4, 4]);

    // n <= correction: M2 / 0 is inf, or NaN when M2 = 0 (as PyTorch).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.var(x, &[1], 2, false)?, fd.var(x, &[1], 5, false)?])
    });
    let out = run(&f, vec![t(&[3.0f32, 5.0], &[1, 2])]);
    assert_eq!(f32s(&out[0]), [f32::INFINITY]);
    assert_eq!(f32s(&out[1]), [f32::INFINITY]);
    let out = run(&f, vec![t(&[7.0f32], &[1, 1])]);
    assert!(f32s(&out[0])[0].is_nan());
}

// ----- random -----

#[test]
fn uniform_and_normal_follow_philox() {
    use nvfuser_core::philox;
    let f = fusion(|fd| {
        let seed = fd.define_scalar(DataType::I64)?;
        let offset = fd.define_scalar(DataType::I64)?;
        let lo = fd.constant(-1.5);
        let hi = fd.constant(2.5);
        let mean = fd.constant(0.5);
        let std = fd.constant(2.0);
        let s = [Size::Const(2), Size::Const(3)];
        Ok(vec![
            fd.uniform(&s, lo, hi, seed, offset, DataType::F32)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::F64)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::BF16)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::F16)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F32)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F64)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F16)?,
        ])
    });
    for (seed, offset) in [(1234i64, 7i64), (-5, 0), (0, 1 << 40)] {
        let out = run(&f, vec![seed.into(), offset.into()]);
        let (s, o) = (seed as u64, offset as u64);
        let uf32: Vec<f32> = (0..6)
            .map(|i| philox::uniform_f32(s, o, i, -1.5, 2.5))
            .collect();
        assert_eq!(f32s(&out[0]), uf32);
        let uf64: Vec<f64> = (0..6)
            .map(|i| philox::uniform_f64(s, o, i, -1.5, 2.5))
            .collect();
        assert_eq!(f64s(&out[1]), uf64);
        let ubf: Vec<bf16> = uf32.iter().map(|&v| bf16::from_f32(v)).collect();
        assert_eq!(out[2].to_vec::<bf16>().unwrap(), ubf);
        let uh: Vec<f16> = uf32.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(out[3].to_vec::<f16>().unwrap(), uh);
        let nf32: Vec<f32> = (0..6)
            .map(|i| philox::normal_f32_as_f64(s, o, i, 0.5, 2.0) as f32)
            .collect();
        assert_eq!(f32s(&out[4]), nf32);
        let nf64: Vec<f64> = (0..6)
            .map(|i| philox::normal_f64(s, o, i, 0.5, 2.0))
            .collect();
        assert_eq!(f64s(&out[5]), nf64);
        let nh: Vec<f16> = (0..6)
            .map(|i| f16::from_f32(philox::normal_f32_as_f64(s, o, i, 0.5, 2.0) as f32))
            .collect();
        assert_eq!(out[6].to_vec::<f16>().unwrap(), nh);
        for v in f64s(&out[1]) {
            assert!((-1.5..2.5).contains(&v), "{v}");
        }
        let distinct: std::collections::HashSet<u64> = uf64.iter().map(|v| v.to_bits()).collect();
        assert_eq!(distinct.len(), 6);
    }

    // The documented known value: seed 0, offset 0, element 0 of uniform(0, 1) in f32.
    let f = fusion(|fd| {
        let zero = fd.constant(0i64);
        let lo = fd.constant(0.0);
        let hi = fd.constant(1.0);
        let n = fd.define_scalar(DataType::I64)?;
        Ok(vec![
            fd.uniform(&[Size::Val(n)], lo, hi, zero, zero, DataType::F32)?,
            fd.normal(&[Size::Val(n)], lo, hi, zero, zero, DataType::F32)?,
        ])
    });
    let out = run(&f, vec![10_000i64.into()]);
    // 0x6627e8 * 2^-24 = 0.399046421051025390625, f32 bits 0x3ecc4fd0.
    assert_eq!(
        out[0].get_f64(&[0]).unwrap(),
        0x6627e8 as f64 / 16_777_216.0
    );
    assert_eq!(
        (out[0].get_f64(&[0]).unwrap() as f32).to_bits(),
        0x3ecc_4fd0
    );
    let u = out[0].to_f64_vec();
    assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
    let mean = u.iter().sum::<f64>() / u.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "uniform mean {mean}");
    let n = out[1].to_f64_vec();
    let mean = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n.len() as f64;
    assert!(
        mean.abs() < 0.05 && (var.sqrt() - 1.0).abs() < 0.05,
        "normal mean {mean}, std {}",
        var.sqrt()
    );
}

// ----- misc -----

#[test]
fn set_segment_set_and_aliased_outputs() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let s = fd.set(x).unwrap();
    let g = fd.segment_set(s).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(g, two).unwrap();
    fd.add_output_alias(y, x).unwrap();
    fd.add_output(g).unwrap();
    fd.add_output(x).unwrap();
    let f = fd.finish().unwrap();
    let out = run(&f, vec![t(&[1.5f32, -4.0], &[2])]);
    assert_eq!(f32s(&out[0]), [3.0, -8.0]);
    assert_eq!(f32s(&out[1]), [1.5, -4.0]);
    assert_eq!(
        f32s(&out[2]),
        [1.5, -4.0],
        "the input itself is unchanged: in-place is a device concern"
    );
}

#[test]
fn scalar_inputs_convert_to_their_dtype() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F16, &[-1])?;
        let s = fd.define_scalar(DataType::F16)?;
        let k = fd.define_scalar(DataType::F32)?;
        let a = fd.add(x, s)?;
        Ok(vec![a, fd.mul(x, k)?])
    });
    let out = run(
        &f,
        vec![t(&[f16::from_f32(1.0)], &[1]), 0.1f64.into(), 3i64.into()],
    );
    // The f16 scalar input 0.1 is 0.0999755859375; 1 + that = 1.0999755859375 -> f16 1.099609375.
    assert_eq!(out[0].to_f64_vec(), [1.099609375]);
    assert_eq!(out[1].to_f64_vec(), [3.0]);
}

#[test]
fn large_inputs_evaluate_in_reasonable_time() {
    // A LayerNorm over 256 x 4096 (2^20 elements).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
        let w = fd.define_tensor(DataType::BF16, &[-1])?;
        let xf = fd.cast(x, DataType::F32)?;
        let (var, mean) = fd.var_mean(xf, &[1], 0, true)?;
        let eps = fd.constant(1e-5);
        let xc = fd.sub(xf, mean)?;
        let r = fd.add(var, eps)?;
        let r = fd.rsqrt(r)?;
        let y = fd.mul(xc, r)?;
        let wf = fd.cast(w, DataType::F32)?;
        let y = fd.mul(y, wf)?;
        Ok(vec![fd.cast(y, DataType::BF16)?])
    });
    let x = HostTensor::random(DataType::BF16, &[256, 4096], 1);
    let w = HostTensor::full(DataType::BF16, &[4096], 2.0).unwrap();
    let start = std::time::Instant::now();
    let out = run(&f, vec![x.into(), w.into()]);
    let elapsed = start.elapsed();
    assert_eq!(out[0].shape(), [256, 4096]);
    let row0: Vec<f64> = out[0].to_f64_vec()[..4096].to_vec();
    let mean = row0.iter().sum::<f64>() / 4096.0;
    let var = row0.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 4096.0;
    assert!(mean.abs() < 0.02, "{mean}");
    assert!((var - 4.0).abs() < 0.05, "{var}");
    assert!(elapsed.as_secs() < 60, "{elapsed:?}");
}

#[test]
fn broadcast_dims_meet_expanded_dims_in_cat_and_take_along_axis() {
    // x: [1, 3] with a broadcast dim 0; idx: an expanded [3, 2] (stride 0 in dim 0).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[1, -1])?;
        let i = fd.define_tensor_from_strides(DataType::I64, &[3, 2], &[0, 1], false)?;
        let e = fd.define_tensor_from_strides(DataType::F32, &[3, 2], &[0, 1], false)?;
        let x2 = fd.slice(x, &[Slice::all(), Slice::range(0i64, 2i64)])?;
        Ok(vec![fd.take_along_axis(x, i, 1)?, fd.cat(&[x2, e], 1)?])
    });
    let idx = HostTensor::from_strided(&[2i64, 0], &[3, 2], &[0, 1], 0).unwrap();
    let ex = HostTensor::from_strided(&[5.5f32, -6.5], &[3, 2], &[0, 1], 0).unwrap();
    let out = run(
        &f,
        vec![t(&[10.0f32, 20.0, 30.0], &[1, 3]), idx.into(), ex.into()],
    );
    assert_eq!(out[0].shape(), [3, 2]);
    assert_eq!(f32s(&out[0]), [30.0, 10.0].repeat(3));
    assert_eq!(out[1].shape(), [3, 4]);
    assert_eq!(f32s(&out[1]), [10.0, 20.0, 5.5, -6.5].repeat(3));
}

/// `uniform` covers [low, high): a draw that rounds up to `high` in the output dtype
/// becomes `low` (PyTorch's rule), and every other draw is the philox value rounded.
#[test]
fn uniform_bf16_never_returns_high() {
    let n = 40_000usize;
    let f = fusion(|fd| {
        let lo = fd.constant(0.0);
        let hi = fd.constant(1.0);
        let seed = fd.constant(7i64);
        let off = fd.constant(0i64);
        Ok(vec![fd.uniform(
            &[Size::Const(n as i64)],
            lo,
            hi,
            seed,
            off,
            DataType::BF16,
        )?])
    });
    let out = run(&f, vec![])[0].to_f64_vec();
    let mut wrapped = 0;
    for (i, &v) in out.iter().enumerate() {
        let raw = nvfuser_core::philox::uniform_f32(7, 0, i as u64, 0.0, 1.0);
        let rounded = bf16::from_f32(raw).to_f64();
        let want = if rounded >= 1.0 { 0.0 } else { rounded };
        assert_eq!(v, want, "element {i}");
        assert!((0.0..1.0).contains(&v), "element {i} = {v}");
        wrapped += (rounded >= 1.0) as usize;
    }
    // About 1 in 512 draws rounds up to 1.0 in bf16; the rule must have been exercised.
    assert!(wrapped > 10, "only {wrapped} draws rounded to high");
}

/// Issue #12 case 10: every f32 op rounds to f32 (the value model), as a kernel and
/// PyTorch compute. Rows of f32::MAX: RMSNorm's `x * x` overflows, so the result is 0;
/// LayerNorm through var_mean keeps the finite mean, so the result is the bias; an f32
/// mean of them overflows like its f32 sum.
#[test]
fn f32_max_rows_round_like_f32_kernels() {
    use nvfuser_core::workloads;
    let (rows, hidden) = (2usize, 64usize);
    let big = || t(&vec![f32::MAX; rows * hidden], &[rows, hidden]);
    let w: Vec<f32> = (0..hidden).map(|i| i as f32 * 0.25 - 3.0).collect();
    let b: Vec<f32> = (0..hidden).map(|i| 1.0 - i as f32 * 0.125).collect();
    let eps = EvalInput::Scalar(ScalarValue::Float(1e-5));
    let rms = workloads::rms_norm(DataType::F32).unwrap();
    let out = run(&rms, vec![big(), t(&w, &[hidden]), eps.clone()]);
    assert!(f32s(&out[0]).iter().all(|&v| v == 0.0));
    let ln = workloads::layer_norm(DataType::F32).unwrap();
    let out = run(&ln, vec![big(), t(&w, &[hidden]), t(&b, &[hidden]), eps]);
    assert_eq!(&f32s(&out[0])[..hidden], &b[..]);
    let mean = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.mean(x, &[1], false)?])
    });
    assert_eq!(f32s(&run(&mean, vec![big()])[0]), [f32::INFINITY; 2]);
    // In f64 the same values stay finite.
    let mean64 = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        Ok(vec![fd.mean(x, &[1], false)?])
    });
    let x64 = t(&[f32::MAX as f64; 4], &[1, 4]);
    assert_eq!(f64s(&run(&mean64, vec![x64])[0]), [f32::MAX as f64]);
}

#[test]
fn reduction_dtype_arguments_cast_first_and_return_that_dtype() {
    // 3 x 30000 in f16: the f16 sum rounds 90000 to inf (above 65504); summed into f32
    // it is exact. An i32 sum in i32 wraps; by default it widens to i64. A mean of
    // integers in f32, and a sum of f32 into f16.
    let f = fusion(|fd| {
        let h = fd.define_tensor(DataType::F16, &[-1])?;
        let i = fd.define_tensor(DataType::I32, &[-1])?;
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![
            fd.sum(h, &[0], false)?,
            fd.sum_as(h, &[0], false, DataType::F32)?,
            fd.sum(i, &[0], false)?,
            fd.sum_as(i, &[0], false, DataType::I32)?,
            fd.reduction_as(ReductionOp::Mean, i, &[0], true, DataType::F32)?,
            fd.reduction_as(ReductionOp::Prod, x, &[1], false, DataType::F64)?,
            fd.sum_as(x, &[0], false, DataType::F16)?,
        ])
    });
    let h = [f16::from_f32(30000.0); 3];
    let out = run(
        &f,
        vec![t(&h, &[3]), t(&[i32::MAX, 1, 2], &[3]), t(&X23, &[2, 3])],
    );
    assert_eq!(out[0].dtype(), DataType::F16);
    assert!(out[0].to_vec::<f16>().unwrap()[0].to_f32().is_infinite());
    assert_eq!(out[1].dtype(), DataType::F32);
    assert_eq!(f32s(&out[1]), [90000.0]);
    assert_eq!(out[2].dtype(), DataType::I64);
    assert_eq!(i64s(&out[2]), [i32::MAX as i64 + 3]);
    assert_eq!(out[3].dtype(), DataType::I32);
    assert_eq!(i32s(&out[3]), [i32::MIN + 2]);
    assert_eq!((out[4].dtype(), out[4].shape()), (DataType::F32, &[1][..]));
    assert_eq!(f32s(&out[4]), [(i32::MAX as f64 + 3.0) as f32 / 3.0]);
    assert_eq!(out[5].dtype(), DataType::F64);
    assert_eq!(f64s(&out[5]), [-7.0, -12.0]);
    assert_eq!(out[6].dtype(), DataType::F16);
    assert_eq!(
        out[6].to_vec::<f16>().unwrap(),
        [f16::from_f32(5.0), f16::from_f32(-1.5), f16::from_f32(-2.5)]
    );

    // The DSL takes it as a keyword; max and min have no dtype, and bool is refused.
    let dsl = nvfuser_core::dsl::build_str(
        "fn f(h: Tensor<f16, [N]>) -> Tensor<f32, []> { h.sum([0], dtype = f32) }",
    )
    .unwrap()
    .remove(0)
    .0;
    let out = run(&dsl, vec![t(&h, &[3])]);
    assert_eq!(f32s(&out[0]), [90000.0]);
    let err = nvfuser_core::dsl::build_str(
        "fn f(h: Tensor<f16, [N]>) -> Tensor<f32, []> { h.max([0], dtype = f32) }",
    )
    .unwrap_err();
    assert!(
        format!("{err:?}").contains("`max` has no argument `dtype`"),
        "{err:?}"
    );
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let e = fd
        .reduction_as(ReductionOp::Max, x, &[0], false, DataType::F64)
        .unwrap_err();
    assert!(e.to_string().contains("sum, prod and mean only"), "{e}");
    let e = fd.sum_as(x, &[0], false, DataType::Bool).unwrap_err();
    assert!(e.to_string().contains("a numeric dtype argument"), "{e}");
}
