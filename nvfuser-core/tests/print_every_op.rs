//! Every builder op, on every operand dtype it accepts, survives the reproducer round trip
//! (fusion -> `fusion!` source -> parse -> build -> structurally equal fusion).

use nvfuser_core::builder::Slice;
use nvfuser_core::dsl;
use nvfuser_core::prelude::*;
use nvfuser_core::testing::{
    binary_cases, reduction_cases, scan_cases, sort_cases, ternary_cases, try_build, unary_cases,
};

fn round_trip(what: &str, fusion: &Fusion) {
    let src = fusion.to_reproducer("op");
    let built = dsl::build_str(&src).unwrap_or_else(|errs| {
        let msgs: String = errs.iter().map(|e| e.render(&src)).collect();
        panic!("{what}: the reproducer does not build:\n{msgs}\n{src}")
    });
    let rebuilt = &built[0].0;
    assert!(
        rebuilt == fusion,
        "{what}: not equal\n{fusion}\n{rebuilt}\n{src}"
    );
    assert_eq!(
        rebuilt.structural_hash(),
        fusion.structural_hash(),
        "{what}"
    );
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
        round_trip(what, f);
    }
}

#[test]
fn every_reduction_with_and_without_keepdim() {
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
        round_trip(what, f);
    }
}

#[test]
fn every_sort_on_every_dtype_and_axis() {
    let cases = sort_cases();
    // Five sorts on the seven dtypes that are not fp8 along three axes.
    assert_eq!(cases.len(), 5 * 7 * 3, "{} cases", cases.len());
    for (what, f) in &cases {
        round_trip(what, f);
    }
}

#[test]
fn every_scan_on_every_dtype_and_axis() {
    let cases = scan_cases();
    // Four scans on nine dtypes along five axes, plus five special shapes each.
    assert_eq!(cases.len(), 4 * 9 * 5 + 4 * 5, "{} cases", cases.len());
    for (what, f) in &cases {
        round_trip(what, f);
    }
}

#[test]
fn shape_indexing_and_creation_ops() {
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
        ("permute 3d", |fd| {
            let x = fd.define_tensor(DataType::BF16, &[-1, 2, 3])?;
            fd.permute(x, &[2, 0, -2])
        }),
        ("squeeze static one", |fd| {
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
        ("pad with a scalar input", |fd| {
            let x = fd.define_tensor(DataType::I32, &[-1])?;
            let v = fd.define_scalar(DataType::I32)?;
            fd.pad(x, &[(3, 0)], v)
        }),
        ("cat of three", |fd| {
            let a = fd.define_tensor(DataType::F16, &[-1, 4])?;
            let b = fd.define_tensor(DataType::F16, &[2, 4])?;
            let c = fd.define_tensor(DataType::F16, &[-1, 4])?;
            fd.cat(&[a, b, c], -2)
        }),
        ("full of a scalar", |fd| {
            let v = fd.define_scalar(DataType::F64)?;
            fd.full(&[Size::Const(3), Size::Const(1)], v, DataType::BF16)
        }),
        ("iota float", |fd| {
            let start = fd.constant(0.5);
            let step = fd.define_scalar(DataType::F32)?;
            fd.iota(Size::Const(16), start, step, DataType::F32)
        }),
        ("normal", |fd| {
            let n = fd.define_scalar(DataType::I64)?;
            let mean = fd.constant(0.0);
            let std = fd.constant_of(2.0, DataType::F32);
            let seed = fd.constant(42i64);
            let offset = fd.define_scalar(DataType::I64)?;
            fd.normal(
                &[Size::Val(n), Size::Const(8)],
                mean,
                std,
                seed,
                offset,
                DataType::F16,
            )
        }),
        ("select by a scalar", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
            let i = fd.define_scalar(DataType::I64)?;
            fd.select(x, 0, Size::Val(i))
        }),
        ("gather on broadcast index", |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, 8])?;
            let i = fd.define_tensor(DataType::I32, &[1, 3])?;
            let t = fd.take_along_axis(x, i, 1)?;
            let g = fd.gather(x, -1, i)?;
            fd.add(t, g)
        }),
        ("input passed through", |fd| {
            fd.define_tensor(DataType::F32, &[-1])
        }),
        ("scalar-only arithmetic", |fd| {
            let a = fd.define_scalar(DataType::F32)?;
            let b = fd.constant(3i64);
            let c = fd.mul(a, b)?;
            let c = fd.exp(c)?;
            fd.cast(c, DataType::I32)
        }),
        ("rank-0 tensor", |fd| {
            let x = fd.define_tensor(DataType::F32, &[])?;
            let y = fd.define_tensor(DataType::F32, &[-1])?;
            fd.add(x, y)
        }),
    ];
    for (what, body) in cases {
        let f = try_build(body).unwrap_or_else(|| panic!("{what}: the builder rejected the case"));
        round_trip(what, &f);
    }
}
