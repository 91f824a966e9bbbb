//! Stateful random ops (`rand_uniform`, `rand_normal`): the generator's seed and offset
//! become the fusion's last two inputs, each op reads its own offset, and the builder,
//! the `fusion!` language, the printers and the reproducer agree on it.

use nvfuser_core::dsl::build_str;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::prelude::*;
use nvfuser_core::ScalarValue;

/// `[n, 4]` uniform on `[0, 1)` and `[n, 4]` normal(0, 1), both from the generator,
/// beside a tensor input `x [n, 4]` returned plus the uniform draw.
fn two_draws() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 4]).unwrap();
    let n = fd.size(x, 0).unwrap();
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    let u = fd
        .rand_uniform(&[Size::Val(n), Size::Const(4)], lo, hi, DataType::F32)
        .unwrap();
    let (m, s) = (fd.constant(0.0), fd.constant(1.0));
    let g = fd
        .rand_normal(&[Size::Val(n), Size::Const(4)], m, s, DataType::F32)
        .unwrap();
    let y = fd.add(x, u).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(g).unwrap();
    fd.finish().unwrap()
}

fn run(f: &Fusion, x: &HostTensor, seed: i64, offset: i64) -> Vec<Vec<f32>> {
    let inputs = [
        EvalInput::Tensor(x.clone()),
        EvalInput::Scalar(ScalarValue::Int(seed)),
        EvalInput::Scalar(ScalarValue::Int(offset)),
    ];
    evaluate(f, &inputs)
        .unwrap()
        .iter()
        .map(|t| t.to_vec::<f32>().unwrap())
        .collect()
}

#[test]
fn the_seed_and_offset_are_the_last_two_inputs() {
    let f = two_draws();
    let g = f.generator_inputs().expect("generator inputs");
    assert_eq!(g.draws, 2);
    assert_eq!(f.inputs().len(), 3);
    assert_eq!(f.user_inputs(), &f.inputs()[..1]);
    assert_eq!(&f.inputs()[1..], &[g.seed, g.offset]);
    // A fusion without stateful ops has none, and every input is the user's.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.neg(x).unwrap();
    fd.add_output(y).unwrap();
    let plain = fd.finish().unwrap();
    assert!(plain.generator_inputs().is_none());
    assert_eq!(plain.user_inputs(), plain.inputs());
}

#[test]
fn each_op_reads_its_own_offset_as_the_stateless_op_would() {
    let f = two_draws();
    let x = HostTensor::random(DataType::F32, &[5, 4], 7);
    let (seed, offset) = (1234, 40);
    let out = run(&f, &x, seed, offset);

    // The same draws written with explicit seeds and offsets: op k reads offset + k.
    let mut fd = FusionDefinition::new();
    let xs = fd.define_tensor(DataType::F32, &[-1, 4]).unwrap();
    let sd = fd.define_scalar(DataType::I64).unwrap();
    let of = fd.define_scalar(DataType::I64).unwrap();
    let n = fd.size(xs, 0).unwrap();
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    let u = fd
        .uniform(
            &[Size::Val(n), Size::Const(4)],
            lo,
            hi,
            sd,
            of,
            DataType::F32,
        )
        .unwrap();
    let one = fd.constant(1i64);
    let of1 = fd.add(of, one).unwrap();
    let (m, s) = (fd.constant(0.0), fd.constant(1.0));
    let g = fd
        .normal(
            &[Size::Val(n), Size::Const(4)],
            m,
            s,
            sd,
            of1,
            DataType::F32,
        )
        .unwrap();
    let y = fd.add(xs, u).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(g).unwrap();
    let stateless = fd.finish().unwrap();
    assert_eq!(out, run(&stateless, &x, seed, offset));

    // Two ops of one call, and two calls, draw different numbers.
    let xv = x.to_vec::<f32>().unwrap();
    let uniform: Vec<f32> = out[0].iter().zip(&xv).map(|(y, x)| y - x).collect();
    assert!(
        uniform.iter().all(|&u| (0.0..1.0).contains(&u)),
        "{uniform:?}"
    );
    assert_ne!(uniform, out[1]);
    let next = run(&f, &x, seed, offset + 2);
    assert_ne!(next[1], out[1]);
    assert_ne!(next[0], out[0]);
    // The same seed and offset give the same numbers.
    assert_eq!(run(&f, &x, seed, offset), out);
}

#[test]
fn the_language_builds_the_same_fusion_as_the_builder() {
    let src = r#"
        fn two_draws(x: Tensor<f32, [N, 4]>) -> (Tensor<f32, [N, 4]>, Tensor<f32, [N, 4]>) {
            let u = rand_uniform([x.size(0), 4], 0.0, 1.0, f32);
            let g = rand_normal([x.size(0), 4], 0.0, 1.0, f32);
            (x + u, g)
        }
    "#;
    let (f, _) = build_str(src).unwrap().remove(0);
    assert_eq!(f.generator_inputs().map(|g| g.draws), Some(2));
    assert_eq!(f.user_inputs().len(), 1);
    let x = HostTensor::random(DataType::F32, &[3, 4], 1);
    assert_eq!(run(&f, &x, 5, 9), run(&two_draws(), &x, 5, 9));
}

#[test]
fn the_reproducer_rebuilds_the_fusion() {
    let f = two_draws();
    let src = f.to_reproducer("two_draws");
    assert!(
        src.contains("rand_uniform(") && src.contains("rand_normal("),
        "{src}"
    );
    // Neither the seed nor the offset is a parameter.
    let header = src.lines().next().unwrap();
    assert!(!header.contains("i64"), "{src}");
    let (rebuilt, _) = build_str(&src).unwrap().remove(0);
    assert_eq!(rebuilt, f, "{src}");
    assert_eq!(rebuilt.structural_hash(), f.structural_hash());
}

#[test]
fn the_printer_names_the_generator_inputs() {
    let text = two_draws().to_string();
    assert!(text.contains("(the device generator's seed)"), "{text}");
    assert!(
        text.contains("(the device generator's offset, 2 per call)"),
        "{text}"
    );
}

#[test]
fn generator_inputs_are_part_of_structural_identity() {
    // Two user i64 scalars in the same places are not the generator's.
    let f = two_draws();
    let mut g = f.clone();
    assert_eq!(f, g);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 4]).unwrap();
    let n = fd.size(x, 0).unwrap();
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    let u = fd
        .rand_uniform(&[Size::Val(n), Size::Const(4)], lo, hi, DataType::F32)
        .unwrap();
    let y = fd.add(x, u).unwrap();
    fd.add_output(y).unwrap();
    g = fd.finish().unwrap();
    assert_ne!(f, g);
}

#[test]
fn a_refused_stateful_op_adds_no_generator_inputs() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    // An integer output type is refused, with the op's name.
    let err = fd
        .rand_uniform(&[Size::Const(4)], lo, hi, DataType::I64)
        .unwrap_err();
    assert!(err.to_string().contains("uniform"), "{err}");
    // A tensor where a scalar bound belongs is refused too.
    assert!(fd
        .rand_normal(&[Size::Const(4)], x, hi, DataType::F32)
        .is_err());
    let y = fd.neg(x).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    assert!(f.generator_inputs().is_none());
    assert_eq!(f.inputs().len(), 1);
}
