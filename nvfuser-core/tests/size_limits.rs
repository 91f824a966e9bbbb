//! Sizes near `i64::MAX` and shapes too large to allocate are typed errors, never
//! panics (debug overflow checks), wrapped arithmetic (release) or allocation aborts.

use nvfuser_core::builder::Size;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor, MAX_HOST_BYTES};
use nvfuser_core::ir::MAX_NUMEL;
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{
    check_fits, compute_heuristics, DeviceInfo, HeuristicParams, InputInfo, RuntimeInfo,
};

fn is_size_limit(e: &Error) -> bool {
    matches!(e, Error::SizeLimit { .. })
}

#[track_caller]
fn expect_size_limit<T: std::fmt::Debug>(r: Result<T>, op: &str) {
    match r {
        Err(e) => {
            assert!(is_size_limit(&e), "expected Error::SizeLimit, found {e:?}");
            assert!(e.to_string().starts_with(op), "{e}");
        }
        Ok(v) => panic!("expected a size-limit error from {op}, found Ok({v:?})"),
    }
}

#[test]
fn pad_widths_near_i64_max_are_refused() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let zero = fd.constant(0.0);
    let r = fd.pad(x, &[(i64::MAX, i64::MAX)], zero);
    expect_size_limit(r, "pad");
    // Each width alone is also above the limit once added to a static size.
    let y = fd.define_tensor(DataType::F32, &[8]).unwrap();
    expect_size_limit(fd.pad(y, &[(0, i64::MAX)], zero), "pad");
}

#[test]
fn iota_of_i64_max_is_refused() {
    let mut fd = FusionDefinition::new();
    let (start, step) = (fd.constant(0i64), fd.constant(1i64));
    let r = fd.iota(Size::Const(i64::MAX), start, step, DataType::I64);
    expect_size_limit(r, "iota");
    let r = fd.iota(Size::Const(MAX_NUMEL + 1), start, step, DataType::I64);
    expect_size_limit(r, "iota");
    // At the limit, a definition is fine.
    fd.iota(Size::Const(MAX_NUMEL), start, step, DataType::I64)
        .unwrap();
}

#[test]
fn expand_to_i64_max_is_refused() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[1]).unwrap();
    expect_size_limit(fd.expand(x, &[Size::Const(i64::MAX)]), "expand");
}

#[test]
fn static_input_of_i64_max_by_4_is_refused() {
    let mut fd = FusionDefinition::new();
    let r = fd.define_tensor(DataType::F32, &[i64::MAX, 4]);
    expect_size_limit(r, "define_tensor");
    // Each dim within the limit, but not their product.
    let r = fd.define_tensor(DataType::F32, &[1 << 30, 1 << 30]);
    expect_size_limit(r, "define_tensor");
}

#[test]
fn other_ops_refuse_static_shapes_above_the_limit() {
    let mut fd = FusionDefinition::new();
    let z = fd.constant(0.0);
    expect_size_limit(fd.full(&[Size::Const(i64::MAX)], z, DataType::F32), "full");
    let r = fd.full(
        &[Size::Const(1 << 40), Size::Const(1 << 40)],
        z,
        DataType::F32,
    );
    expect_size_limit(r, "full");
    // Broadcasting two shapes within the limit into one above it.
    let a = fd.define_tensor(DataType::F32, &[1 << 30, 1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[1, 1 << 30]).unwrap();
    expect_size_limit(fd.add(a, b), "add");
    // Concatenation along a dim.
    let c = fd.define_tensor(DataType::F32, &[MAX_NUMEL]).unwrap();
    expect_size_limit(fd.cat(&[c, c], 0), "cat");
    // Reshape to sizes whose product overflows.
    let d = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let r = fd.reshape(d, &[Size::Const(i64::MAX), Size::Const(i64::MAX)]);
    expect_size_limit(r, "reshape");
}

fn device() -> DeviceInfo {
    DeviceInfo::h100_for_tests()
}

#[test]
fn runtime_sizes_above_the_limit_are_refused_before_planning() {
    // A symbolic input bound to [i64::MAX, 4].
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.relu(x).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let info = RuntimeInfo::contiguous(device(), &[(DataType::F32, &[i64::MAX, 4])]);
    let err = compute_heuristics(&f, &info).unwrap_err();
    assert!(err.to_string().contains("2^48"), "{err}");
    let ok = RuntimeInfo::contiguous(device(), &[(DataType::F32, &[1024, 4])]);
    let params = compute_heuristics(&f, &ok).unwrap();
    let err = check_fits(&f, &params, &info).unwrap_err();
    assert!(err.to_string().contains("2^48"), "{err}");

    // A factory whose size is a scalar input bound to i64::MAX.
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let z = fd.constant(0.0);
    let t = fd.full(&[Size::Val(n)], z, DataType::F32).unwrap();
    fd.add_output(t).unwrap();
    let f = fd.finish().unwrap();
    let info = RuntimeInfo {
        device: device(),
        inputs: vec![InputInfo::Scalar(ScalarValue::Int(i64::MAX))],
    };
    assert!(compute_heuristics(&f, &info).is_err());

    // A pad whose run-time extent overflows i64.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let z = fd.constant(0.0);
    let p = fd.pad(x, &[(1 << 47, 1 << 47)], z).unwrap();
    fd.add_output(p).unwrap();
    let f = fd.finish().unwrap();
    let info = RuntimeInfo::contiguous(device(), &[(DataType::F32, &[i64::MAX])]);
    assert!(compute_heuristics(&f, &info).is_err());
}

#[test]
fn params_with_huge_fields_are_invalid_not_overflowing() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.sum(x, &[1], false).unwrap();
    fd.add_output(s).unwrap();
    let f = fd.finish().unwrap();
    let info = RuntimeInfo::contiguous(device(), &[(DataType::F32, &[64, 1024])]);
    let mut params = compute_heuristics(&f, &info).unwrap();
    match &mut params {
        HeuristicParams::Reduction(p) => p.rows_per_block = i64::MAX,
        HeuristicParams::InnerPersistent(p) => {
            p.rows_per_block = i64::MAX;
            p.hidden = i64::MAX;
        }
        other => panic!("expected a reduction, found {other:?}"),
    }
    assert!(params.validate().is_err());
}

#[test]
fn host_tensor_zeros_of_rank_64_is_an_error() {
    let r = HostTensor::zeros(DataType::F32, &[2; 64]);
    expect_size_limit(r, "HostTensor::full");
    // Rank 64 itself is fine.
    let t = HostTensor::zeros(DataType::F32, &[1; 64]).unwrap();
    assert_eq!(t.rank(), 64);
    // More than the storage limit (2^35 + 1 elements of 8 bytes).
    let r = HostTensor::full(DataType::F64, &[(1 << 35) + 1], 1.0);
    expect_size_limit(r, "HostTensor::full");
    assert_eq!(MAX_HOST_BYTES, 1 << 38);
}

fn eval_err(build: impl FnOnce(&mut FusionDefinition) -> Result<ValId>, inputs: Vec<EvalInput>) {
    let mut fd = FusionDefinition::new();
    let out = build(&mut fd).unwrap();
    fd.add_output(out).unwrap();
    let f = fd.finish().unwrap();
    match evaluate(&f, &inputs) {
        Err(e) => assert!(
            is_size_limit(&e) || matches!(e, Error::InvalidArgument { .. }),
            "expected a size error, found {e:?}"
        ),
        Ok(_) => panic!("expected an error evaluating more than 2^35 elements"),
    }
}

#[test]
fn evaluating_huge_factories_and_expands_is_an_error_not_an_abort() {
    let n = (1i64 << 36) + 3;
    eval_err(
        |fd| {
            let z = fd.constant(1.0);
            fd.full(&[Size::Const(n)], z, DataType::F32)
        },
        vec![],
    );
    eval_err(
        |fd| {
            let (a, b) = (fd.constant(0i64), fd.constant(1i64));
            fd.iota(Size::Const(n), a, b, DataType::I64)
        },
        vec![],
    );
    eval_err(
        |fd| {
            let x = fd.define_tensor(DataType::F32, &[1])?;
            fd.expand(x, &[Size::Const(n)])
        },
        vec![HostTensor::from_slice(&[1.0f32], &[1]).unwrap().into()],
    );
    eval_err(
        |fd| {
            let s = fd.define_scalar(DataType::I64)?;
            let (a, b) = (fd.constant(0.0), fd.constant(1.0));
            let (seed, off) = (fd.constant(1i64), fd.constant(0i64));
            fd.uniform(&[Size::Val(s)], a, b, seed, off, DataType::F32)
        },
        vec![EvalInput::Scalar(ScalarValue::Int(n))],
    );
}
