//! Errors of the `fusion!` language: one test per class, asserting the message, the hint
//! and the span (line:column at the start, and where it ends).
//!
//! Each snapshot line is `line:col-line:col: message` (columns 1-based, the end exclusive)
//! followed by the hint. `UPDATE_EXPECT=1` rewrites the snapshots.

use expect_test::{expect, Expect};
use nvfuser_core::dsl::{self, DslError};

fn describe(errs: &[DslError]) -> String {
    let mut out = String::new();
    for e in errs {
        let (l, c) = e.line_column();
        let (el, ec) = e.end_line_column();
        out.push_str(&format!("{l}:{c}-{el}:{ec}: {}\n", e.message));
        if let Some(h) = &e.hint {
            out.push_str(&format!("    help: {h}\n"));
        }
    }
    out
}

/// Compiles `src` (parse and build) and snapshots every error.
fn check(src: &str, expect: Expect) {
    match dsl::compile_str(src) {
        Ok(_) => panic!("expected errors:\n{src}"),
        Err(errs) => expect.assert_eq(&describe(&errs)),
    }
}

/// A fn with one body line: the body is on line 2, starting at column 5.
fn body(line: &str) -> String {
    format!("fn f(x: Tensor<f32, [N, H]>, b: Tensor<f32, [H]>, m: Tensor<f32, [M]>, s: f32) -> Tensor<f32, [N, H]> {{\n    {line}\n    x + b + s\n}}")
}

#[test]
fn syntax_errors_point_at_the_token() {
    check(
        "fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    let y = x +;\n    y\n}",
        expect![[r#"
        2:16-2:17: expected an expression
    "#]],
    );
    check(
        "fn f(x: Tensor<f32 [N]>) -> Tensor<f32, [N]> { x }",
        expect![[r#"
        1:20-1:21: expected `,` and the dims: Tensor<dtype, [dims]>, e.g. Tensor<f32, [N, 4096]>
    "#]],
    );
}

#[test]
fn unknown_ops_suggest_the_closest_name() {
    check(
        &body("let _ = sqr(x) + x.eXp() + x.transpose([1, 0]) + x.softmax([1]);"),
        expect![[r#"
        2:13-2:16: unknown op `sqr`
            help: did you mean `sqrt`?
        2:24-2:27: unknown op `eXp`
            help: did you mean `exp`?
        2:34-2:43: unknown op `transpose`
            help: did you mean `permute`?
        2:56-2:63: unknown op `softmax`
            help: `softmax` is not a primitive; write it from primitives, e.g. softmax: let m = x.max([1], true); let e = (x - m).exp(); e / e.sum([1], true)
    "#]],
    );
}

#[test]
fn wrong_arity_names_the_signature() {
    check(
        &body("let _ = x.sum();"),
        expect![[r#"
            2:15-2:20: `sum` takes 2 to 4 arguments, found 1: `axes` is missing
                help: the signature is sum(x, axes, keepdim = false, dtype = x.dtype)
        "#]],
    );
    check(
        &body("let _ = x.exp(1);"),
        expect![[r#"
        2:19-2:20: `exp` takes 1 argument, found 2
            help: the signature is exp(x)
    "#]],
    );
    check(
        &body("let _ = x.sum([1], keep = true);"),
        expect![[r#"
            2:24-2:28: `sum` has no argument `keep`
                help: the signature is sum(x, axes, keepdim = false, dtype = x.dtype)
        "#]],
    );
    check(
        &body("let _ = x.sum([1], true, keepdim = false);"),
        expect![[r#"
        2:40-2:45: argument `keepdim` of `sum` is given twice
    "#]],
    );
}

#[test]
fn unknown_variables_suggest_names_in_scope() {
    check(
        &body("let y = x + bb;"),
        expect![[r#"
        2:17-2:19: unknown variable `bb`
            help: did you mean `b`?
    "#]],
    );
    check(
        &body("let y = exp + x;"),
        expect![[r#"
        2:13-2:16: unknown variable `exp`
            help: `exp` is an op: call it, e.g. `exp(x)` or `x.exp()`
    "#]],
    );
}

#[test]
fn unsupported_constructs_say_what_to_write() {
    for (line, snapshot) in [
        (
            "for i in x {}",
            expect![[r#"
            2:5-2:18: loops are not supported: a fusion body is straight-line dataflow
                help: express iteration with tensor ops: reductions (x.sum([1])), broadcasts, elementwise ops
        "#]],
        ),
        (
            "let y = if s > 0.0 { x } else { b };",
            expect![[r#"
            2:13-2:40: `if` is not supported: a fusion body has no control flow
                help: select elementwise with where_(cond, a, b)
        "#]],
        ),
        (
            "let y = match s { _ => x };",
            expect![[r#"
            2:13-2:31: `match` is not supported: a fusion body has no control flow
                help: select elementwise with where_(cond, a, b)
        "#]],
        ),
        (
            "let g = |t| t.exp();",
            expect![[r#"
            2:13-2:24: closures are not supported in a fusion body
                help: write the expression inline, or define another fn in the fusion! block
        "#]],
        ),
        (
            "let y = x.exp()?;",
            expect![[r#"
            2:20-2:21: `?` is not supported: ops are checked when the fusion is built
                help: remove the `?`
        "#]],
        ),
        (
            "println!(\"{}\", 1);",
            expect![[r#"
            2:5-2:23: macros are not supported in a fusion body
                help: write the tensor expression directly; a fusion body is `let` statements over ops
        "#]],
        ),
        (
            "let mut y = x;",
            expect![[r#"
            2:9-2:12: `mut` is not supported: values in a fusion are immutable
                help: remove `mut` and shadow instead: let x = x + 1.0;
        "#]],
        ),
        (
            "x = x + 1.0;",
            expect![[r#"
            2:5-2:16: assignment is not supported: values in a fusion are immutable
                help: bind a new value instead: let x = ...; (shadowing is allowed)
        "#]],
        ),
        (
            "x += 1.0;",
            expect![[r#"
            2:5-2:13: compound assignment is not supported: values in a fusion are immutable
                help: shadow instead: let x = x + y;
        "#]],
        ),
        (
            "return x;",
            expect![[r#"
            2:5-2:13: `return` is not supported
                help: the last expression of the body (without a semicolon) is the fusion's output
        "#]],
        ),
        (
            "let y = &x;",
            expect![[r#"
            2:13-2:14: references are not supported: tensors are values in a fusion
                help: write `x` instead of `&x`
        "#]],
        ),
        (
            "let y = x[0];",
            expect![[r#"
            2:13-2:17: indexing is not supported
                help: use x.select(axis, i), x.slice([..]) or x.index_select(axis, indices)
        "#]],
        ),
        (
            "let y = { x };",
            expect![[r#"
            2:13-2:18: blocks are not supported in a fusion body
                help: use `let` statements
        "#]],
        ),
        (
            "let y = x * \"two\";",
            expect![[r#"
            2:17-2:22: string literals are not supported in a fusion
                help: literals are numbers (`2`, `0.5`, `1e-5f32`) and `true`/`false`
        "#]],
        ),
        (
            "let y = x * 2u8;",
            expect![[r#"
                2:17-2:20: unsupported literal type `u8`
                    help: literal suffixes are i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2 (or none: `2` is i64, `2.0` is f64)
            "#]],
        ),
        (
            "let y: Tensor<f32, [N, H]> = x;",
            expect![[r#"
            2:12-2:31: type annotations on `let` are not supported
                help: remove the annotation: dtypes and shapes are inferred (cast with `as` to change a dtype)
            2:26-2:27: unexpected token, expected `]`
        "#]],
        ),
        (
            "fn g() {}",
            expect![[r#"
            2:5-2:14: items (fn, use, const, ...) are not allowed in a fusion body
                help: define each fusion as its own fn in the fusion! block; use `let` for intermediate values
        "#]],
        ),
    ] {
        check(&body(line), snapshot);
    }
}

#[test]
fn named_dims_must_agree() {
    check(
        &body("let y = x + m;"),
        expect![[r#"
        2:15-2:16: add: named dims do not match: dim 1 of operand 1 is `H` but dim 0 of operand 2 is `M` (shapes [N, H] and [M])
            help: broadcasting aligns dims from the right; check the parameters' dims, or line them up with unsqueeze/permute
    "#]],
    );
    check(
        &body("let y = cat([x, m.unsqueeze(0)], 0);"),
        expect![[r#"
        2:13-2:40: cat: named dims do not match in dim 1: `H` and `M`
            help: cat joins tensors along one axis; every other dim must agree
    "#]],
    );
    check(
        &body("let y = where_(x > 0.0, x, m);"),
        expect![[r#"
        2:13-2:34: where_: named dims do not match: dim 1 of operand 1 is `H` but dim 0 of operand 3 is `M` (shapes [N, H] and [M])
            help: broadcasting aligns dims from the right; check the parameters' dims, or line them up with unsqueeze/permute
    "#]],
    );
    // A named dim meeting a static size or `_` is accepted.
    dsl::build_str("fn f(x: Tensor<f32, [N]>, y: Tensor<f32, [4]>, z: Tensor<f32, [_]>) -> Tensor<f32, [N]> { x + y + z }").unwrap();
}

#[test]
fn returned_values_must_match_the_declared_type() {
    let sig = "fn f(x: Tensor<bf16, [N, H]>, s: f32)";
    check(
        &format!("{sig} -> Tensor<f32, [N, H]> {{\n    x\n}}"),
        expect![[r#"
        2:5-2:6: returns bf16 but the return type declares f32
            help: cast the result (`... as f32`) or declare bf16
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<bf16, [N]> {{\n    x\n}}"),
        expect![[r#"
        2:5-2:6: returns a tensor of rank 2 ([N, H]) but the return type declares rank 1
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<bf16, [H, N]> {{\n    x\n}}"),
        expect![[r#"
        2:5-2:6: dim 0 of the result is N but the return type declares H
            help: fix the declared dims, or use `_` for a size the signature does not pin down
        2:5-2:6: dim 1 of the result is H but the return type declares N
            help: fix the declared dims, or use `_` for a size the signature does not pin down
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<bf16, [N, 1]> {{\n    x\n}}"),
        expect![[r#"
        2:5-2:6: dim 1 of the result is H but the return type declares 1 (broadcast)
            help: fix the declared dims, or use `_` for a size the signature does not pin down
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<bf16, [N, K]> {{\n    x\n}}"),
        expect![[r#"
        1:59-1:60: unknown dim name `K`: named dims are introduced by parameters
            help: use `_` for a size that no parameter names
        2:5-2:6: dim 1 of the result is H but the return type declares K
            help: fix the declared dims, or use `_` for a size the signature does not pin down
    "#]],
    );
    check(
        &format!("{sig} -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {{\n    x\n}}"),
        expect![[r#"
        2:5-2:6: the body returns 1 value(s) but the return type declares 2
            help: return one value per declared tensor type, as a tuple when there are several
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<f32, [N, H]> {{\n    s\n}}"),
        expect![[r#"
        2:5-2:6: fusion outputs are tensors, found a scalar of type f32
            help: return a tensor, e.g. full([1], s, f32)
    "#]],
    );
    check(
        &format!("{sig} -> f32 {{\n    s\n}}"),
        expect![[r#"
        1:42-1:45: a fusion returns tensors, found the scalar type `f32`
            help: scalars cannot be outputs; return a tensor, e.g. full([1], s, f32)
    "#]],
    );
    check(
        &format!("{sig} -> Tensor<bf16, [N, H]> {{\n    let y = x;\n}}"),
        expect![[r#"
        3:1-3:2: the body must end with the fusion's output (an expression without `;`)
            help: end the body with the returned value, e.g. `y` or `(y, z)`
    "#]],
    );
    check(
        &format!("{sig} {{\n    x\n}}"),
        expect![[r#"
        1:39-1:40: a fusion fn must declare what it returns
            help: add a return type, e.g. `-> Tensor<f32, [N, H]>` or a tuple of tensor types
    "#]],
    );
}

#[test]
fn builder_errors_point_at_the_argument() {
    check(
        &body("let y = x.sum([2]);"),
        expect![[r#"
        2:19-2:22: sum: axis 2 is out of range for a tensor of rank 2 (expected -2..2)
            help: axes count from 0; negative axes count from the end (-1 is the last dim)
    "#]],
    );
    check(
        &body("let y = x.permute([0, 0]);"),
        expect![[r#"
        2:23-2:29: permute: invalid argument: [0, 0] is not a permutation: dim 0 appears twice
    "#]],
    );
    check(
        &body("let y = (x > 0.0) - (x < 1.0);"),
        expect![[r#"
        2:23-2:24: sub: expected numbers (this op is not defined for two bools; cast first), found bool and bool
            help: convert with a cast, e.g. `x as bool`
    "#]],
    );
    check(
        &body("let y = x & b;"),
        expect![[r#"
        2:15-2:16: bitwise_and: expected integer or bool operands, found f32 and f32
            help: convert with a cast, e.g. `x as i64`
    "#]],
    );
    check(
        &body("let y = !x;"),
        expect![[r#"
        2:13-2:15: `!` needs a bool or integer operand, found f32
            help: compare instead (`x == 0.0`) or call logical_not(x)
    "#]],
    );
    check(
        &body("let y = x.reshape([s, -1]);"),
        expect![[r#"
        2:23-2:30: reshape: expected an integer scalar for a size, found f32
            help: convert with a cast, e.g. `x as i64`
    "#]],
    );
    check(
        &body("let y = x.sum([n]);"),
        expect![[r#"
            2:19-2:22: argument `axes` of `sum` must be integer literals, e.g. [1] or [0, -1]
                help: the signature is sum(x, axes, keepdim = false, dtype = x.dtype)
        "#]],
    );
    check(
        &body("let y = x as f17;"),
        expect![[r#"
        2:18-2:21: unknown dtype `f17`
            help: did you mean `f16`?
    "#]],
    );
    check(
        &body("let y = full([4], 1.0, float);"),
        expect![[r#"
            2:28-2:33: argument `dtype` of `full` must be a dtype (bool, i32, i64, f16, bf16, f32, f64, f8e4m3, f8e5m2)
                help: the signature is full(sizes, value, dtype)
        "#]],
    );
}

#[test]
fn scan_errors_point_at_the_axis() {
    check(
        &body("let y = x.cumsum(2) + x.cummax(axis = -3);"),
        expect![[r#"
            2:22-2:23: cumsum: axis 2 is out of range for a tensor of rank 2 (expected -2..2)
                help: axes count from 0; negative axes count from the end (-1 is the last dim)
            2:43-2:45: cummax: axis -3 is out of range for a tensor of rank 2 (expected -2..2)
                help: axes count from 0; negative axes count from the end (-1 is the last dim)
        "#]],
    );
    check(
        &body("let y = x.cumprod([1]) + x.cummin() + cumsum(x, dim = 1);"),
        expect![[r#"
            2:23-2:26: argument `axis` of `cumprod` must be an integer literal
                help: the signature is cumprod(x, axis, dtype = x.dtype)
            2:32-2:40: `cummin` takes 2 arguments, found 1: `axis` is missing
                help: the signature is cummin(x, axis)
            2:53-2:56: `cumsum` has no argument `dim`
                help: did you mean `axis`?
        "#]],
    );
    check(
        &body("let y = x.cummax(0, dtype = f64) + x.cumsum(1, dtype = bool);"),
        expect![[r#"
            2:25-2:30: `cummax` has no argument `dtype`
                help: the signature is cummax(x, axis)
            2:42-2:65: cumsum: expected a numeric dtype argument, found bool
                help: convert with a cast, e.g. `x as f32`
        "#]],
    );
    check(
        &body("let y = x.cumsun(1) + x.cumulative_sum(0);"),
        expect![[r#"
            2:15-2:21: unknown op `cumsun`
                help: did you mean `cumsum`?
            2:29-2:43: unknown op `cumulative_sum`
                help: did you mean `cumsum`?
        "#]],
    );
}

#[test]
fn tuples_and_inplace_are_checked() {
    check(
        &body("let (a, b, c) = x.var_mean([1]);"),
        expect![[r#"
        2:9-2:18: this pattern takes a tuple of 3 values, found a tuple of 2 values
            help: var_mean returns (var, mean) and welford returns (mean, var_sum, count)
    "#]],
    );
    check(
        &body("let y = x.var_mean([1]) + x;"),
        expect![[r#"
        2:13-2:28: expected a tensor or scalar, found a tuple of 2 values
            help: destructure it first: let (var, mean) = x.var_mean([1]); or take one element with `.0`
    "#]],
    );
    check(
        &body("let y = inplace(x, x);"),
        expect![[r#"
        2:13-2:26: inplace(...) marks an in-place output and can only appear in the returned value
            help: return it: (y, inplace(z, x))
    "#]],
    );
    check("fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    let x = x.exp();\n    inplace(x, x)\n}", expect![[r#"
        3:16-3:17: the second argument of inplace must be a tensor parameter
            help: name the input tensor the output is stored into (a `let` that shadows the parameter hides it)
    "#]]);
    check(
        "fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    inplace(x.exp(), x, x)\n}",
        expect![[r#"
        2:5-2:27: inplace takes 2 arguments (value, input), found 3
            help: write inplace(y, x) to store y into the input x
    "#]],
    );
}

#[test]
fn signatures_are_checked() {
    check("fn f(x: Tensor<bf17, [N]>, y: Vec<f32>, z: &f32, w: Tensor<f32, [-1, 2.5]>) -> Tensor<f32, [N]> {\n    x\n}", expect![[r#"
        1:16-1:20: unknown dtype `bf17`
            help: did you mean `bf16`?
        1:31-1:39: unsupported parameter type `Vec<f32>`
            help: a parameter is `Tensor<dtype, [dims]>` or a scalar dtype (f32, f64, i32, i64, bool, f16, bf16, f8e4m3, f8e5m2)
        1:44-1:48: unsupported parameter type `&f32`
            help: tensors are passed by value in a fusion signature: remove the `&`
        1:70-1:73: invalid dim `2.5`
            help: a dim is `_`, a name like `N`, `1` (broadcast) or a static size like `4096`
    "#]]);
    check(
        "fn f(x: Tensor<f32, [N]>, x: f32, f32: f32) -> Tensor<f32, [N]> {\n    x\n}",
        expect![[r#"
        1:27-1:28: parameter `x` is declared twice
            help: rename one of them
        1:35-1:38: `f32` is a dtype name and cannot name a value
            help: choose another name
    "#]],
    );
    check(
        "#[inline]\nasync fn f<T>(mut x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    x\n}",
        expect![[r#"
        1:1-1:10: only doc comments (`///`) are allowed on a fusion fn
            help: remove the attribute
        2:1-2:6: `async` fusion fns are not supported
            help: remove `async`: a fusion fn is plain `fn` or `pub fn`
        2:11-2:14: generic parameters are not supported on a fusion fn
            help: dims are symbolic already: write `Tensor<f32, [N, H]>` and name the dims
        2:15-2:18: `mut` parameters are not supported: values are immutable
            help: remove `mut`; rebind with `let x = ...;` to shadow
    "#]],
    );
    check("fn f(#[layout(contiguity = [true, true], stride = [0])] x: Tensor<f32, [N, 1]>) -> Tensor<f32, [N, 1]> {\n    x\n}", expect![[r#"
        1:42-1:54: unknown layout key `stride`
            help: the layout keys are contiguity, stride_order, expanded, static_sizes
        1:6-1:56: define_tensor: invalid argument: dim 1 is a broadcast dim: expected contiguity None, found Some(true)
            help: in `contiguity = [...]` write `_` for broadcast and expanded dims, true/false for the others
    "#]]);
    check("fn f(#[layout(expanded = [1])] x: Tensor<f32, [N, 1]>, #[layout(stride_order = [0, 0])] y: Tensor<f32, [N, N]>) -> Tensor<f32, [N, 1]> {\n    x\n}", expect![[r#"
        1:51-1:52: dim 1 is a broadcast dim (`1`) and cannot also be expanded
            help: an expanded dim has a real size: write `_`, a name or a static size
        1:56-1:88: define_tensor: invalid argument: stride order [0, 0]: expected a permutation of 0..2
    "#]]);
}

#[test]
fn errors_are_collected_and_poison_stops_cascades() {
    // Three independent errors, in source order; `y` is poisoned after the first, so the
    // line that uses it reports nothing more.
    let src = "fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
    let y = x.sum([3]);
    let z = y + y * 2.0;
    let w = x.frobnicate();
    let v = unknown;
    x
}";
    let errs = dsl::compile_str(src).unwrap_err();
    let lines: Vec<usize> = errs.iter().map(|e| e.line_column().0).collect();
    assert_eq!(lines, [2, 4, 5]);
    // An error in the signature does not cascade into the body and the return type.
    let errs =
        dsl::compile_str("fn f(x: Tensor<bf17, [N]>) -> Tensor<bf17, [N]> {\n    x.exp()\n}")
            .unwrap_err();
    assert_eq!(errs.len(), 2, "{}", describe(&errs));
    // Errors of several fns are all reported.
    let errs = dsl::compile_str("fn a(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x.sqr() }\nfn b(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x.lgo() }").unwrap_err();
    assert_eq!(
        errs.iter().map(|e| e.line_column().0).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn errors_render_like_rustc() {
    let src = "fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    let y = sqr(x);\n    y\n}";
    let errs = dsl::parse_str(src)
        .and_then(|f| dsl::build(&f[0]))
        .unwrap_err();
    expect![[r#"
        error: unknown op `sqr`
         --> 2:13
          |
        2 |     let y = sqr(x);
          |             ^^^
          = help: did you mean `sqrt`?
    "#]]
    .assert_eq(&errs[0].render(src));
    assert_eq!(
        errs[0].to_string(),
        "2:13: error: unknown op `sqr` (help: did you mean `sqrt`?)"
    );
    let compile_error = dsl::to_compile_error(&errs).to_string();
    assert!(compile_error.contains("compile_error"), "{compile_error}");
    assert!(
        compile_error.contains("did you mean `sqrt`?"),
        "{compile_error}"
    );
}

/// Deep nesting (parentheses, calls, method chains) is refused with a typed error before
/// it can overflow the stack (this runs on a test thread of 2 MiB in a debug build).
#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let limit = dsl::MAX_NESTING;
    let fn_of =
        |expr: String| format!("fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {{\n    {expr}\n}}");
    let parens = |n: usize| format!("{}x{}", "(".repeat(n), ")".repeat(n));
    let calls = |n: usize| format!("{}x{}", "relu(".repeat(n), ")".repeat(n));
    let chain = |n: usize| format!("x{}", ".relu()".repeat(n));
    let cases = [
        ("150 nested parentheses", parens(150)),
        ("10_000 nested parentheses", parens(10_000)),
        ("130 nested calls", calls(130)),
        ("a 200-long method chain", chain(200)),
        (
            "a 300-long operator run",
            format!("x{}", " + x".repeat(300)),
        ),
    ];
    for (what, expr) in cases {
        let src = fn_of(expr);
        for errs in [
            dsl::parse_str(&src).map(|_| ()).unwrap_err(),
            dsl::build_str(&src).map(|_| ()).unwrap_err(),
        ] {
            assert_eq!(errs.len(), 1, "{what}: {errs:?}");
            let msg = &errs[0].message;
            assert!(
                msg.contains("nested too deeply") && msg.contains(&limit.to_string()),
                "{what}: {msg}"
            );
            assert_eq!(
                errs[0].line_column().0,
                2,
                "{what}: the error points into the body"
            );
        }
    }
    // Nesting well within the limit still builds.
    for expr in [parens(20), calls(20), chain(20)] {
        dsl::build_str(&fn_of(expr)).unwrap();
    }
    // Up to the limit, every form builds or is refused; none overflows the stack.
    let mut accepted = 0;
    for n in limit - 8..=limit {
        let mixed = format!(
            "{}{}{}",
            "relu((".repeat(n / 3),
            chain(n / 3),
            "))".repeat(n / 3)
        );
        for expr in [
            parens(n),
            calls(n),
            chain(n),
            mixed,
            format!("x{}", " * x".repeat(n)),
        ] {
            match dsl::build_str(&fn_of(expr)) {
                Ok(_) => accepted += 1,
                Err(errs) => assert!(errs[0].message.contains("nested too deeply"), "{errs:?}"),
            }
        }
    }
    assert!(accepted > 0);
}
