//! The argument checks every device runs before anything executes
//! (`nvfuser_core::ir::bind`): tied extents and scalar values, through the evaluator and
//! directly.

use nvfuser_core::builder::{Size, Slice};
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::ir::bind::{check_scalar, check_sizes, BoundArg};
use nvfuser_core::prelude::*;
use nvfuser_core::workloads;
use nvfuser_core::Result;

fn fusion(build: impl FnOnce(&mut FusionDefinition) -> Result<Vec<ValId>>) -> Fusion {
    let mut fd = FusionDefinition::new();
    let outs = build(&mut fd).unwrap();
    for o in outs {
        fd.add_output(o).unwrap();
    }
    fd.finish().unwrap()
}

fn zeros(dtype: DataType, shape: &[usize]) -> EvalInput {
    HostTensor::zeros(dtype, shape).unwrap().into()
}

fn err(f: &Fusion, inputs: Vec<EvalInput>) -> String {
    match evaluate(f, &inputs) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => {
            assert!(
                matches!(e, Error::ArgumentSizes { .. } | Error::Input { .. }),
                "{e:?}"
            );
            e.to_string()
        }
    }
}

/// The sizes-only check on tensors of these shapes (scalars as given).
fn sizes(f: &Fusion, args: &[BoundArg<'_>]) -> std::result::Result<(), String> {
    check_sizes(f, args).map_err(|e| e.to_string())
}

fn add_2d() -> Fusion {
    fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.add(x, y)?])
    })
}

#[test]
fn elementwise_operands_must_have_equal_symbolic_sizes() {
    let f = add_2d();
    let msg = "argument 1 dim 1: size 6, but it must equal argument 0 dim 1 (size 5): the fusion adds them";
    assert_eq!(
        err(
            &f,
            vec![zeros(DataType::F32, &[4, 5]), zeros(DataType::F32, &[4, 6])]
        ),
        msg
    );
    assert_eq!(
        sizes(&f, &[BoundArg::Tensor(&[4, 5]), BoundArg::Tensor(&[4, 6])]),
        Err(msg.to_string())
    );
    // A symbolic dim of size 1 is not a broadcast dim.
    assert_eq!(
        err(
            &f,
            vec![zeros(DataType::F32, &[4, 5]), zeros(DataType::F32, &[4, 1])]
        ),
        "argument 1 dim 1: size 1, but it must equal argument 0 dim 1 (size 5): the fusion adds them"
    );
    // Sizes far apart (the GPU read out of bounds here).
    assert_eq!(
        sizes(&f, &[BoundArg::Tensor(&[512, 4096]), BoundArg::Tensor(&[2, 3])]),
        Err(
            "argument 1 dim 0: size 2, but it must equal argument 0 dim 0 (size 512): the fusion adds them"
                .to_string()
        )
    );
    // Equal sizes pass, empty ones too.
    assert!(evaluate(
        &f,
        &[zeros(DataType::F32, &[4, 5]), zeros(DataType::F32, &[4, 5])]
    )
    .is_ok());
    assert!(sizes(&f, &[BoundArg::Tensor(&[0, 5]), BoundArg::Tensor(&[0, 5])]).is_ok());
}

#[test]
fn declared_broadcast_dims_stand_against_any_size() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let y = fd.define_tensor(DataType::F32, &[-1, 1])?;
        let b = fd.define_tensor(DataType::F32, &[-1])?;
        let z = fd.add(x, y)?;
        Ok(vec![fd.sub(z, b)?])
    });
    let ok = [
        BoundArg::Tensor(&[4, 5]),
        BoundArg::Tensor(&[4, 1]),
        BoundArg::Tensor(&[5]),
    ];
    assert!(sizes(&f, &ok).is_ok());
    // The rank-extended operand is tied through its explicit broadcast.
    assert_eq!(
        sizes(
            &f,
            &[
                BoundArg::Tensor(&[4, 5]),
                BoundArg::Tensor(&[4, 1]),
                BoundArg::Tensor(&[7]),
            ]
        ),
        Err("argument 2 dim 0: size 7, but it must equal argument 0 dim 1 (size 5): the fusion subtracts them".into())
    );
    assert_eq!(
        sizes(
            &f,
            &[
                BoundArg::Tensor(&[4, 5]),
                BoundArg::Tensor(&[3, 1]),
                BoundArg::Tensor(&[5]),
            ]
        ),
        Err("argument 1 dim 0: size 3, but it must equal argument 0 dim 0 (size 4): the fusion adds them".into())
    );
}

#[test]
fn layer_norm_weight_must_match_the_hidden_size() {
    let f = workloads::layer_norm(DataType::F32).unwrap();
    let inputs = |w: usize, b: usize| {
        vec![
            zeros(DataType::F32, &[8, 64]),
            zeros(DataType::F32, &[w]),
            zeros(DataType::F32, &[b]),
            EvalInput::Scalar(1e-5f32.into()),
        ]
    };
    assert!(evaluate(&f, &inputs(64, 64)).is_ok());
    assert_eq!(
        err(&f, inputs(63, 64)),
        "argument 1 dim 0: size 63, but it must equal argument 0 dim 1 (size 64): the fusion multiplies them"
    );
    assert_eq!(
        err(&f, inputs(64, 65)),
        "argument 2 dim 0: size 65, but it must equal argument 0 dim 1 (size 64): the fusion adds them"
    );
}

#[test]
fn cat_expand_gather_and_take_along_axis_ties() {
    // cat: the non-axis dims.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.cat(&[x, y], 1)?])
    });
    assert!(sizes(&f, &[BoundArg::Tensor(&[2, 3]), BoundArg::Tensor(&[2, 9])]).is_ok());
    let e = sizes(&f, &[BoundArg::Tensor(&[2, 3]), BoundArg::Tensor(&[4, 3])]).unwrap_err();
    assert!(e.starts_with("argument 1 dim 0: size 4, but it must equal argument 0 dim 0 (size 2): the fusion concatenates them along dim 1"), "{e}");

    // expand by a scalar size: a non-broadcast dim must already have it (-1 keeps it).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let n = fd.define_scalar(DataType::I64)?;
        Ok(vec![fd.expand(x, &[Size::Val(n), Size::Const(-1)])?])
    });
    let x = [2, 3];
    assert!(sizes(&f, &[BoundArg::Tensor(&x), BoundArg::Scalar(2i64.into())]).is_ok());
    assert!(sizes(
        &f,
        &[BoundArg::Tensor(&x), BoundArg::Scalar((-1i64).into())]
    )
    .is_ok());
    assert_eq!(
        sizes(&f, &[BoundArg::Tensor(&x), BoundArg::Scalar(5i64.into())]),
        Err("argument 0 dim 0: size 2, but it must equal argument 1 (size 5): expand only changes the size of broadcast dims (-1 keeps a dim)".into())
    );

    // gather: the index no larger than the input outside the axis.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.gather(x, 1, i)?])
    });
    assert!(sizes(&f, &[BoundArg::Tensor(&[5, 3]), BoundArg::Tensor(&[2, 9])]).is_ok());
    assert_eq!(
        sizes(&f, &[BoundArg::Tensor(&[5, 3]), BoundArg::Tensor(&[6, 9])]),
        Err("argument 1 dim 0: size 6, but it must be at most argument 0 dim 0 (size 5): gather reads the input at the index's positions outside dim 1".into())
    );

    // take_along_axis: equal outside the axis.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.take_along_axis(x, i, 1)?])
    });
    assert!(sizes(&f, &[BoundArg::Tensor(&[5, 3]), BoundArg::Tensor(&[5, 9])]).is_ok());
    assert!(
        sizes(&f, &[BoundArg::Tensor(&[5, 3]), BoundArg::Tensor(&[4, 9])])
            .unwrap_err()
            .starts_with("argument 1 dim 0: size 4, but it must equal argument 0 dim 0 (size 5)")
    );
}

#[test]
fn derived_extents_are_named_in_the_callers_terms() {
    // A padded operand against a plain one: the padded extent is shown as an expression
    // of the arguments.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let y = fd.define_tensor(DataType::F32, &[-1])?;
        let zero = fd.constant(0.0);
        let p = fd.pad(x, &[(1, 1)], zero)?;
        Ok(vec![fd.mul(p, y)?])
    });
    assert!(sizes(&f, &[BoundArg::Tensor(&[4]), BoundArg::Tensor(&[6])]).is_ok());
    assert_eq!(
        sizes(&f, &[BoundArg::Tensor(&[4]), BoundArg::Tensor(&[5])]),
        Err("argument 1 dim 0: size 5, but it must equal (argument 0 dim 0 + 2) (size 6): the fusion multiplies them".into())
    );
    // Permuted operands pair the permuted dims.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let t = fd.permute(x, &[1, 0])?;
        Ok(vec![fd.add(t, y)?])
    });
    assert!(sizes(&f, &[BoundArg::Tensor(&[2, 3]), BoundArg::Tensor(&[3, 2])]).is_ok());
    assert!(sizes(&f, &[BoundArg::Tensor(&[2, 3]), BoundArg::Tensor(&[2, 3])]).is_err());
    // A slice with scalar bounds against another operand: the bound values count.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let y = fd.define_tensor(DataType::F32, &[-1])?;
        let a = fd.define_scalar(DataType::I64)?;
        let s = fd.slice(x, &[Slice::range(Size::Val(a), i64::MAX)])?;
        Ok(vec![fd.add(s, y)?])
    });
    let args = |a: i64, y: &'static [usize]| {
        [
            BoundArg::Tensor(&[10]),
            BoundArg::Tensor(y),
            BoundArg::Scalar(a.into()),
        ]
    };
    assert!(sizes(&f, &args(3, &[7])).is_ok());
    assert!(sizes(&f, &args(4, &[7])).is_err());
}

#[test]
fn scalar_values_are_checked_against_their_dtype() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::Bool, &[-1])?;
        let b = fd.define_scalar(DataType::Bool)?;
        Ok(vec![fd.logical_and(x, b)?])
    });
    assert_eq!(
        err(&f, vec![zeros(DataType::Bool, &[3]), 2i64.into()]),
        "input 1: expected a bool value for a bool scalar, found 2"
    );
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1])?;
        let s = fd.define_scalar(DataType::I32)?;
        Ok(vec![fd.add(x, s)?])
    });
    assert_eq!(
        err(&f, vec![zeros(DataType::I32, &[3]), (1i64 << 40).into()]),
        "input 1: expected a value in i32 range for an i32 scalar, found 1099511627776"
    );
    // The rule itself.
    let two = ScalarValue::Int(2);
    assert!(check_scalar(0, DataType::Bool, two).is_err());
    assert!(check_scalar(0, DataType::Bool, ScalarValue::Bool(true)).is_ok());
    assert!(check_scalar(0, DataType::I32, ScalarValue::Int(1 << 40)).is_err());
    assert!(check_scalar(0, DataType::I32, ScalarValue::Int(-(1 << 31))).is_ok());
    assert!(check_scalar(0, DataType::I64, ScalarValue::Int(1 << 40)).is_ok());
    assert!(check_scalar(0, DataType::I64, ScalarValue::Float(1.0)).is_err());
    assert!(check_scalar(0, DataType::I64, ScalarValue::Bool(true)).is_ok());
    assert!(check_scalar(0, DataType::F16, ScalarValue::Int(7)).is_ok());
}
