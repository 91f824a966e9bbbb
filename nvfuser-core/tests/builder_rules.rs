//! Shape, dtype and error rules of the definition builder, and structural identity.

use nvfuser_core::builder::Slice;
use nvfuser_core::ir::{Extent, IterKind, Op};
use nvfuser_core::prelude::*;

fn dims(fd: &FusionDefinition, v: ValId) -> Vec<(Option<i64>, IterKind)> {
    fd.fusion()
        .tensor_type(v)
        .unwrap()
        .domain
        .iter()
        .map(|d| (d.extent.as_const(), d.kind))
        .collect()
}

fn dtype(fd: &FusionDefinition, v: ValId) -> DataType {
    fd.fusion().val(v).dtype
}

#[test]
fn elementwise_promotion_through_the_builder() {
    use DataType::*;
    let mut fd = FusionDefinition::new();
    let h = fd.define_tensor(F16, &[-1]).unwrap();
    let b = fd.define_tensor(BF16, &[-1]).unwrap();
    let i = fd.define_tensor(I32, &[-1]).unwrap();
    let l = fd.define_tensor(I64, &[-1]).unwrap();
    let c = fd.constant(2.5);
    let k = fd.constant(3i64);
    let cases = [
        (fd.add(h, b).unwrap(), F32),
        (fd.mul(h, c).unwrap(), F16),
        (fd.mul(i, c).unwrap(), F32),
        (fd.add(i, k).unwrap(), I32),
        (fd.add(i, l).unwrap(), I64),
        (fd.div(i, l).unwrap(), I64),
        (fd.truediv(i, l).unwrap(), F32),
        (fd.lt(h, b).unwrap(), Bool),
        (fd.exp(i).unwrap(), F32),
        (fd.abs(i).unwrap(), I32),
        (fd.isnan(b).unwrap(), Bool),
        (fd.bitwise_and(i, l).unwrap(), I64),
    ];
    for (n, (v, want)) in cases.into_iter().enumerate() {
        assert_eq!(dtype(&fd, v), want, "case {n}");
    }
}

#[test]
fn rank_extension_inserts_an_explicit_broadcast() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 4096]).unwrap();
    let w = fd.define_tensor(DataType::F32, &[4096]).unwrap();
    let y = fd.add(x, w).unwrap();
    assert_eq!(
        dims(&fd, y),
        vec![
            (None, IterKind::Iteration),
            (Some(4096), IterKind::Iteration)
        ]
    );
    let ops: Vec<&str> = fd.fusion().exprs().map(|(_, e)| e.op.name()).collect();
    assert_eq!(ops, ["broadcast", "add"]);
    // The first dim's extent is the runtime size of x's dim 0.
    let t = fd.fusion().tensor_type(y).unwrap();
    assert_eq!(t.domain[0].extent, Extent::Dim { tensor: x, axis: 0 });
}

#[test]
fn reductions_keepdim_and_half_accumulation() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let s = fd.sum(x, &[-1], true).unwrap();
    assert_eq!(dtype(&fd, s), DataType::BF16);
    assert_eq!(dims(&fd, s)[1], (Some(1), IterKind::Broadcast));
    let ops: Vec<&str> = fd.fusion().exprs().map(|(_, e)| e.op.name()).collect();
    assert_eq!(ops, ["cast", "sum", "cast", "broadcast"]);
    // The reduction itself runs in f32 and keeps its reduced dim as a reduction dim.
    let (_, red) = fd.fusion().exprs().nth(1).unwrap();
    let r = red.outputs[0];
    assert_eq!(dtype(&fd, r), DataType::F32);
    assert_eq!(dims(&fd, r)[1].1, IterKind::Reduction);
    assert_eq!(fd.fusion().tensor_type(r).unwrap().rank(), 1);
    // Integer sums accumulate in i64.
    let i = fd.define_tensor(DataType::I32, &[-1]).unwrap();
    let si = fd.sum(i, &[0], false).unwrap();
    assert_eq!(dtype(&fd, si), DataType::I64);
    assert_eq!(fd.fusion().tensor_type(si).unwrap().rank(), 0);
    let (var, mean) = fd.var_mean(x, &[1], 1, false).unwrap();
    assert_eq!(
        (dtype(&fd, var), dtype(&fd, mean)),
        (DataType::BF16, DataType::BF16)
    );
    let (m, v, n) = fd.welford(x, &[0, 1]).unwrap();
    assert_eq!(
        (dtype(&fd, m), dtype(&fd, v), dtype(&fd, n)),
        (DataType::F32, DataType::F32, DataType::I64)
    );
}

#[test]
fn shape_ops_compute_extents() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[8, -1, 6]).unwrap();
    let p = fd.permute(x, &[2, 0, 1]).unwrap();
    assert_eq!(dims(&fd, p)[0].0, Some(6));
    let r = fd.reshape(x, &[Size::Const(4), Size::Const(-1)]).unwrap();
    let t = fd.fusion().tensor_type(r).unwrap();
    assert_eq!(t.domain[0].extent, Extent::Const(4));
    assert_eq!(
        t.domain[1].extent.to_string(),
        // 8 * n * 6 / 4, with the constants cancelled (the launcher checks the division).
        format!("({x}.size(1) * 12)")
    );
    let s = fd
        .slice(
            x,
            &[
                Slice::range(1, 7),
                Slice::all(),
                Slice::step(-5, i64::MAX, 2),
            ],
        )
        .unwrap();
    let sd = dims(&fd, s);
    assert_eq!(sd[0].0, Some(6));
    assert_eq!(sd[2].0, Some(3)); // indices 1, 3, 5
    let z = fd.constant(0.0);
    let pd = fd.pad(x, &[(0, 0), (0, 0), (2, 1)], z).unwrap();
    assert_eq!(dims(&fd, pd)[2].0, Some(9));
    let c = fd.cat(&[x, pd], 2).unwrap();
    assert_eq!(dims(&fd, c)[2].0, Some(15));
    let u = fd.unsqueeze(x, -1).unwrap();
    assert_eq!(dims(&fd, u)[3], (Some(1), IterKind::Broadcast));
    let q = fd.squeeze(u, &[3]).unwrap();
    assert_eq!(fd.fusion().tensor_type(q).unwrap().rank(), 3);
    let e = fd
        .expand(
            u,
            &[
                Size::Const(-1),
                Size::Const(-1),
                Size::Const(-1),
                Size::Const(5),
            ],
        )
        .unwrap();
    assert_eq!(dims(&fd, e)[3], (Some(5), IterKind::Expanded));
    let n = fd.size(x, 1).unwrap();
    let r2 = fd.reshape(x, &[Size::Val(n), Size::Const(48)]).unwrap();
    // A size given by `x.size(1)` has x's own extent for that dim (the value still
    // reaches the op as its input).
    assert_eq!(
        fd.fusion().tensor_type(r2).unwrap().domain[0].extent,
        fd.fusion().tensor_type(x).unwrap().domain[1].extent
    );
    let (_, last) = fd.fusion().exprs().last().unwrap();
    assert!(matches!(last.op, Op::Reshape { .. }));
    assert_eq!(last.inputs.as_slice(), &[x, n]);
    // Other integer scalars are extents of their own.
    let m = fd.mul(n, n).unwrap();
    let f2 = fd.full(&[Size::Val(m)], n, DataType::I64).unwrap();
    assert_eq!(
        fd.fusion().tensor_type(f2).unwrap().domain[0].extent,
        Extent::Scalar(m)
    );
}

/// One test per error class, checking the message says what was expected and found.
#[test]
fn builder_errors_name_expected_and_found() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[4, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[5, -1]).unwrap();
    let i = fd.define_tensor(DataType::I32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let f = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let msg = |r: Result<ValId>| r.unwrap_err().to_string();

    assert_eq!(
        msg(fd.add(x, y)),
        "add: shape mismatch: expected shapes that broadcast, e.g. [4, v0.size(1)], found [5, v1.size(1)] (dim 0 differs)"
    );
    assert_eq!(
        msg(fd.sum(x, &[2], false)),
        "sum: axis 2 is out of range for a tensor of rank 2 (expected -2..2)"
    );
    assert_eq!(
        msg(fd.bitwise_and(x, i)),
        "bitwise_and: expected integer or bool operands, found f32 and i32"
    );
    assert_eq!(
        msg(fd.frac(i)),
        "frac: expected a floating point type, found i32"
    );
    assert_eq!(
        msg(fd.sum(s, &[0], false)),
        "sum: expected a tensor, found a scalar of type f32"
    );
    assert_eq!(
        msg(fd.mean(i, &[0], false)),
        "mean: expected a floating point tensor (cast integers first), found i32"
    );
    assert_eq!(
        msg(fd.permute(x, &[0, 0])),
        "permute: invalid argument: [0, 0] is not a permutation: dim 0 appears twice"
    );
    assert_eq!(
        msg(fd.reshape(x, &[Size::Const(-1), Size::Const(-1)])),
        "reshape: invalid argument: sizes [Const(-1), Const(-1)]: at most one -1 may be inferred, found 2"
    );
    assert_eq!(msg(fd.squeeze(x, &[0])), "squeeze: shape mismatch: expected a size-1 (broadcast) dim at axis 0, found a dim of size 4");
    assert_eq!(
        msg(fd.where_(x, x, x)),
        "where_: expected a bool condition, found f32"
    );
    assert_eq!(
        msg(fd.cat(&[x, i], 0)),
        "cat: expected f32 like the first tensor (cast first), found i32"
    );
    assert_eq!(
        msg(fd.broadcast(x, &[true, false])),
        "broadcast: expected rank 1 (the false entries of the mask), found rank 2"
    );
    assert_eq!(
        msg(fd.index_select(x, 0, f)),
        "index_select: expected an integer index tensor, found f32"
    );
    assert_eq!(msg(fd.define_tensor(DataType::F32, &[-2])), "define_tensor: invalid argument: size -2 of dim 0: expected -1 (symbolic), 1 (broadcast) or a static size >= 0");
    assert_eq!(
        msg(fd.ternary(nvfuser_core::ir::TernaryOp::Clamp, &[x, s])),
        "clamp: expected 3 operands, found 2"
    );
    let bogus = ValId::new(999);
    assert!(msg(fd.neg(bogus)).starts_with("neg: value v999 does not belong to this fusion"));
    assert_eq!(
        fd.add_output_alias(i, x).unwrap_err().to_string(),
        "add_output_alias: expected f32 (the input's type), found i32"
    );
    // Nothing was recorded by the failed calls: the fusion is still well formed.
    let ok = fd.relu(x).unwrap();
    fd.add_output(ok).unwrap();
    fd.finish().unwrap();
    assert_eq!(
        FusionDefinition::new().finish().unwrap_err().to_string(),
        "finish: expected 1 outputs (at least), found 0"
    );
}

fn build(c: f64, axis: i64, late_scalar: bool) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let mut s = None;
    if !late_scalar {
        s = Some(fd.define_scalar(DataType::F32).unwrap());
    }
    let k = fd.constant(c);
    let y = fd.mul(x, k).unwrap();
    let r = fd.sum(y, &[axis], true).unwrap();
    let s = match s {
        Some(s) => s,
        None => fd.define_scalar(DataType::F32).unwrap(),
    };
    let z = fd.add(r, s).unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

#[test]
fn structural_identity() {
    let a = build(2.0, 1, false);
    let b = build(2.0, 1, false);
    assert_eq!(a, b);
    assert_eq!(a.structural_hash(), b.structural_hash());
    // Where an input was declared does not matter.
    let late = build(2.0, 1, true);
    assert_eq!(a, late);
    assert_eq!(a.structural_hash(), late.structural_hash());
    // Constants and axes are part of identity.
    assert_ne!(a, build(3.0, 1, false));
    assert_ne!(a, build(2.0, 0, false));
    assert_ne!(a.structural_hash(), build(3.0, 1, false).structural_hash());
}

#[test]
fn verifier_rejects_malformed_ir() {
    let f = build(2.0, 1, false);
    nvfuser_core::ir::verify(&f).unwrap();
    // A serialized fusion edited by hand: an expression reading a value defined later.
    let mut json: serde_json::Value = serde_json::to_value(&f).unwrap();
    let exprs = json["exprs"].as_array_mut().unwrap();
    exprs.swap(0, 1);
    let broken: Fusion = serde_json::from_value(json).unwrap();
    let err = nvfuser_core::ir::verify(&broken).unwrap_err().to_string();
    assert!(err.starts_with("invalid IR:"), "{err}");
}

/// Issue #12 case 11: an id returned by one definition is refused by another, even when
/// its index is in range there, in every way an id reaches an op (operand, size, fill
/// value, output); plain indices (from `ValId::new` or a finished fusion) still work.
#[test]
fn ids_of_another_definition_are_refused() {
    let mut a = FusionDefinition::new();
    let ax = a.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let an = a.define_scalar(DataType::I64).unwrap();
    let ay = a.neg(ax).unwrap();

    let mut b = FusionDefinition::new();
    let bx = b.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let bn = b.define_scalar(DataType::I64).unwrap();
    let by = b.neg(bx).unwrap();
    // Same indices, different definitions.
    assert_eq!(
        (ax.index(), an.index(), ay.index()),
        (bx.index(), bn.index(), by.index())
    );

    let msg = |r: Result<ValId, Error>| r.unwrap_err().to_string();
    assert_eq!(
        msg(b.add(bx, ax)),
        "add: value v0 was returned by another FusionDefinition; use ids of this definition"
    );
    assert!(msg(b.sum(ay, &[0], false)).starts_with("sum: value v2 was returned by another"));
    assert!(msg(b.reshape(bx, &[Size::Val(an), Size::Const(-1)]))
        .starts_with("reshape: value v1 was returned by another"));
    let fill = a.constant(1.5f64);
    assert!(msg(b.full(&[Size::Const(2)], fill, DataType::F32))
        .starts_with("full: value v3 was returned by another"));
    assert!(b
        .add_output(ay)
        .unwrap_err()
        .to_string()
        .starts_with("add_output: value v2 was returned by another"));
    // Nothing was recorded by the refused calls.
    b.add_output(by).unwrap();
    let fusion = b.finish().unwrap();
    assert_eq!(fusion.outputs().len(), 1);

    // An untagged index is taken as an index of whichever definition gets it.
    let z = a.relu(ValId::new(2)).unwrap();
    a.add_output(z).unwrap();
    // A clone shares the definition's ids.
    let mut c = a.clone();
    let w = c.exp(ay).unwrap();
    c.add_output(w).unwrap();
    assert_eq!(c.finish().unwrap().outputs().len(), 2);
    // Ids read back from a finished fusion are plain indices and equal the tagged ones.
    let f = a.finish().unwrap();
    assert_eq!(f.inputs()[0], ax);
    assert_eq!(format!("{ax} {ax:?}"), "v0 ValId(0)");
}
