//! The replay of every op, on every operand dtype the builder accepts, is checked here
//! (the same check the macro makes: one expression per call, structurally equal result),
//! and its tokens parse as Rust statements.

use nvfuser_core::builder::{Contiguity, Slice, TensorSpec};
use nvfuser_core::prelude::*;
use quote::quote;

use nvfuser_core::testing::{
    binary_cases, reduction_cases, scan_cases, sort_cases, ternary_cases, try_build, unary_cases,
};

use super::replay;

/// Replays `fusion`, checking the result and that the tokens are a valid block.
fn check(what: &str, fusion: &Fusion) {
    let r = replay(fusion).unwrap_or_else(|e| panic!("{what}: {e}\n{fusion}"));
    assert_eq!(r.hash, fusion.structural_hash(), "{what}");
    let stmts = &r.stmts;
    let block = quote!({ #stmts });
    if let Err(e) = syn::parse2::<syn::Block>(block.clone()) {
        panic!("{what}: the tokens do not parse: {e}\n{block}");
    }
}

#[test]
fn every_unary_binary_and_ternary_op() {
    let cases = [unary_cases(), binary_cases(), ternary_cases()];
    let counts: Vec<usize> = cases.iter().map(Vec::len).collect();
    assert!(
        counts[0] > 200 && counts[1] > 1000 && counts[2] >= 20,
        "{counts:?}"
    );
    for (what, f) in cases.iter().flatten() {
        check(what, f);
    }
}

#[test]
fn every_reduction_and_the_var_family() {
    let cases = reduction_cases();
    // Every reduction op on several dtypes, plus the two var-family fusions.
    assert!(cases.len() > 5 * 3 * 4, "{} cases", cases.len());
    assert_eq!(
        cases
            .iter()
            .filter(|(n, _)| n.starts_with("var family"))
            .count(),
        2
    );
    for (what, f) in &cases {
        check(what, f);
    }
}

#[test]
fn every_sort_on_every_dtype_and_axis() {
    let cases = sort_cases();
    // Five sorts on the seven dtypes that are not fp8 along three axes.
    assert_eq!(cases.len(), 5 * 7 * 3, "{} cases", cases.len());
    for (what, f) in &cases {
        check(what, f);
    }
}

#[test]
fn every_scan_on_every_dtype_and_axis() {
    let cases = scan_cases();
    // Four scans on nine dtypes along five axes, plus five special shapes each.
    assert_eq!(cases.len(), 4 * 9 * 5 + 4 * 5, "{} cases", cases.len());
    for (what, f) in &cases {
        check(what, f);
    }
}

#[test]
fn shape_indexing_creation_and_layouts() {
    type Case = (&'static str, fn(&mut FusionDefinition) -> Result<ValId>);
    let cases: Vec<Case> = vec![
        ("broadcast_in_dim", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1])?;
            let n = fd.define_scalar(DataType::I64)?;
            fd.broadcast_in_dim(x, &[Size::Const(2), Size::Val(n), Size::Const(-1)], &[2])
        }),
        ("expand and reshape by scalars", |fd| {
            let x = fd.define_tensor(DataType::F32, &[1, -1])?;
            let n = fd.define_scalar(DataType::I64)?;
            let e = fd.expand(x, &[Size::Val(n), Size::Const(-1)])?;
            let m = fd.size(e, 1)?;
            fd.reshape(e, &[Size::Val(m), Size::Const(-1)])
        }),
        ("permute", |fd| {
            let x = fd.define_tensor(DataType::BF16, &[-1, 2, 3])?;
            fd.permute(x, &[2, 0, -2])
        }),
        ("squeeze", |fd| {
            let x = fd.define_tensor(DataType::F32, &[1, -1, 1])?;
            fd.squeeze(x, &[0, 2])
        }),
        ("slice with scalar bounds", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, 10])?;
            let a = fd.define_scalar(DataType::I64)?;
            let b = fd.define_scalar(DataType::I32)?;
            fd.slice(
                x,
                &[
                    Slice::range(Size::Val(a), Size::Val(b)),
                    Slice::step(-4, i64::MAX, 2),
                ],
            )
        }),
        ("pad", |fd| {
            let x = fd.define_tensor(DataType::I32, &[-1])?;
            let v = fd.define_scalar(DataType::I32)?;
            fd.pad(x, &[(3, 0)], v)
        }),
        ("pad with scalar widths", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, 4])?;
            let a = fd.define_scalar(DataType::I64)?;
            let n = fd.size(x, 0)?;
            let two = fd.constant(2i64);
            let b = fd.binary(nvfuser_core::ir::BinaryOp::Remainder, n, two)?;
            let v = fd.constant(0.5);
            fd.pad_sizes(
                x,
                &[
                    (Size::Val(a), Size::Const(1)),
                    (Size::Const(0), Size::Val(b)),
                ],
                v,
            )
        }),
        ("scatter and scatter_add", |fd| {
            let x = fd.define_tensor(DataType::F16, &[-1, 5])?;
            let i = fd.define_tensor(DataType::I32, &[-1, 3])?;
            let s = fd.define_tensor(DataType::F16, &[-1, 4])?;
            let v = fd.constant(2.0);
            let a = fd.scatter_add(x, 1, i, s)?;
            let b = fd.scatter(a, -1, i, s)?;
            fd.scatter(b, 1, i, v)
        }),
        ("cat", |fd| {
            let a = fd.define_tensor(DataType::F16, &[-1, 4])?;
            let b = fd.define_tensor(DataType::F16, &[2, 4])?;
            fd.cat(&[a, b, a], -2)
        }),
        ("full", |fd| {
            let v = fd.define_scalar(DataType::F64)?;
            fd.full(&[Size::Const(3), Size::Const(1)], v, DataType::BF16)
        }),
        ("iota", |fd| {
            let start = fd.constant(0.5);
            let step = fd.define_scalar(DataType::F32)?;
            fd.iota(Size::Const(16), start, step, DataType::F32)
        }),
        ("uniform and normal", |fd| {
            let n = fd.define_scalar(DataType::I64)?;
            let (lo, hi) = (fd.constant(-1.0), fd.constant_of(2.0, DataType::F32));
            let seed = fd.constant(42i64);
            let offset = fd.define_scalar(DataType::I64)?;
            let sizes = [Size::Val(n), Size::Const(8)];
            let u = fd.uniform(&sizes, lo, hi, seed, offset, DataType::F32)?;
            let g = fd.normal(&sizes, lo, hi, seed, offset, DataType::F32)?;
            fd.add(u, g)
        }),
        ("select, index_select, gather, take_along_axis", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, 3])?;
            let i = fd.define_tensor(DataType::I32, &[1, 3])?;
            let j = fd.define_tensor(DataType::I64, &[-1])?;
            let k = fd.define_scalar(DataType::I64)?;
            let t = fd.take_along_axis(x, i, 1)?;
            let g = fd.gather(x, -1, i)?;
            let s = fd.index_select(x, 0, j)?;
            let s = fd.select(s, 0, Size::Val(k))?;
            let tg = fd.add(t, g)?;
            fd.add(tg, s)
        }),
        ("set and segment_set", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1])?;
            let y = fd.set(x)?;
            fd.segment_set(y)
        }),
        ("special constants", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1])?;
            let (nan, inf) = (
                fd.constant_of(f64::NAN, DataType::F32),
                fd.constant(f64::NEG_INFINITY),
            );
            let (z, min) = (fd.constant(-0.0), fd.constant(i64::MIN));
            let y = fd.add(x, nan)?;
            let y = fd.maximum(y, inf)?;
            let y = fd.mul(y, z)?;
            let m = fd.cast(min, DataType::F32)?;
            let y = fd.sub(y, m)?;
            fd.add(y, nan)
        }),
        ("layouts", |fd| {
            let a = fd.define_tensor_spec(
                TensorSpec::new(DataType::F32, &[-1, 1, 8])
                    .contiguity(Contiguity::PerDim(vec![Some(false), None, Some(true)]))
                    .stride_order(&[0, 1, 2]),
            )?;
            let b = fd.define_tensor_spec(
                TensorSpec::new(DataType::F32, &[-1, 1, -1]).expanded(&[true, false, false]),
            )?;
            let c = fd.define_tensor_spec(
                TensorSpec::new(DataType::F32, &[4, 1, 8]).static_sizes(true),
            )?;
            let _unused = fd.define_tensor(DataType::F32, &[-1])?;
            let ab = fd.add(a, b)?;
            let c = fd.sum(c, &[1], true)?;
            fd.add(ab, c)
        }),
        ("rank-0 tensor", |fd| {
            let x = fd.define_tensor(DataType::F32, &[])?;
            let y = fd.define_tensor(DataType::F32, &[-1])?;
            fd.add(x, y)
        }),
    ];
    for (what, body) in cases {
        let f = try_build(body).unwrap_or_else(|| panic!("{what}: the builder rejected the case"));
        check(what, &f);
    }
}

#[test]
fn several_outputs_and_in_place() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let acc = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.add(acc, x).unwrap();
    let s = fd.sum(x, &[1], false).unwrap();
    fd.add_output(s).unwrap();
    fd.add_output_alias(y, acc).unwrap();
    fd.add_output(x).unwrap();
    check("outputs", &fd.finish().unwrap());
}

#[test]
fn ir_that_no_builder_call_produces_is_reported() {
    // A cast from f32 to f32 (the builder returns the operand itself for that), made by
    // editing serialized IR.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.cast(x, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    let json = serde_json::to_string(&fd.finish().unwrap()).unwrap();
    let edited: Fusion = serde_json::from_str(&json.replace("\"BF16\"", "\"F32\"")).unwrap();
    let err = replay(&edited).err().expect("a divergence");
    assert!(
        err.contains("expression 0 (cast): the builder call appended 0 expressions"),
        "{err}"
    );
}
