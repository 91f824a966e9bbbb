use super::*;
use crate::builder::{FusionDefinition, Size, Slice};
use crate::eval::HostTensor;
use crate::ir::verify;

/// The computed values as the CPU reference evaluates them inside the original fusion
/// (outputs added by hand: the builder only declares tensor outputs).
fn reference_scalars(f: &Fusion, computed: &[ValId], inputs: &[EvalInput]) -> Vec<ScalarValue> {
    let mut g = f.clone();
    for &c in computed {
        g.outputs.push(Output {
            val: c,
            alias_of: None,
        });
    }
    let outs = evaluate(&g, inputs).unwrap();
    outs[f.outputs().len()..]
        .iter()
        .map(|t| t.item().unwrap())
        .collect()
}

fn bound(inputs: &[EvalInput]) -> Vec<BoundArg<'_>> {
    inputs
        .iter()
        .map(|i| match i {
            EvalInput::Tensor(t) => BoundArg::Tensor(t.shape()),
            EvalInput::Scalar(s) => BoundArg::Scalar(*s),
        })
        .collect()
}

/// Splits, checks the kernel fusion's shape (original inputs first, then the computed
/// ones as scalars, no scalar expressions), compares the host values with the
/// reference's, and checks that the kernel fusion with them computes the same outputs.
fn check(f: &Fusion, inputs: &[EvalInput]) -> HostScalarSplit {
    let split = split_host_scalars(f).expect("a split");
    let k = &split.kernel;
    verify(k).unwrap();
    let computed = split.program.computed();
    assert_eq!(k.inputs().len(), f.inputs().len() + computed.len());
    for (&ki, &fi) in k.inputs().iter().zip(f.inputs()) {
        assert_eq!(k.val(ki).dtype, f.val(fi).dtype);
        assert_eq!(k.val(ki).is_tensor(), f.val(fi).is_tensor());
    }
    for (&ki, &c) in k.inputs()[f.inputs().len()..].iter().zip(computed) {
        assert!(!k.val(ki).is_tensor());
        assert_eq!(k.val(ki).dtype, f.val(c).dtype);
    }
    assert!(k
        .exprs()
        .all(|(_, e)| e.outputs.iter().all(|&o| k.val(o).is_tensor())));
    let host = split.program.evaluate(&bound(inputs)).unwrap();
    assert_eq!(host, reference_scalars(f, computed, inputs));
    let mut kin: Vec<EvalInput> = inputs.to_vec();
    kin.extend(host.iter().map(|&s| EvalInput::Scalar(s)));
    let want = evaluate(f, inputs).unwrap();
    let got = evaluate(k, &kin).unwrap();
    assert_eq!(want, got);
    split
}

fn tensor(shape: &[usize]) -> EvalInput {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 1.0).collect();
    EvalInput::Tensor(HostTensor::from_vec(data, shape).unwrap())
}

#[test]
fn no_computed_scalars_no_split() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let y = fd.mul(x, s).unwrap();
    let n = fd.size(x, 1).unwrap(); // dead: no split
    let _ = n;
    fd.add_output(y).unwrap();
    assert!(split_host_scalars(&fd.finish().unwrap()).is_none());
}

#[test]
fn full_of_a_sum_of_scalar_inputs() {
    let mut fd = FusionDefinition::new();
    let a = fd.define_scalar(DataType::F32).unwrap();
    let b = fd.define_scalar(DataType::F32).unwrap();
    let s = fd.add(a, b).unwrap();
    let t = fd.full(&[2.into(), 2.into()], s, DataType::F32).unwrap();
    fd.add_output(t).unwrap();
    let f = fd.finish().unwrap();
    let inputs = [
        EvalInput::Scalar(ScalarValue::Float(1.25)),
        EvalInput::Scalar(ScalarValue::Float(2.5)),
    ];
    let split = check(&f, &inputs);
    assert_eq!(split.program.computed(), &[s]);
    assert_eq!(split.kernel.num_exprs(), 1);
}

#[test]
fn reshape_to_sizes_and_scalar_inputs() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.define_scalar(DataType::I64).unwrap();
    let b = fd.define_scalar(DataType::I64).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let y = fd
        .reshape(x, &[Size::Val(n0), Size::Val(a), Size::Val(b)])
        .unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let inputs = [
        tensor(&[3, 8]),
        EvalInput::Scalar(ScalarValue::Int(2)),
        EvalInput::Scalar(ScalarValue::Int(4)),
    ];
    let split = check(&f, &inputs);
    assert_eq!(split.program.computed(), &[n0]);
}

#[test]
fn slice_to_size_minus_one_and_scaled_by_a_size() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let one = fd.constant(1i64);
    let end = fd.sub(n1, one).unwrap();
    let y = fd
        .slice(x, &[Slice::all(), Slice::range(0, Size::Val(end))])
        .unwrap();
    let np1 = fd.add(n1, one).unwrap();
    let k = fd.cast(np1, DataType::F32).unwrap();
    let z = fd.mul(y, k).unwrap();
    fd.add_output(z).unwrap();
    let f = fd.finish().unwrap();
    let split = check(&f, &[tensor(&[3, 5])]);
    assert_eq!(split.program.computed(), &[end, k]);
}

#[test]
fn iota_and_uniform_shaped_by_sizes_expand_to_a_size() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, 1]).unwrap();
    let n0 = fd.size(x, 0).unwrap();
    let n1 = fd.size(x, 1).unwrap();
    let start = fd.constant(0i64);
    let step = fd.constant(1i64);
    let len = fd.mul(n0, n1).unwrap();
    let i = fd.iota(Size::Val(len), start, step, DataType::F32).unwrap();
    let lo = fd.constant(0.0f64);
    let hi = fd.constant(1.0f64);
    let seed = fd.constant(7i64);
    let off = fd.constant(0i64);
    let u = fd
        .uniform(
            &[Size::Val(n0), Size::Val(n1)],
            lo,
            hi,
            seed,
            off,
            DataType::F32,
        )
        .unwrap();
    let e = fd.expand(y, &[Size::Const(-1), Size::Val(n1)]).unwrap();
    let w = fd.add(u, e).unwrap();
    fd.add_output(i).unwrap();
    fd.add_output(w).unwrap();
    let f = fd.finish().unwrap();
    check(&f, &[tensor(&[3, 4]), tensor(&[3, 1])]);
}

#[test]
fn cast_of_a_scalar_input() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::F64).unwrap();
    let c = fd.cast(s, DataType::BF16).unwrap();
    let y = fd.add(x, c).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish().unwrap();
    let split = check(
        &f,
        &[tensor(&[5]), EvalInput::Scalar(ScalarValue::Float(1.1))],
    );
    assert_eq!(split.program.computed(), &[c]);
}

/// The size of a computed tensor (a slice to a bound computed from a size) is computed by
/// the program from its extent (fuzz seeds 15407, 7848: the split gave up and the kernel
/// was left with scalar math no scheduler takes).
#[test]
fn sizes_of_computed_tensors() {
    let src = r#"
fn k(t0: Tensor<f32, [_, _, _]>) -> Tensor<f32, [_, _]> {
    let s1 = t0.size(2);
    let s3 = s1 - 1;
    let t4 = t0.slice([.., .., 0..s3]);
    let s10 = t4.size(2);
    let s12 = s10 - 1;
    let t13 = t4.slice([.., .., 0..s12]);
    let s14 = t13.size(2);
    let t15 = t13.reshape([-1, s14]);
    t15
}
"#;
    let f = crate::dsl::build_str(src).unwrap().remove(0).0;
    for shape in [[2usize, 3, 7], [1, 1, 3], [4, 2, 64]] {
        let x = HostTensor::random(DataType::F32, &shape, 5);
        check(&f, &[EvalInput::Tensor(x)]);
    }
}
