//! The `fusion!` language: what each construct builds, compared with the builder.

use nvfuser_core::builder::{Contiguity, Slice, TensorSpec};
use nvfuser_core::dsl::{self, DimSig, ParamKind, Severity};
use nvfuser_core::ir::{BinaryOp, IterKind, Op, UnaryOp};
use nvfuser_core::prelude::*;
use nvfuser_core::ScalarValue;

/// Builds the single fn of `src`, panicking with rendered errors.
fn build(src: &str) -> (Fusion, dsl::Signature) {
    match dsl::build_str(src) {
        Ok(mut v) => v.remove(0),
        Err(errs) => panic!("{}", errs.iter().map(|e| e.render(src)).collect::<String>()),
    }
}

fn ops(f: &Fusion) -> Vec<Op> {
    f.exprs().map(|(_, e)| e.op.clone()).collect()
}

const LAYER_NORM: &str = r#"
    /// LayerNorm over the last dim, bf16 in and out, f32 math.
    pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
        -> Tensor<bf16, [N, H]>
    {
        let x = x as f32;
        let mean = x.mean([1]).unsqueeze(1);
        let xc = x - mean;
        let var = (xc * xc).mean([1]).unsqueeze(1);
        let y = xc * rsqrt(var + eps) * (w as f32) + (b as f32);
        y as bf16
    }
"#;

#[test]
fn design_layer_norm_builds_what_the_builder_builds() {
    let (f, sig) = build(LAYER_NORM);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let w = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
    let b = fd.define_tensor(DataType::BF16, &[-1]).unwrap();
    let eps = fd.define_scalar(DataType::F32).unwrap();
    let x = fd.cast(x, DataType::F32).unwrap();
    let mean = fd.mean(x, &[1], true).unwrap();
    let xc = fd.sub(x, mean).unwrap();
    let sq = fd.mul(xc, xc).unwrap();
    let var = fd.mean(sq, &[1], true).unwrap();
    let ve = fd.add(var, eps).unwrap();
    let r = fd.rsqrt(ve).unwrap();
    let y = fd.mul(xc, r).unwrap();
    let wf = fd.cast(w, DataType::F32).unwrap();
    let y = fd.mul(y, wf).unwrap();
    let bf = fd.cast(b, DataType::F32).unwrap();
    let y = fd.add(y, bf).unwrap();
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    let want = fd.finish().unwrap();
    assert!(f == want, "{f}\n{want}");

    assert_eq!(sig.name, "layer_norm");
    assert_eq!(
        sig.docs,
        [" LayerNorm over the last dim, bf16 in and out, f32 math."]
    );
    let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "w", "b", "eps"]);
    assert_eq!(sig.params[3].kind, ParamKind::Scalar(DataType::F32));
    let ParamKind::Tensor(t) = &sig.params[0].kind else {
        panic!()
    };
    assert_eq!(
        t.dims,
        [DimSig::Named("N".into()), DimSig::Named("H".into())]
    );
    assert_eq!(
        sig.named_dims(),
        [
            ("N".to_string(), vec![(0, 0)]),
            ("H".to_string(), vec![(0, 1), (1, 0), (2, 0)])
        ]
    );
    assert_eq!(sig.outputs.len(), 1);
    assert_eq!(sig.outputs[0].ty.dtype, DataType::BF16);
    assert!(!sig.returns_tuple);
    assert_eq!(sig.tensor_params().collect::<Vec<_>>(), [0, 1, 2]);
}

#[test]
fn methods_free_calls_and_keywords_are_the_same_op() {
    let forms = [
        "x.var([1], 0, true)",
        "var(x, [1], 0, true)",
        "x.var([1], correction = 0, keepdim = true)",
        "var(x, keepdim = true, axes = [1], correction = 0)",
        "x.var(1, 0, true)",
    ];
    let fusions: Vec<Fusion> = forms
        .iter()
        .map(|e| {
            build(&format!(
                "fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, 1]> {{ {e} }}"
            ))
            .0
        })
        .collect();
    for f in &fusions[1..] {
        assert!(*f == fusions[0]);
    }
    assert_eq!(
        ops(&fusions[0])[0],
        Op::Var {
            axes: vec![1],
            correction: 0
        }
    );
    // Defaults: correction 1, keepdim false.
    let (f, _) = build("fn f(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.var([-1]) }");
    assert_eq!(
        ops(&f),
        [Op::Var {
            axes: vec![1],
            correction: 1
        }]
    );
}

#[test]
fn operators_map_to_builder_ops() {
    use BinaryOp::*;
    let cases = [
        ("+", Add),
        ("-", Sub),
        ("*", Mul),
        ("/", Div),
        ("%", Fmod),
        ("&", BitwiseAnd),
        ("|", BitwiseOr),
        ("^", BitwiseXor),
        ("<<", ShiftLeft),
        (">>", ShiftRight),
        ("==", Eq),
        ("!=", Ne),
        ("<", Lt),
        ("<=", Le),
        (">", Gt),
        (">=", Ge),
    ];
    for (sym, op) in cases {
        let out = if matches!(op, Eq | Ne | Lt | Le | Gt | Ge) {
            "bool"
        } else {
            "i64"
        };
        let src = format!(
            "fn f(a: Tensor<i64, [_]>, b: Tensor<i64, [_]>) -> Tensor<{out}, [_]> {{ a {sym} b }}"
        );
        assert_eq!(ops(&build(&src).0), [Op::Binary(op)], "{sym}");
    }
    for (sym, op) in [("&&", LogicalAnd), ("||", LogicalOr)] {
        let src = format!(
            "fn f(a: Tensor<bool, [_]>, b: Tensor<bool, [_]>) -> Tensor<bool, [_]> {{ a {sym} b }}"
        );
        assert_eq!(ops(&build(&src).0), [Op::Binary(op)], "{sym}");
    }
    // Prefix operators: `-` is neg, `!` is logical_not on bool and bitwise_not on ints.
    let (f, _) = build("fn f(a: Tensor<f32, [_]>, b: Tensor<bool, [_]>, c: Tensor<i32, [_]>) -> (Tensor<f32, [_]>, Tensor<bool, [_]>, Tensor<i32, [_]>) { (-a, !b, !c) }");
    assert_eq!(
        ops(&f),
        [
            Op::Unary(UnaryOp::Neg),
            Op::Unary(UnaryOp::LogicalNot),
            Op::Unary(UnaryOp::BitwiseNot)
        ]
    );
    // Rust precedence: a + b * c multiplies first.
    let (f, _) = build("fn f(a: Tensor<f32, [_]>, b: Tensor<f32, [_]>, c: Tensor<f32, [_]>) -> Tensor<f32, [_]> { a + b * c }");
    assert_eq!(ops(&f), [Op::Binary(Mul), Op::Binary(Add)]);
}

#[test]
fn literals_become_typed_constants() {
    let src = "fn f(x: Tensor<f32, [_]>) -> Tensor<f32, [_]> {
        let y = x * 2.0 + 2 - -1.5;
        let y = y * 0.1f32 * 2f32 * 3i32;
        let y = where_(y > 0.0, y, f32::NEG_INFINITY);
        let c = 1e-5;
        y + c + c + i64::MAX
    }";
    let (f, _) = build(src);
    let consts: Vec<(DataType, ScalarValue)> = f
        .exprs()
        .flat_map(|(_, e)| e.inputs.clone())
        .filter_map(|v| f.val(v).constant().map(|c| (f.val(v).dtype, c)))
        .collect();
    use DataType::*;
    assert_eq!(
        consts,
        [
            (F64, ScalarValue::Float(2.0)),
            (I64, ScalarValue::Int(2)),
            (F64, ScalarValue::Float(-1.5)),
            (F32, ScalarValue::Float(0.1f32 as f64)),
            (F32, ScalarValue::Float(2.0)),
            (I32, ScalarValue::Int(3)),
            (F64, ScalarValue::Float(0.0)),
            (F32, ScalarValue::Float(f64::NEG_INFINITY)),
            (F64, ScalarValue::Float(1e-5)),
            (F64, ScalarValue::Float(1e-5)),
            (I64, ScalarValue::Int(i64::MAX)),
        ]
    );
    // `let c = 1e-5;` is one constant read twice; each literal is a constant of its own.
    let adds: Vec<_> = f
        .exprs()
        .filter(|(_, e)| e.op == Op::Binary(BinaryOp::Add))
        .map(|(_, e)| e.inputs[1])
        .collect();
    assert_eq!(adds[1], adds[2]);
    // `-1.5` is a constant, not a neg expression.
    assert!(!ops(&f).contains(&Op::Unary(UnaryOp::Neg)));
}

#[test]
fn tuples_shadowing_sizes_and_slices() {
    let src = "fn f(x: Tensor<f32, [N, H]>, n: i64) -> (Tensor<f32, [N, 1]>, Tensor<f32, [N]>, Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
        let (var, mean) = x.var_mean([1], keepdim = true);
        let m = x.var_mean([1]).1;
        let x = x.reshape([x.size(0), -1]);
        let x = x.slice([.., 1..n]);
        let s = x.slice([(0, n, 2), (1, i64::MAX, 3)]);
        let _ = var;
        (mean, m, x, s)
    }";
    let (f, sig) = build(src);
    assert_eq!(sig.outputs.len(), 4);
    assert!(sig.returns_tuple);
    let names: Vec<&str> = ops(&f).iter().map(|o| o.name()).collect();
    assert_eq!(
        names,
        [
            "var_mean",
            "broadcast",
            "broadcast",
            "var_mean",
            "size",
            "reshape",
            "slice",
            "slice"
        ]
    );
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let (_, mean) = fd.var_mean(x, &[1], 1, true).unwrap();
    let (_, m) = fd.var_mean(x, &[1], 1, false).unwrap();
    let s0 = fd.size(x, 0).unwrap();
    let r = fd.reshape(x, &[Size::Val(s0), Size::Const(-1)]).unwrap();
    let r = fd
        .slice(r, &[Slice::all(), Slice::range(1, Size::Val(n))])
        .unwrap();
    let s = fd
        .slice(
            r,
            &[Slice::step(0, Size::Val(n), 2), Slice::step(1, i64::MAX, 3)],
        )
        .unwrap();
    for o in [mean, m, r, s] {
        fd.add_output(o).unwrap();
    }
    assert!(f == fd.finish().unwrap());
}

#[test]
fn every_op_family_by_name() {
    let src = "fn f(x: Tensor<f32, [N, 8]>, i: Tensor<i64, [N, 4]>, r: Tensor<i32, [_]>, seed: i64, off: i64) -> (
        Tensor<f32, [_, _, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_]>, Tensor<f32, [_, _]>, Tensor<i64, [8]>, Tensor<f16, [_, _]>, Tensor<f32, [_, 1]>
    ) {
        let a = x.broadcast_in_dim([2, x.size(0), 8], [1, 2]);
        let b = cat([x.pad([(0, 0), (1, 1)], 0.0), x.gather(1, i).pad([(0, 0), (3, 3)], 1.0)], 0);
        let c = x.index_select(0, r).select(1, 3).segment_set().set();
        let d = addcmul(x, x, x, 0.5).lerp(x, 0.25).clamp(0.0, 1.0).threshold(0.1, 0.0);
        let d = x.take_along_axis(i, 1).permute([1, 0]).unsqueeze(0).squeeze([0]);
        let e = iota(8, 0, 1, i64);
        let g = normal([x.size(0), 8], 0.0, 1.0, seed, off, f16) + uniform([1, 8], 0.0, 1.0, seed, off, f16);
        let h = x.max([1], true) - x.min([1], keepdim = true) + x.prod([1], true) + x.sum(-1, true);
        let (wm, wv, wn) = x.welford([0]);
        let _ = full([4], wm.size(0), i64) + wn.sum([0]);
        let _ = wv;
        (a, b, c, d, e, g, h)
    }";
    let (f, _) = build(src);
    let mut names: Vec<&str> = ops(&f).iter().map(|o| o.name()).collect();
    names.sort_unstable();
    names.dedup();
    for want in [
        "broadcast",
        "expand",
        "size",
        "pad",
        "gather",
        "cat",
        "index_select",
        "select",
        "segment_set",
        "set",
        "addcmul",
        "lerp",
        "clamp",
        "threshold",
        "take_along_axis",
        "permute",
        "squeeze",
        "iota",
        "normal",
        "uniform",
        "max",
        "min",
        "prod",
        "sum",
        "welford",
        "full",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[test]
fn layouts_and_inplace_outputs() {
    let src = "fn f(
        #[layout(contiguity = [false, true], stride_order = [0, 1])] t: Tensor<f32, [_, _]>,
        #[layout(contiguity = false, expanded = [0])] e: Tensor<f32, [8, _]>,
        #[layout(static_sizes = true)] s: Tensor<f32, [6, 1]>,
        acc: Tensor<f32, [_, _]>,
    ) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) {
        let y = t + acc;
        (inplace(y, acc), e + s.squeeze([1]))
    }";
    let (f, sig) = build(src);
    let mut fd = FusionDefinition::new();
    let t = fd
        .define_tensor_spec(
            TensorSpec::new(DataType::F32, &[-1, -1])
                .contiguity(Contiguity::PerDim(vec![Some(false), Some(true)]))
                .stride_order(&[0, 1]),
        )
        .unwrap();
    let e = fd
        .define_tensor_spec(
            TensorSpec::new(DataType::F32, &[8, -1])
                .contiguity(Contiguity::All(false))
                .expanded(&[true, false]),
        )
        .unwrap();
    let s = fd
        .define_tensor_spec(TensorSpec::new(DataType::F32, &[6, 1]).static_sizes(true))
        .unwrap();
    let acc = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.add(t, acc).unwrap();
    fd.add_output_alias(y, acc).unwrap();
    let sq = fd.squeeze(s, &[1]).unwrap();
    let z = fd.add(e, sq).unwrap();
    fd.add_output(z).unwrap();
    let want = fd.finish().unwrap();
    assert!(f == want, "{f}\n{want}");
    assert_eq!(
        f.tensor_type(f.inputs()[1]).unwrap().domain[0].kind,
        IterKind::Expanded
    );
    assert_eq!(sig.outputs[0].alias_of, Some(3));
    assert_eq!(sig.outputs[1].alias_of, None);
    let ParamKind::Tensor(ts) = &sig.params[1].kind else {
        panic!()
    };
    assert_eq!(ts.expanded, [true, false]);
    assert_eq!(ts.contiguity, [None, Some(false)]);
    let ParamKind::Tensor(ss) = &sig.params[2].kind else {
        panic!()
    };
    assert_eq!(ss.dims, [DimSig::Static(6), DimSig::Static(1)]);
}

#[test]
fn blocks_wrappers_visibility_and_warnings() {
    let src = "nvfuser::fusion! {
        /// First.
        pub fn a(x: Tensor<f32, [_]>, unused: f32, _quiet: f32) -> Tensor<f32, [_]> { x.exp() }
        pub(crate) fn b(x: Tensor<f32, [_]>) -> Tensor<f32, [_]> { x.log() }
    }";
    let compiled = dsl::compile_str(src).unwrap();
    assert_eq!(compiled.fns.len(), 2);
    assert_eq!(compiled.fns[0].ast.vis.to_string(), "pub");
    assert_eq!(compiled.fns[1].ast.vis.to_string(), "pub (crate)");
    assert_eq!(compiled.fns[1].signature.name, "b");
    // An unused input is a warning (the input stays); `_quiet` is silent.
    assert_eq!(compiled.warnings.len(), 1);
    let w = &compiled.warnings[0];
    assert_eq!(w.severity, Severity::Warning);
    assert_eq!(w.message, "unused input `unused`");
    assert_eq!(w.line_column(), (3, 39));
    assert_eq!(compiled.fns[0].fusion.inputs().len(), 3);
}

#[test]
fn the_macro_path_parses_token_streams() {
    let tokens = quote::quote! {
        fn scale(x: Tensor<f16, [N]>, s: f32) -> Tensor<f16, [N]> {
            (x as f32 * s) as f16
        }
    };
    let compiled = dsl::compile_tokens(tokens).unwrap();
    let f = &compiled.fns[0].fusion;
    let names: Vec<&str> = ops(f).iter().map(|o| o.name()).collect();
    assert_eq!(names, ["cast", "mul", "cast"]);
    // The same source as a string gives the same fusion.
    let again = dsl::build_str(
        "fn scale(x: Tensor<f16, [N]>, s: f32) -> Tensor<f16, [N]> { (x as f32 * s) as f16 }",
    )
    .unwrap();
    assert!(again[0].0 == *f);
}

#[test]
fn casts_to_the_same_type_are_free_and_scalar_ops_give_scalars() {
    let (f, _) = build("fn f(x: Tensor<f32, [_]>, s: f32) -> Tensor<f32, [_]> { let t = s * 2.0; (x as f32) * t.exp() }");
    let names: Vec<&str> = ops(&f).iter().map(|o| o.name()).collect();
    assert_eq!(names, ["mul", "exp", "mul"]);
    let (_, e) = f.exprs().nth(1).unwrap();
    assert!(!f.val(e.outputs[0]).is_tensor());
}
