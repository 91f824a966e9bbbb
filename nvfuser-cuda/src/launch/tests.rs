//! Unit tests of the launcher's data-dependent read checks.
use super::*;
use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::ir::reads::{CallValues, ReadChecks};
use nvfuser_core::ir::Extent;
use nvfuser_core::Fusion;
use nvfuser_core::{DataType, FusionDefinition, ValId};

/// Runs the check with input `i` of shape `shapes[i]` (tensors) or value
/// `scalars[i]` (scalars).
fn check(f: &Fusion, shapes: &[&[usize]], scalars: &[i64]) -> Result<(), Error> {
    let dim = |t: ValId, axis: usize| -> Option<i64> {
        let p = f.input_position(t)?;
        shapes.get(p)?.get(axis).map(|&s| s as i64)
    };
    let scalar = |v: ValId| -> Option<i64> { scalars.get(f.input_position(v)?).copied() };
    let extent = |e: &Extent| e.eval(&dim, &scalar);
    let call = CallValues {
        extent: &extent,
        scalar: &scalar,
    };
    ReadChecks::of(f).check(f, &call, true).map_err(read_error)
}

fn expect_err(r: Result<(), Error>, needle: &str) {
    match r {
        Err(Error::InvalidTensor { expected, .. }) if expected.contains(needle) => {}
        other => panic!("expected an error naming {needle:?}, got {other:?}"),
    }
}

#[test]
fn select_indices_are_checked_against_the_runtime_size() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let i = fd.define_scalar(DataType::I64).unwrap();
    let s = fd.select(x, 0, Size::Val(i)).unwrap();
    let c = fd.select(x, 1, Size::Const(2)).unwrap();
    let y = fd.add(s, c).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    // Shapes: x is [rows, cols]; the sum needs rows == cols to be meaningful, but
    // only the indices matter here.
    assert!(check(&f, &[&[4, 4], &[]], &[0, 3]).is_ok());
    assert!(check(&f, &[&[4, 4], &[]], &[0, -4]).is_ok());
    expect_err(
        check(&f, &[&[4, 4], &[]], &[0, 4]),
        "select: an index in -4..4",
    );
    expect_err(check(&f, &[&[4, 4], &[]], &[0, -5]), "select");
    // The constant index 2 on a dim of size 2.
    expect_err(check(&f, &[&[4, 2], &[]], &[0, 0]), "dim 1 of size 2");
}

#[test]
fn scalar_slice_bounds_and_reshape_sizes_are_checked() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a = fd.define_scalar(DataType::I64).unwrap();
    let sl = fd
        .slice(x, &[Slice::range(Size::Val(a), i64::MAX)])
        .unwrap();
    fd.add_output(sl).unwrap();
    let f = fd.finish().unwrap();
    assert!(check(&f, &[&[10], &[]], &[0, 10]).is_ok());
    assert!(check(&f, &[&[10], &[]], &[0, 0]).is_ok());
    expect_err(
        check(&f, &[&[10], &[]], &[0, -1]),
        "start given by a scalar",
    );
    expect_err(check(&f, &[&[10], &[]], &[0, 11]), "0..=10");

    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let r = fd.reshape(x, &[Size::Val(n), Size::Const(-1)]).unwrap();
    fd.add_output(r).unwrap();
    let f = fd.finish().unwrap();
    assert!(check(&f, &[&[6, 4], &[]], &[0, 8]).is_ok());
    // 24 elements into rows of 5: the inferred dim rounds down to 4 (20 elements).
    expect_err(check(&f, &[&[6, 4], &[]], &[0, 5]), "element count");
    // 0 elements into rows of 0: the -1 could be anything (the reference refuses;
    // fuzz seed 408679 ran it on the GPU).
    expect_err(check(&f, &[&[0, 4], &[]], &[0, 0]), "element count");
    assert!(check(&f, &[&[0, 4], &[]], &[0, 2]).is_ok());
    // Sizes below -1 are refused.
    expect_err(check(&f, &[&[6, 4], &[]], &[0, -3]), "element count");
}

/// Fuzz seed 111244: `max` over a dim that a scalar slice bound makes empty.
#[test]
fn max_over_a_dim_emptied_by_a_scalar_bound_is_refused() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let a = fd.define_scalar(DataType::I64).unwrap();
    let sl = fd
        .slice(x, &[Slice::range(Size::Const(0), Size::Val(a))])
        .unwrap();
    let m = fd.max(sl, &[0], false).unwrap();
    fd.add_output(m).unwrap();
    let f = fd.finish().unwrap();
    assert!(check(&f, &[&[10], &[]], &[0, 3]).is_ok());
    expect_err(check(&f, &[&[10], &[]], &[0, 0]), "max: a non-empty dim");
}

#[test]
fn gather_and_take_along_axis_index_sizes_are_checked() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let i = fd.define_tensor(DataType::I64, &[-1, -1]).unwrap();
    let g = fd.gather(x, 1, i).unwrap();
    fd.add_output(g).unwrap();
    let f = fd.finish().unwrap();
    assert!(check(&f, &[&[5, 3], &[5, 9]], &[]).is_ok());
    assert!(check(&f, &[&[5, 3], &[2, 9]], &[]).is_ok());
    expect_err(
        check(&f, &[&[5, 3], &[6, 9]], &[]),
        "gather: an index size <= 5",
    );

    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let i = fd.define_tensor(DataType::I64, &[-1, -1]).unwrap();
    let g = fd.take_along_axis(x, i, 1).unwrap();
    fd.add_output(g).unwrap();
    let f = fd.finish().unwrap();
    assert!(check(&f, &[&[5, 3], &[5, 9]], &[]).is_ok());
    expect_err(
        check(&f, &[&[5, 3], &[4, 9]], &[]),
        "take_along_axis: an index size equal to 5",
    );
    // Without such ops nothing is checked.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.relu(x).unwrap();
    fd.add_output(y).unwrap();
    assert!(check(&fd.finish().unwrap(), &[&[3]], &[]).is_ok());
}
