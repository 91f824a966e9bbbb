//! Property test: random fusions, built from random sequences of builder calls, print as
//! reproducers deterministically and rebuild into structurally equal fusions with equal
//! hashes; mutating one constant or one axis makes fusions unequal.

use nvfuser_core::builder::Slice;
use nvfuser_core::dsl;
use nvfuser_core::dtype::round_to;
use nvfuser_core::ir::{BinaryOp, ReductionOp, ScanOp, UnaryOp};
use nvfuser_core::prelude::*;
use proptest::prelude::*;
use serde_json::Value as Json;

#[derive(Clone, Debug)]
enum Const {
    F64(f64),
    F32(f32),
    I64(i64),
    I32(i32),
    Bool(bool),
}

#[derive(Clone, Debug)]
enum Step {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    BinaryConst(usize, usize, Const, bool),
    Cast(usize, usize),
    Reduce(usize, usize, i64, bool),
    Scan(usize, usize, i64),
    VarMean(usize, i64, i64, bool),
    Unsqueeze(usize, i64),
    Permute(usize, u8),
    Where(usize, usize, usize),
    Size(usize, i64),
    Expand(usize, usize),
    Slice(usize, i64, i64, i64),
    Pad(usize, i64, i64, Const),
    Cat(usize, usize, i64),
    Squeeze(usize),
    Reshape(usize),
    Set(usize),
}

fn konst() -> impl Strategy<Value = Const> {
    prop_oneof![
        (-8.0f64..8.0).prop_map(Const::F64),
        (-8.0f32..8.0).prop_map(Const::F32),
        (-8i64..8).prop_map(Const::I64),
        (-8i32..8).prop_map(Const::I32),
        any::<bool>().prop_map(Const::Bool),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let i = || any::<usize>();
    prop_oneof![
        (i(), i()).prop_map(|(a, b)| Step::Unary(a, b)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Binary(a, b, c)),
        (i(), i(), konst(), any::<bool>()).prop_map(|(a, b, c, d)| Step::BinaryConst(a, b, c, d)),
        (i(), i()).prop_map(|(a, b)| Step::Cast(a, b)),
        (i(), i(), -3i64..3, any::<bool>()).prop_map(|(a, b, c, d)| Step::Reduce(a, b, c, d)),
        (i(), i(), -3i64..3).prop_map(|(a, b, c)| Step::Scan(a, b, c)),
        (i(), -3i64..3, 0i64..2, any::<bool>()).prop_map(|(a, b, c, d)| Step::VarMean(a, b, c, d)),
        (i(), -3i64..3).prop_map(|(a, b)| Step::Unsqueeze(a, b)),
        (i(), any::<u8>()).prop_map(|(a, b)| Step::Permute(a, b)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Where(a, b, c)),
        (i(), -3i64..3).prop_map(|(a, b)| Step::Size(a, b)),
        (i(), i()).prop_map(|(a, b)| Step::Expand(a, b)),
        (i(), -4i64..4, -4i64..6, 1i64..3).prop_map(|(a, b, c, d)| Step::Slice(a, b, c, d)),
        (i(), 0i64..3, 0i64..3, konst()).prop_map(|(a, b, c, d)| Step::Pad(a, b, c, d)),
        (i(), i(), -2i64..2).prop_map(|(a, b, c)| Step::Cat(a, b, c)),
        i().prop_map(Step::Squeeze),
        i().prop_map(Step::Reshape),
        i().prop_map(Step::Set),
    ]
}

/// An input: dtype index and dims (-1 symbolic, 1 broadcast, else static).
type Input = (usize, Vec<i64>);

fn input() -> impl Strategy<Value = Input> {
    (
        0usize..7,
        prop::collection::vec(prop_oneof![Just(-1i64), Just(1), 2i64..5], 0..4),
    )
}

fn make_const(fd: &mut FusionDefinition, c: &Const) -> ValId {
    match *c {
        Const::F64(v) => fd.constant(v),
        Const::F32(v) => fd.constant_of(v as f64, DataType::F32),
        Const::I64(v) => fd.constant(v),
        Const::I32(v) => fd.constant_of(v as i64, DataType::I32),
        Const::Bool(v) => fd.constant(v),
    }
}

/// Runs the steps; each picks its operands from everything made so far and is skipped
/// when the builder rejects it.
fn build(inputs: &[Input], scalars: &[usize], steps: &[Step], alias: bool) -> Option<Fusion> {
    let mut fd = FusionDefinition::new();
    let mut pool: Vec<ValId> = Vec::new();
    let mut tensors_in = Vec::new();
    for (d, dims) in inputs {
        let t = fd.define_tensor(DataType::ALL[*d], dims).ok()?;
        pool.push(t);
        tensors_in.push(t);
    }
    for &d in scalars {
        pool.push(fd.define_scalar(DataType::ALL[d]).ok()?);
    }
    let pick = |pool: &[ValId], i: usize| pool[i % pool.len()];
    for s in steps {
        let p = &pool;
        let r: Result<Vec<ValId>> = match s {
            Step::Unary(op, a) => fd
                .unary(UnaryOp::ALL[op % UnaryOp::ALL.len()], pick(p, *a))
                .map(|v| vec![v]),
            Step::Binary(op, a, b) => fd
                .binary(
                    BinaryOp::ALL[op % BinaryOp::ALL.len()],
                    pick(p, *a),
                    pick(p, *b),
                )
                .map(|v| vec![v]),
            Step::BinaryConst(op, a, c, left) => {
                let c = make_const(&mut fd, c);
                pool.push(c);
                let (x, y) = if *left {
                    (c, pick(&pool, *a))
                } else {
                    (pick(&pool, *a), c)
                };
                fd.binary(BinaryOp::ALL[op % BinaryOp::ALL.len()], x, y)
                    .map(|v| vec![v])
            }
            Step::Cast(a, d) => fd.cast(pick(p, *a), DataType::ALL[d % 7]).map(|v| vec![v]),
            Step::Reduce(op, a, axis, keepdim) => fd
                .reduction(
                    ReductionOp::ALL[op % ReductionOp::ALL.len()],
                    pick(p, *a),
                    &[*axis],
                    *keepdim,
                )
                .map(|v| vec![v]),
            Step::Scan(op, a, axis) => fd
                .scan(ScanOp::ALL[op % ScanOp::ALL.len()], pick(p, *a), *axis)
                .map(|v| vec![v]),
            Step::VarMean(a, axis, corr, keepdim) => fd
                .var_mean(pick(p, *a), &[*axis], *corr, *keepdim)
                .map(|(v, m)| vec![v, m]),
            Step::Unsqueeze(a, axis) => fd.unsqueeze(pick(p, *a), *axis).map(|v| vec![v]),
            Step::Permute(a, seed) => {
                let x = pick(p, *a);
                let rank = fd.fusion().tensor_type(x).map_or(0, |t| t.rank()) as i64;
                let perm: Vec<i64> = (0..rank)
                    .map(|i| (i + *seed as i64) % rank.max(1))
                    .collect();
                fd.permute(x, &perm).map(|v| vec![v])
            }
            Step::Where(c, a, b) => {
                let c = pick(p, *c);
                match fd.fusion().val(c).dtype {
                    DataType::Bool => fd.where_(c, pick(p, *a), pick(p, *b)).map(|v| vec![v]),
                    _ => continue,
                }
            }
            Step::Size(a, axis) => fd.size(pick(p, *a), *axis).map(|v| vec![v]),
            Step::Expand(a, s) => {
                let x = pick(p, *a);
                let n = pick(p, *s);
                let Some(t) = fd.fusion().tensor_type(x) else {
                    continue;
                };
                let sizes: Vec<Size> = t
                    .shape()
                    .map(|d| {
                        if d.is_broadcast_like() {
                            Size::Val(n)
                        } else {
                            Size::Const(-1)
                        }
                    })
                    .collect();
                fd.expand(x, &sizes).map(|v| vec![v])
            }
            Step::Slice(a, start, stop, step) => {
                let x = pick(p, *a);
                let rank = fd.fusion().tensor_type(x).map_or(0, |t| t.rank());
                let mut ranges = vec![Slice::all(); rank];
                if let Some(r) = ranges.last_mut() {
                    *r = Slice::step(*start, *stop, *step);
                }
                fd.slice(x, &ranges).map(|v| vec![v])
            }
            Step::Pad(a, lo, hi, c) => {
                let x = pick(p, *a);
                let rank = fd.fusion().tensor_type(x).map_or(0, |t| t.rank());
                let mut widths = vec![(0, 0); rank];
                if let Some(w) = widths.first_mut() {
                    *w = (*lo, *hi);
                }
                let c = make_const(&mut fd, c);
                fd.pad(x, &widths, c).map(|v| vec![v])
            }
            Step::Cat(a, b, axis) => fd.cat(&[pick(p, *a), pick(p, *b)], *axis).map(|v| vec![v]),
            Step::Squeeze(a) => {
                let x = pick(p, *a);
                let Some(t) = fd.fusion().tensor_type(x) else {
                    continue;
                };
                let axes: Vec<i64> = t
                    .shape()
                    .enumerate()
                    .filter(|(_, d)| d.is_broadcast_like())
                    .map(|(i, _)| i as i64)
                    .take(1)
                    .collect();
                fd.squeeze(x, &axes).map(|v| vec![v])
            }
            Step::Reshape(a) => fd.reshape(pick(p, *a), &[Size::Const(-1)]).map(|v| vec![v]),
            Step::Set(a) => fd.set(pick(p, *a)).map(|v| vec![v]),
        };
        if let Ok(vs) = r {
            pool.extend(vs);
        }
    }
    let tensors: Vec<ValId> = pool
        .iter()
        .copied()
        .filter(|&v| fd.fusion().val(v).is_tensor())
        .collect();
    let last = *tensors.last()?;
    fd.add_output(last).ok()?;
    if tensors.len() > 2 {
        fd.add_output(tensors[tensors.len() / 2]).ok()?;
    }
    if alias {
        // Store the last result into the first input of the same dtype and rank, if any.
        let (d, r) = (
            fd.fusion().val(last).dtype,
            fd.fusion().tensor_type(last)?.rank(),
        );
        if let Some(&inp) = tensors_in.iter().find(|&&i| {
            fd.fusion().val(i).dtype == d && fd.fusion().tensor_type(i).map(|t| t.rank()) == Some(r)
        }) {
            fd.add_output_alias(last, inp).ok()?;
        }
    }
    fd.finish().ok()
}

/// Changes the first used constant (by value) in the serialized fusion.
fn mutate_constant(fusion: &Fusion) -> Option<Fusion> {
    let used = fusion
        .exprs()
        .flat_map(|(_, e)| e.inputs.iter().copied())
        .find(|&v| fusion.val(v).constant().is_some())?;
    let dtype = fusion.val(used).dtype;
    let mut json = serde_json::to_value(fusion).ok()?;
    let scalar = json["vals"][used.index()]["kind"]["Scalar"].as_object_mut()?;
    let (k, v) = scalar.iter_mut().next()?;
    *v = match k.as_str() {
        // Stay representable in the constant's type, as every builder-made constant is.
        "Float" => Json::from(round_to(v.as_f64()? + 1.0, dtype)),
        "Int" => Json::from(v.as_i64()? + 1),
        _ => Json::from(!v.as_bool()?),
    };
    serde_json::from_value(json).ok()
}

/// Changes the first axis attribute (axes, axis, mask entry or perm) of any expression.
fn mutate_axis(fusion: &Fusion) -> Option<Fusion> {
    let mut json = serde_json::to_value(fusion).ok()?;
    for e in json["exprs"].as_array_mut()? {
        let Some(op) = e["op"].as_object_mut() else {
            continue;
        };
        let Some((_, attrs)) = op.iter_mut().next() else {
            continue;
        };
        let Some(attrs) = attrs.as_object_mut() else {
            continue;
        };
        for key in ["axes", "axis", "perm", "mask"] {
            match attrs.get_mut(key) {
                Some(Json::Array(a)) if !a.is_empty() => {
                    a[0] = match &a[0] {
                        Json::Bool(b) => Json::from(!b),
                        n => Json::from(n.as_u64()? + 1),
                    };
                    return serde_json::from_value(json).ok();
                }
                Some(n @ Json::Number(_)) => {
                    *n = Json::from(n.as_u64()? + 1);
                    return serde_json::from_value(json).ok();
                }
                _ => {}
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_fusions_round_trip(
        inputs in prop::collection::vec(input(), 1..4),
        scalars in prop::collection::vec(0usize..7, 0..3),
        steps in prop::collection::vec(step(), 1..20),
        alias in any::<bool>(),
    ) {
        let Some(fusion) = build(&inputs, &scalars, &steps, alias) else { return Ok(()) };
        let src = fusion.to_reproducer("random");
        prop_assert_eq!(&src, &fusion.to_reproducer("random"), "printing twice gives the same text");
        let built = dsl::build_str(&src).map_err(|errs| {
            let msgs: String = errs.iter().map(|e| e.render(&src)).collect();
            TestCaseError::fail(format!("the reproducer does not build:\n{msgs}\n{src}\n{fusion}"))
        })?;
        let rebuilt = &built[0].0;
        prop_assert!(*rebuilt == fusion, "not equal:\n{}\n{}\n{}", src, fusion, rebuilt);
        prop_assert_eq!(rebuilt.structural_hash(), fusion.structural_hash());

        if let Some(m) = mutate_constant(&fusion) {
            prop_assert!(m != fusion && m != *rebuilt, "a changed constant must change identity");
            prop_assert_ne!(m.structural_hash(), fusion.structural_hash());
            // The change shows in the reproducer and survives its round trip.
            let msrc = m.to_reproducer("random");
            prop_assert_ne!(&msrc, &src);
            let mbuilt = dsl::build_str(&msrc).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert!(mbuilt[0].0 == m);
            prop_assert!(mbuilt[0].0 != fusion);
        }
        if let Some(m) = mutate_axis(&fusion) {
            prop_assert!(m != fusion && m != *rebuilt, "a changed axis must change identity");
            prop_assert_ne!(m.structural_hash(), fusion.structural_hash());
            prop_assert_ne!(m.to_reproducer("random"), src);
        }
    }
}
