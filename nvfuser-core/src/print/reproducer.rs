//! The Rust reproducer: any fusion as `fusion!` source that rebuilds it.
//!
//! [`Fusion::to_reproducer`] prints one `let` per expression, in arena order, each calling
//! exactly the builder method that appends that expression. The builder's conveniences
//! (keepdim, half-precision reductions, rank extension) have already been expanded into
//! primitives in the IR, and the printed calls are on operands for which the builder adds
//! nothing, so [`crate::dsl::parse_str`] + [`crate::dsl::build`] give a fusion that is
//! structurally equal (`==`, same [`Fusion::structural_hash`]) with expressions in the same
//! order.
//!
//! Naming: inputs and expression outputs are `t<n>`/`s<n>` by arena index (an input no
//! expression reads is `_t<n>`, which silences the DSL's unused-input warning). A
//! constant read once is an inline literal; a constant read by several operands is
//! bound once (`let s5 = 2.0;`) because sharing one constant value is part of a fusion's
//! structure. Input layouts that are not the default print as a `#[layout(...)]`
//! attribute; in-place outputs print as `inplace(value, input)` in the returned tuple.
//!
//! ```
//! use nvfuser_core::prelude::*;
//! let mut fd = FusionDefinition::new();
//! let x = fd.define_tensor(DataType::BF16, &[-1, 4096])?;
//! let m = fd.mean(x, &[1], true)?;
//! fd.add_output(m)?;
//! let fusion = fd.finish()?;
//! let src = fusion.to_reproducer("mean_keepdim");
//! assert_eq!(src, "\
//! fn mean_keepdim(t0: Tensor<bf16, [_, 4096]>) -> Tensor<bf16, [_, 1]> {
//!     let t1 = t0 as f32;
//!     let t2 = t1.mean([1]);
//!     let t3 = t2 as bf16;
//!     let t4 = t3.broadcast([false, true]);
//!     t4
//! }
//! ");
//! let rebuilt = nvfuser_core::dsl::build_str(&src).unwrap();
//! assert_eq!(rebuilt[0].0, fusion);
//! # Ok::<(), nvfuser_core::Error>(())
//! ```

use std::fmt::Write as _;

use super::literal;
use crate::dtype::DataType;
use crate::ir::{
    Distribution, Expr, Extent, Fusion, IterKind, Op, SizeArg, SliceRange, TensorType, UnaryOp,
    ValId, ValKind,
};

/// How [`reproducer`] frames its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReproducerOptions {
    /// Wrap the function in `fusion! { ... }` (paste-ready Rust); `dsl::parse_str` reads
    /// both forms.
    pub wrap_in_macro: bool,
    /// Make the function `pub`.
    pub public: bool,
}

impl Fusion {
    /// The fusion as `fusion!` source of a function called `name` (made a valid
    /// identifier if it is not one), with default [`ReproducerOptions`].
    pub fn to_reproducer(&self, name: &str) -> String {
        reproducer(self, name, &ReproducerOptions::default())
    }
}

/// Whether `e` computes the offset of a stateful random op after the first
/// (`offset + k`, made by the builder, which `rand_uniform`/`rand_normal` make again).
fn generator_offset(fusion: &Fusion, e: &Expr) -> bool {
    fusion.generator_inputs().is_some_and(|g| {
        matches!(e.op, Op::Binary(crate::ir::BinaryOp::Add)) && e.inputs.first() == Some(&g.offset)
    })
}

/// The fusion as `fusion!` source (see the module docs). A fusion that fails the IR
/// verifier has no reproducer; the result is then a comment that says why.
pub fn reproducer(fusion: &Fusion, name: &str, options: &ReproducerOptions) -> String {
    if let Err(e) = crate::ir::verify(fusion) {
        return format!("// no reproducer: the fusion is not well formed ({e})\n");
    }
    let p = Printer::new(fusion);
    let mut out = String::new();
    let vis = if options.public { "pub " } else { "" };
    // The generator's seed and offset are not parameters: the stateful random ops
    // (`rand_uniform`, `rand_normal`) bring them back.
    let params: Vec<String> = fusion.user_inputs().iter().map(|&i| p.param(i)).collect();
    let outputs = fusion.outputs();
    let ret_types: Vec<String> = outputs.iter().map(|o| p.tensor_type(o.val)).collect();
    let ret = match ret_types.as_slice() {
        [one] => one.clone(),
        _ => format!("({})", ret_types.join(", ")),
    };
    let name = sanitize(name);
    // Laid out as rustfmt would: one line when it fits in 100 columns, else one
    // parameter (and one returned type) per line.
    let one_line = format!("{vis}fn {name}({}) -> {ret} {{", params.join(", "));
    if one_line.len() <= 100 {
        out.push_str(&one_line);
        out.push('\n');
    } else {
        let _ = writeln!(out, "{vis}fn {name}(");
        for param in &params {
            let _ = writeln!(out, "    {param},");
        }
        if ret.len() + 8 <= 100 || ret_types.len() == 1 {
            let _ = writeln!(out, ") -> {ret} {{");
        } else {
            out.push_str(") -> (\n");
            for t in &ret_types {
                let _ = writeln!(out, "    {t},");
            }
            out.push_str(") {\n");
        }
    }
    let mut bound = vec![false; fusion.num_vals()];
    for (_, e) in fusion.exprs() {
        if generator_offset(fusion, e) {
            continue;
        }
        for &i in &e.inputs {
            if p.shared[i.index()] && !std::mem::replace(&mut bound[i.index()], true) {
                let val = fusion.val(i);
                if let Some(c) = val.constant() {
                    let _ = writeln!(out, "    let {} = {};", p.name(i), literal(c, val.dtype));
                }
            }
        }
        let lhs = match e.outputs.as_slice() {
            [one] => p.name(*one),
            many => format!(
                "({})",
                many.iter()
                    .map(|&o| p.name(o))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let _ = writeln!(out, "    let {lhs} = {};", p.expr(e));
    }
    let tail: Vec<String> = outputs
        .iter()
        .map(|o| match o.alias_of {
            Some(a) => format!("inplace({}, {})", p.name(o.val), p.name(a)),
            None => p.name(o.val),
        })
        .collect();
    match tail.as_slice() {
        [one] => {
            let _ = writeln!(out, "    {one}");
        }
        _ => {
            let _ = writeln!(out, "    ({})", tail.join(", "));
        }
    }
    out.push_str("}\n");
    if options.wrap_in_macro {
        let body: String = out
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("    {l}\n")
                }
            })
            .collect();
        out = format!("fusion! {{\n{body}}}\n");
    }
    out
}

/// A valid Rust identifier close to `name`.
fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if syn::parse_str::<syn::Ident>(&s).is_err() {
        s.push('_');
    }
    s
}

struct Printer<'a> {
    fusion: &'a Fusion,
    /// Constants read by more than one operand slot (printed as a `let`).
    shared: Vec<bool>,
    /// Inputs that nothing reads (printed with a leading `_`).
    unused: Vec<bool>,
}

impl<'a> Printer<'a> {
    fn new(fusion: &'a Fusion) -> Self {
        let n = fusion.num_vals();
        let mut uses = vec![0usize; n];
        for (_, e) in fusion.exprs() {
            for &i in &e.inputs {
                uses[i.index()] += 1;
            }
        }
        let shared = (0..n)
            .map(|i| uses[i] > 1 && fusion.val(ValId::new(i as u32)).constant().is_some())
            .collect();
        let mut unused = vec![false; n];
        for &i in fusion.inputs() {
            let read = uses[i.index()] > 0
                || fusion
                    .outputs()
                    .iter()
                    .any(|o| o.val == i || o.alias_of == Some(i));
            unused[i.index()] = !read;
        }
        Printer {
            fusion,
            shared,
            unused,
        }
    }

    fn name(&self, v: ValId) -> String {
        let base = super::val_name(self.fusion, v, false);
        if self.unused.get(v.index()).copied().unwrap_or(false) {
            format!("_{base}")
        } else {
            base
        }
    }

    /// The operand text: a literal for an unshared constant, else the value's name.
    fn operand(&self, v: ValId) -> String {
        let val = self.fusion.val(v);
        match val.constant() {
            Some(c) if !self.shared[v.index()] => literal(c, val.dtype),
            _ => self.name(v),
        }
    }

    /// True when the operand prints as a variable name (so it can receive a method).
    fn is_named(&self, v: ValId) -> bool {
        self.fusion.val(v).constant().is_none() || self.shared[v.index()]
    }

    /// `x.op(args)` when `x` is a variable, else `op(x, args)`.
    fn call(&self, op: &str, x: ValId, args: &[String]) -> String {
        if self.is_named(x) {
            format!("{}.{op}({})", self.name(x), args.join(", "))
        } else {
            let mut all = vec![self.operand(x)];
            all.extend_from_slice(args);
            format!("{op}({})", all.join(", "))
        }
    }

    fn free(&self, op: &str, args: &[String]) -> String {
        format!("{op}({})", args.join(", "))
    }

    fn size_arg(&self, e: &Expr, s: SizeArg) -> String {
        match s {
            SizeArg::Const(c) => c.to_string(),
            SizeArg::Input(p) => e
                .inputs
                .get(p as usize)
                .map_or_else(|| "0".into(), |&v| self.operand(v)),
        }
    }

    fn sizes(&self, e: &Expr, s: &[SizeArg]) -> String {
        let parts: Vec<String> = s.iter().map(|&a| self.size_arg(e, a)).collect();
        format!("[{}]", parts.join(", "))
    }

    fn range(&self, e: &Expr, r: &SliceRange) -> String {
        let start = self.size_arg(e, r.start);
        let to_end = r.stop == SizeArg::Const(i64::MAX);
        match (r.step, to_end) {
            (1, true) if r.start == SizeArg::Const(0) => "..".into(),
            (1, true) => format!("{start}.."),
            (1, false) => format!("{start}..{}", self.size_arg(e, r.stop)),
            (step, true) => format!("({start}, i64::MAX, {step})"),
            (step, false) => format!("({start}, {}, {step})", self.size_arg(e, r.stop)),
        }
    }

    fn expr(&self, e: &Expr) -> String {
        let ins = &e.inputs;
        let op = |i: usize| self.operand(ins[i]);
        let name = e.op.name();
        match &e.op {
            Op::Unary(u) => {
                let d = self.fusion.val(ins[0]).dtype;
                let prefix = match u {
                    UnaryOp::Neg => Some("-"),
                    UnaryOp::LogicalNot if d == DataType::Bool => Some("!"),
                    UnaryOp::BitwiseNot if d.is_int() => Some("!"),
                    _ => None,
                };
                match prefix {
                    Some(p) if self.is_named(ins[0]) => format!("{p}{}", self.name(ins[0])),
                    _ => self.call(name, ins[0], &[]),
                }
            }
            Op::Binary(b) => match super::math::infix(*b) {
                Some(sym) => format!("{} {sym} {}", op(0), op(1)),
                None => self.call(name, ins[0], &[op(1)]),
            },
            Op::Ternary(_) => self.free(
                name,
                &ins.iter().map(|&v| self.operand(v)).collect::<Vec<_>>(),
            ),
            Op::Cast => {
                let to = self.fusion.val(e.outputs[0]).dtype;
                format!("{} as {to}", op(0))
            }
            Op::Set | Op::SegmentSet => self.call(name, ins[0], &[]),
            Op::Reduction { axes, .. } | Op::Welford { axes } => {
                self.call(name, ins[0], &[format!("{axes:?}")])
            }
            Op::Scan { axis, .. } => self.call(name, ins[0], &[axis.to_string()]),
            Op::Sort {
                axis,
                descending,
                k: None,
            } => self.call(name, ins[0], &[axis.to_string(), descending.to_string()]),
            Op::Sort {
                axis,
                descending,
                k: Some(k),
            } => self.call(
                name,
                ins[0],
                &[k.to_string(), axis.to_string(), descending.to_string()],
            ),
            Op::Var { axes, correction } | Op::VarMean { axes, correction } => {
                self.call(name, ins[0], &[format!("{axes:?}"), correction.to_string()])
            }
            Op::Broadcast { mask } => self.call(name, ins[0], &[format!("{mask:?}")]),
            Op::Expand { sizes } | Op::Reshape { sizes } => {
                self.call(name, ins[0], &[self.sizes(e, sizes)])
            }
            Op::Permute { perm } => self.call(name, ins[0], &[format!("{perm:?}")]),
            Op::Squeeze { axes } => self.call(name, ins[0], &[format!("{axes:?}")]),
            Op::Slice { ranges } => {
                let parts: Vec<String> = ranges.iter().map(|r| self.range(e, r)).collect();
                self.call(name, ins[0], &[format!("[{}]", parts.join(", "))])
            }
            Op::Pad { widths } => {
                let parts: Vec<String> = widths
                    .iter()
                    .map(|&(a, b)| format!("({}, {})", self.size_arg(e, a), self.size_arg(e, b)))
                    .collect();
                self.call(name, ins[0], &[format!("[{}]", parts.join(", ")), op(1)])
            }
            Op::Cat { axis } => {
                let parts: Vec<String> = ins.iter().map(|&v| self.operand(v)).collect();
                self.free(name, &[format!("[{}]", parts.join(", ")), axis.to_string()])
            }
            Op::Full { sizes } => {
                let d = self.fusion.val(e.outputs[0]).dtype;
                self.free(name, &[self.sizes(e, sizes), op(0), d.to_string()])
            }
            Op::Iota { length } => {
                let d = self.fusion.val(e.outputs[0]).dtype;
                self.free(
                    name,
                    &[self.size_arg(e, *length), op(0), op(1), d.to_string()],
                )
            }
            Op::Rand { sizes, dist }
                if self.fusion.generator_inputs().map(|g| g.seed) == Some(ins[2]) =>
            {
                let d = self.fusion.val(e.outputs[0]).dtype;
                let name = match dist {
                    Distribution::Uniform => "rand_uniform",
                    Distribution::Normal => "rand_normal",
                };
                self.free(name, &[self.sizes(e, sizes), op(0), op(1), d.to_string()])
            }
            Op::Rand { sizes, .. } => {
                let d = self.fusion.val(e.outputs[0]).dtype;
                self.free(
                    name,
                    &[
                        self.sizes(e, sizes),
                        op(0),
                        op(1),
                        op(2),
                        op(3),
                        d.to_string(),
                    ],
                )
            }
            Op::IndexSelect { axis } | Op::Gather { axis } => {
                self.call(name, ins[0], &[axis.to_string(), op(1)])
            }
            Op::TakeAlongAxis { axis } => self.call(name, ins[0], &[op(1), axis.to_string()]),
            Op::Select { axis, index } => {
                self.call(name, ins[0], &[axis.to_string(), self.size_arg(e, *index)])
            }
            Op::Scatter { axis, .. } => self.call(name, ins[0], &[axis.to_string(), op(1), op(2)]),
            Op::Size { axis } => self.call(name, ins[0], &[axis.to_string()]),
        }
    }

    /// A parameter: `t0: Tensor<bf16, [_, 4096]>` (with a layout attribute when needed)
    /// or `s1: f32`.
    fn param(&self, v: ValId) -> String {
        let val = self.fusion.val(v);
        match &val.kind {
            ValKind::Scalar(_) => format!("{}: {}", self.name(v), val.dtype),
            ValKind::Tensor(t) => {
                let layout = layout_attr(t);
                format!("{layout}{}: {}", self.name(v), self.tensor_type(v))
            }
        }
    }

    /// `Tensor<dtype, [dims]>`: `1` for broadcast dims, static sizes, else `_`.
    fn tensor_type(&self, v: ValId) -> String {
        let val = self.fusion.val(v);
        let dims: Vec<String> = match val.tensor() {
            Some(t) => t
                .shape()
                .map(|d| match (d.kind, &d.extent) {
                    (IterKind::Broadcast, _) => "1".to_string(),
                    (_, Extent::Const(n)) => n.to_string(),
                    _ => "_".to_string(),
                })
                .collect(),
            None => Vec::new(),
        };
        format!("Tensor<{}, [{}]>", val.dtype, dims.join(", "))
    }
}

/// `#[layout(...)] ` for an input tensor whose layout is not the default, else "".
fn layout_attr(t: &TensorType) -> String {
    let shape: Vec<_> = t.shape().collect();
    let mut parts = Vec::new();
    if t.contiguity.contains(&Some(false)) {
        // In allocation order (outermost first), as `#[layout]` reads it.
        let c: Vec<&str> = t
            .contiguity_in_allocation_order()
            .iter()
            .map(|c| match c {
                Some(true) => "true",
                Some(false) => "false",
                None => "_",
            })
            .collect();
        parts.push(format!("contiguity = [{}]", c.join(", ")));
    }
    if !t.is_row_major() {
        parts.push(format!("stride_order = {:?}", t.stride_order));
    }
    let expanded: Vec<usize> = shape
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind == IterKind::Expanded)
        .map(|(i, _)| i)
        .collect();
    if !expanded.is_empty() {
        parts.push(format!("expanded = {expanded:?}"));
    }
    if shape
        .iter()
        .any(|d| d.kind == IterKind::Iteration && d.extent == Extent::Const(1))
    {
        parts.push("static_sizes = true".into());
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("#[layout({})] ", parts.join(", "))
    }
}
