//! Every error class of the CPU reference evaluator, with its message, and a mutation
//! fuzz that checks the evaluator never panics on malformed (deserialized) fusions.

use half::f16;
use nvfuser_core::builder::Slice;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::prelude::*;
use nvfuser_core::Result;

fn fusion(build: impl FnOnce(&mut FusionDefinition) -> Result<Vec<ValId>>) -> Fusion {
    let mut fd = FusionDefinition::new();
    let outs = build(&mut fd).unwrap();
    for o in outs {
        fd.add_output(o).unwrap();
    }
    fd.finish().unwrap()
}

fn t<T: nvfuser_core::eval::Element>(v: &[T], shape: &[usize]) -> EvalInput {
    HostTensor::from_slice(v, shape).unwrap().into()
}

fn err(f: &Fusion, inputs: Vec<EvalInput>) -> Error {
    match evaluate(f, &inputs) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e,
    }
}

fn add_xy() -> Fusion {
    fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, 4])?;
        let y = fd.define_tensor(DataType::F32, &[1, -1])?;
        let s = fd.define_scalar(DataType::I32)?;
        let z = fd.add(x, y)?;
        Ok(vec![fd.mul(z, s)?])
    })
}

fn good_inputs() -> Vec<EvalInput> {
    vec![
        t(&[1.5f32; 8], &[2, 4]),
        t(&[0.5f32; 4], &[1, 4]),
        3i64.into(),
    ]
}

#[test]
fn good_inputs_work() {
    let out = evaluate(&add_xy(), &good_inputs()).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [6.0f32; 8]);
}

#[test]
fn wrong_input_count() {
    let mut inputs = good_inputs();
    inputs.pop();
    let e = err(&add_xy(), inputs);
    assert!(matches!(e, Error::Arity { .. }));
    assert_eq!(e.to_string(), "evaluate: expected 3 inputs, found 2");
}

#[test]
fn wrong_dtype() {
    let mut inputs = good_inputs();
    inputs[0] = t(&[half::f16::from_f32(1.5); 8], &[2, 4]);
    let e = err(&add_xy(), inputs);
    assert!(matches!(e, Error::Input { index: 0, .. }));
    assert_eq!(
        e.to_string(),
        "input 0: expected dtype f32, found dtype f16"
    );
}

#[test]
fn wrong_rank() {
    let mut inputs = good_inputs();
    inputs[1] = t(&[0.5f32; 4], &[4]);
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 1: expected rank 2, found rank 1 (shape [4])"
    );
}

#[test]
fn wrong_static_size() {
    let mut inputs = good_inputs();
    inputs[0] = t(&[1.5f32; 10], &[2, 5]);
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 0: expected size 4 at dim 1 (a static size), found size 5 (shape [2, 5])"
    );
}

#[test]
fn broadcast_dim_must_have_size_one() {
    let mut inputs = good_inputs();
    inputs[1] = t(&[0.5f32; 8], &[2, 4]);
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 1: expected size 1 at dim 0 (a broadcast dim), found size 2 (shape [2, 4])"
    );
}

#[test]
fn tensor_versus_scalar() {
    let mut inputs = good_inputs();
    inputs[2] = t(&[3i32], &[1]);
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 2: expected a scalar of type i32, found a tensor (i32, shape [1])"
    );
    let mut inputs = good_inputs();
    inputs[0] = 1.5f32.into();
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 0: expected a tensor (f32, rank 2), found a scalar (1.5)"
    );
}

#[test]
fn scalar_values_must_fit_their_dtype() {
    let mut inputs = good_inputs();
    inputs[2] = 2.5f64.into();
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 2: expected an integer value for an i32 scalar, found the float 2.5"
    );
    let mut inputs = good_inputs();
    inputs[2] = (1i64 << 40).into();
    assert_eq!(
        err(&add_xy(), inputs).to_string(),
        "input 2: expected a value in i32 range for an i32 scalar, found 1099511627776"
    );
    // A bool is a fine integer; an integer is not a bool.
    let mut inputs = good_inputs();
    inputs[2] = true.into();
    assert!(evaluate(&add_xy(), &inputs).is_ok());
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::Bool, &[-1])?;
        let b = fd.define_scalar(DataType::Bool)?;
        Ok(vec![fd.logical_and(x, b)?])
    });
    let e = err(&f, vec![t(&[true], &[1]), 1i64.into()]);
    assert_eq!(
        e.to_string(),
        "input 1: expected a bool value for a bool scalar, found 1"
    );
}

#[test]
fn broadcast_mismatch_between_inputs() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let y = fd.define_tensor(DataType::F64, &[-1, -1])?;
        Ok(vec![fd.mul(x, y)?])
    });
    let e = err(&f, vec![t(&[1.0; 6], &[3, 2]), t(&[1.0; 8], &[4, 2])]);
    // Refused before anything runs, by the same check as on a GPU.
    assert!(matches!(e, Error::ArgumentSizes { .. }));
    assert_eq!(
        e.to_string(),
        "argument 1 dim 0: size 4, but it must equal argument 0 dim 0 (size 3): the fusion multiplies them"
    );
}

#[test]
fn integer_division_by_zero() {
    for (op, name) in [
        (nvfuser_core::ir::BinaryOp::Div, "div"),
        (nvfuser_core::ir::BinaryOp::Fmod, "fmod"),
        (nvfuser_core::ir::BinaryOp::Remainder, "remainder"),
    ] {
        for dtype in [DataType::I32, DataType::I64] {
            let f = fusion(|fd| {
                let x = fd.define_tensor(dtype, &[-1])?;
                let y = fd.define_tensor(dtype, &[-1])?;
                Ok(vec![fd.binary(op, x, y)?])
            });
            let (a, b) = if dtype == DataType::I32 {
                (t(&[7i32, 8], &[2]), t(&[2i32, 0], &[2]))
            } else {
                (t(&[7i64, 8], &[2]), t(&[2i64, 0], &[2]))
            };
            let e = err(&f, vec![a, b]);
            assert_eq!(
                e.to_string(),
                format!("{name}: invalid argument: integer division by zero (a divisor element is 0; cast to a float type for IEEE results)")
            );
        }
    }
    // No element is divided when the output is empty.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1, -1])?;
        let y = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![fd.div(x, y)?])
    });
    assert!(evaluate(&f, &[t::<i64>(&[], &[0, 2]), t(&[3i64, 0], &[2])]).is_ok());
}

#[test]
fn integer_pow_with_a_negative_exponent() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1])?;
        let y = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![fd.pow(x, y)?])
    });
    let e = err(&f, vec![t(&[2i64, 3], &[2]), t(&[1i64, -2], &[2])]);
    assert_eq!(e.to_string(), "pow: invalid argument: integers to negative integer powers are not allowed (found exponent -2)");
}

#[test]
fn index_out_of_range() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.take_along_axis(x, i, 0)?])
    });
    let e = err(
        &f,
        vec![t(&[1.0f32; 6], &[2, 3]), t(&[0i64, 1, 2], &[1, 3])],
    );
    assert_eq!(
        e.to_string(),
        "take_along_axis: invalid argument: index 2 at position [0, 2] is out of range for dim 0 of size 2 (expected 0..2)"
    );
    let e = err(&f, vec![t(&[1.0f32; 6], &[2, 3]), t(&[0i64, 1], &[1, 2])]);
    assert_eq!(
        e.to_string(),
        "argument 1 dim 1: size 2, but it must equal argument 0 dim 1 (size 3): take_along_axis pairs the index with the input outside dim 0 (unless one is a broadcast dim)"
    );
}

#[test]
fn negative_and_oversized_factory_sizes() {
    let f = fusion(|fd| {
        let n = fd.define_scalar(DataType::I64)?;
        let v = fd.constant(1.5);
        Ok(vec![fd.full(
            &[Size::Const(2), Size::Val(n)],
            v,
            DataType::F32,
        )?])
    });
    assert_eq!(
        err(&f, vec![(-2i64).into()]).to_string(),
        "full: invalid argument: size -2 at dim 1: expected >= 0"
    );
    assert_eq!(
        err(&f, vec![(1i64 << 62).into()]).to_string(),
        "full: invalid argument: shape [2, 4611686018427387904] has more than 2^40 elements"
    );
}

#[test]
fn slice_and_reshape_errors_name_the_op() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let n = fd.define_scalar(DataType::I64)?;
        let s = fd.slice(x, &[Slice::range(0i64, n)])?;
        Ok(vec![s, fd.reshape(x, &[Size::Val(n), Size::Const(-1)])?])
    });
    let x: Vec<f32> = (0..6).map(|v| v as f32 + 0.5).collect();
    let out = evaluate(&f, &[t(&x, &[6]), 3i64.into()]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [0.5, 1.5, 2.5]);
    assert_eq!(out[1].shape(), [3, 2]);
    let e = err(&f, vec![t(&x, &[6]), 7i64.into()]);
    assert!(
        e.to_string()
            .starts_with("slice: invalid argument: stop 7 at dim 0 is out of range"),
        "{e}"
    );
    let e = err(&f, vec![t(&x, &[6]), 0i64.into()]);
    assert_eq!(
        e.to_string(),
        "reshape: shape mismatch: expected sizes with 6 elements (input shape [6]), found [0, -1]"
    );
}

// ----- robustness: malformed IR never panics -----

/// Valid fusions covering every op kind, with inputs.
fn corpus() -> Vec<(Fusion, Vec<EvalInput>)> {
    let x23: Vec<f32> = vec![1.5, -2.0, 3.0, 0.25, -1.0, 4.0];
    let mut out = Vec::new();
    out.push((
        fusion(|fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
            let w = fd.define_tensor(DataType::F32, &[-1])?;
            let y = fd.add(x, w)?;
            let e = fd.exp(y)?;
            let c = fd.cast(e, DataType::BF16)?;
            let s = fd.sum(c, &[1], true)?;
            let v = fd.var(x, &[0], 1, false)?;
            let (m, _ws, n) = fd.welford(x, &[1])?;
            Ok(vec![s, v, m, n])
        }),
        vec![t(&x23, &[2, 3]), t(&[0.5f32, 1.0, -1.0], &[3])],
    ));
    out.push((
        fusion(|fd| {
            let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
            let k = fd.define_scalar(DataType::I64)?;
            let b = fd.broadcast(x, &[false, true, false])?;
            let e = fd.expand(b, &[Size::Const(-1), Size::Val(k), Size::Const(-1)])?;
            let r = fd.reshape(e, &[Size::Const(-1), Size::Const(3)])?;
            let p = fd.permute(r, &[1, 0])?;
            let sl = fd.slice(
                p,
                &[Slice::step(0i64, 3i64, 2), Slice::range(1i64, i64::MAX)],
            )?;
            let v = fd.constant(-4i64);
            let pd = fd.pad(sl, &[(1, 0), (0, 2)], v)?;
            let q = fd.squeeze(b, &[1])?;
            let c = fd.cat(&[q, q], 0)?;
            let sh = fd.shift_left(c, k)?;
            let dv = fd.div(sh, k)?;
            Ok(vec![pd, dv])
        }),
        vec![t(&[1i32, -2, 3, 4, 5, -6], &[2, 3]), 2i64.into()],
    ));
    out.push((
        fusion(|fd| {
            let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
            let i = fd.define_tensor(DataType::I64, &[-1])?;
            let j = fd.define_tensor(DataType::I64, &[-1, -1])?;
            let a = fd.index_select(x, 1, i)?;
            let b = fd.select(x, 0, Size::Const(-1))?;
            let g = fd.gather(x, 1, j)?;
            let tk = fd.take_along_axis(x, j, 1)?;
            let n = fd.size(x, 1)?;
            let one = fd.constant(1i64);
            let io = fd.iota(Size::Val(n), one, one, DataType::F64)?;
            let fl = fd.full(&[Size::Val(n)], one, DataType::F64)?;
            let sd = fd.constant(3i64);
            let lo = fd.constant(-1.0);
            let hi = fd.constant(1.0);
            let u = fd.uniform(
                &[Size::Const(2), Size::Val(n)],
                lo,
                hi,
                sd,
                one,
                DataType::F16,
            )?;
            let nr = fd.normal(&[Size::Val(n)], lo, hi, sd, one, DataType::F64)?;
            let c = fd.gt(b, io)?;
            let w = fd.where_(c, b, fl)?;
            let cl = fd.clamp(w, lo, hi)?;
            let l = fd.lerp(cl, io, nr)?;
            let ac = fd.addcmul(l, io, fl, hi)?;
            let th = fd.threshold(ac, lo, hi)?;
            let (vv, mm) = fd.var_mean(x, &[0, 1], 0, true)?;
            let mx = fd.max(g, &[0], false)?;
            let sg = fd.segment_set(tk)?;
            Ok(vec![a, th, u, vv, mm, mx, sg])
        }),
        vec![
            t(&[1.5, -2.0, 3.0, 0.25, -1.0, 4.0], &[2, 3]),
            t(&[2i64, 0], &[2]),
            t(&[0i64, 2, 1, 1], &[2, 2]),
        ],
    ));
    // The scans: f16 through f32, an integer product, bool running any, an expanded dim.
    out.push((
        fusion(|fd| {
            let x = fd.define_tensor(DataType::F16, &[-1, -1])?;
            let i = fd.define_tensor(DataType::I32, &[-1, -1])?;
            let b = fd.define_tensor(DataType::Bool, &[-1])?;
            let s = fd.cumsum(x, 1)?;
            let m = fd.cummax(x, -2)?;
            let p = fd.cumprod(i, 0)?;
            let n = fd.cummin(i, 1)?;
            let a = fd.cummax(b, 0)?;
            let bb = fd.broadcast(b, &[true, false])?;
            let e = fd.expand(bb, &[Size::Const(3), Size::Const(-1)])?;
            let c = fd.cumsum(e, 0)?;
            Ok(vec![s, m, p, n, a, c])
        }),
        vec![
            t(
                &[
                    f16::from_f32(1.5),
                    f16::from_f32(-2.0),
                    f16::from_f32(0.25),
                    f16::from_f32(4.0),
                ],
                &[2, 2],
            ),
            t(&[3i32, -1, 7, 2], &[2, 2]),
            t(&[false, true], &[2]),
        ],
    ));
    out
}

/// Every mutation of one leaf of `v` (numbers, bools, enum names).
fn mutations(v: &serde_json::Value) -> Vec<serde_json::Value> {
    use serde_json::Value;
    let numbers: [i64; 9] = [0, 1, 2, 3, 1000, -1, -2, i64::MAX, i64::MIN];
    let names = [
        "Bool",
        "I32",
        "I64",
        "F16",
        "BF16",
        "F32",
        "F64",
        "Iteration",
        "Broadcast",
        "Expanded",
        "Reduction",
    ];
    match v {
        Value::Number(_) => numbers.iter().map(|&n| Value::from(n)).collect(),
        Value::Bool(b) => vec![Value::Bool(!b)],
        Value::String(s) if names.contains(&s.as_str()) => names
            .iter()
            .filter(|n| **n != s)
            .map(|n| Value::from(*n))
            .collect(),
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                for m in mutations(item) {
                    let mut c = items.clone();
                    c[i] = m;
                    out.push(Value::Array(c));
                }
            }
            // Drop or duplicate an element (arity errors).
            if !items.is_empty() {
                out.push(Value::Array(items[1..].to_vec()));
                let mut c = items.clone();
                c.push(items[0].clone());
                out.push(Value::Array(c));
            }
            out
        }
        Value::Object(map) => {
            let mut out = Vec::new();
            for (k, item) in map {
                for m in mutations(item) {
                    let mut c = map.clone();
                    c.insert(k.clone(), m);
                    out.push(Value::Object(c));
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

#[test]
fn malformed_fusions_give_errors_not_panics() {
    let mut tried = 0;
    let mut failed = 0;
    for (f, inputs) in corpus() {
        evaluate(&f, &inputs).unwrap_or_else(|e| panic!("corpus fusion fails: {e}"));
        let json = serde_json::to_value(&f).unwrap();
        for m in mutations(&json) {
            let Ok(g) = serde_json::from_value::<Fusion>(m.clone()) else {
                continue;
            };
            tried += 1;
            let result = std::panic::catch_unwind(|| evaluate(&g, &inputs));
            match result {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => failed += 1,
                Err(_) => panic!(
                    "evaluate panicked on a mutated fusion: {}",
                    serde_json::to_string(&m).unwrap()
                ),
            }
        }
    }
    eprintln!("{tried} mutated fusions, {failed} rejected with an error");
    assert!(tried > 1000, "only {tried} mutations tried");
    assert!(failed > 100, "only {failed} mutations failed");
}
