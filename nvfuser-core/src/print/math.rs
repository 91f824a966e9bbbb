//! Readable math: `Display for Fusion`.
//!
//! One line per input, expression and output, in arena order:
//!
//! ```text
//! inputs:
//!   T0: bf16[T0.size(0), 4096] (contiguity [true, true], order [1, 0])
//!   S1: f32
//! exprs:
//!   T2 = cast(T0) : f32[T0.size(0), 4096]
//!   T3 = sum(T2, axes=[1]) : f32[T0.size(0), r4096]
//!   T4 = broadcast(T3, mask=[false, true]) : f32[T0.size(0), b1]
//!   T5 = T2 - T4 : f32[T0.size(0), 4096]
//! outputs:
//!   T5
//!   T6 (in place of T0)
//! ```
//!
//! Binary ops that have a DSL operator print infix (`T2 + S1`, `T3 < T4`, `T5 && T6`);
//! every other op prints as `name(operands, attribute=value, ...)` and shows all its
//! attributes. Size-like attributes that are values print as the value's name
//! (`reshape(T0, sizes=[S4, -1])`), so such a value is not repeated as an operand.
//! Dims print as their extent, prefixed `b` (broadcast), `x` (expanded) or `r`
//! (reduction). Constants are inline literals in the DSL's syntax (`2.0`, `0.5f32`, `3`).

use std::fmt;

use super::{literal, val_name, val_type};
use crate::ir::{BinaryOp, Expr, Fusion, Op, SizeArg, SliceRange, ValId, ValKind};

/// What [`Math`] shows besides the expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MathOptions {
    /// Show each expression's output type (`: f32[T0.size(0), r4096]`).
    pub types: bool,
    /// Show each input tensor's contiguity and stride order.
    pub layouts: bool,
}

impl Default for MathOptions {
    fn default() -> Self {
        MathOptions {
            types: true,
            layouts: true,
        }
    }
}

/// A fusion displayed as math with chosen options (see [`Fusion::math`]).
#[derive(Clone, Copy, Debug)]
pub struct Math<'a> {
    fusion: &'a Fusion,
    options: MathOptions,
}

impl Fusion {
    /// Displays the fusion as math with `options`; `Display for Fusion` uses the defaults.
    ///
    /// ```
    /// use nvfuser_core::prelude::*;
    /// use nvfuser_core::print::MathOptions;
    /// let mut fd = FusionDefinition::new();
    /// let x = fd.define_tensor(DataType::F32, &[-1])?;
    /// let y = fd.exp(x)?;
    /// fd.add_output(y)?;
    /// let f = fd.finish()?;
    /// let text = f.math(MathOptions { types: false, layouts: false }).to_string();
    /// assert_eq!(text, "inputs:\n  T0: f32[T0.size(0)]\nexprs:\n  T1 = exp(T0)\noutputs:\n  T1\n");
    /// # Ok::<(), nvfuser_core::Error>(())
    /// ```
    pub fn math(&self, options: MathOptions) -> Math<'_> {
        Math {
            fusion: self,
            options,
        }
    }
}

impl fmt::Display for Fusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.math(MathOptions::default()), f)
    }
}

impl fmt::Display for Math<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fusion = self.fusion;
        writeln!(f, "inputs:")?;
        for &i in fusion.inputs() {
            write!(
                f,
                "  {}: {}",
                val_name(fusion, i, true),
                val_type(fusion, i, true)
            )?;
            let kind = fusion.get_val(i).map(|v| &v.kind);
            if let (true, Some(ValKind::Tensor(t))) = (self.options.layouts, kind) {
                // Contiguity in allocation order, as a layout is written.
                let contiguity: Vec<&str> = t
                    .contiguity_in_allocation_order()
                    .iter()
                    .map(|c| match c {
                        Some(true) => "true",
                        Some(false) => "false",
                        None => "_",
                    })
                    .collect();
                write!(
                    f,
                    " (contiguity [{}], order {:?})",
                    contiguity.join(", "),
                    t.stride_order
                )?;
            }
            if let Some(g) = fusion.generator_inputs() {
                if i == g.seed {
                    write!(f, " (the device generator's seed)")?;
                } else if i == g.offset {
                    write!(f, " (the device generator's offset, {} per call)", g.draws)?;
                }
            }
            writeln!(f)?;
        }
        writeln!(f, "exprs:")?;
        for (_, e) in fusion.exprs() {
            let outs: Vec<String> = e
                .outputs
                .iter()
                .map(|&o| val_name(fusion, o, true))
                .collect();
            let lhs = if outs.len() == 1 {
                outs[0].clone()
            } else {
                format!("({})", outs.join(", "))
            };
            write!(f, "  {lhs} = {}", rhs(fusion, e))?;
            if self.options.types {
                let types: Vec<String> = e
                    .outputs
                    .iter()
                    .map(|&o| val_type(fusion, o, true))
                    .collect();
                write!(f, " : {}", types.join(", "))?;
            }
            writeln!(f)?;
        }
        writeln!(f, "outputs:")?;
        for o in fusion.outputs() {
            write!(f, "  {}", val_name(fusion, o.val, true))?;
            if let Some(a) = o.alias_of {
                write!(f, " (in place of {})", val_name(fusion, a, true))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The infix operator of a binary op, for the ops the DSL writes as operators.
pub(crate) fn infix(op: BinaryOp) -> Option<&'static str> {
    use BinaryOp::*;
    Some(match op {
        Add => "+",
        Sub => "-",
        Mul => "*",
        Div => "/",
        Eq => "==",
        Ne => "!=",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        LogicalAnd => "&&",
        LogicalOr => "||",
        BitwiseAnd => "&",
        BitwiseOr => "|",
        BitwiseXor => "^",
        ShiftLeft => "<<",
        ShiftRight => ">>",
        _ => return None,
    })
}

/// An operand: a constant's literal or a value's name.
fn operand(fusion: &Fusion, v: ValId) -> String {
    match fusion.get_val(v) {
        Some(val) => match val.constant() {
            Some(c) => literal(c, val.dtype),
            None => val_name(fusion, v, true),
        },
        None => format!("<unknown {v}>"),
    }
}

fn size_arg(fusion: &Fusion, e: &Expr, s: SizeArg) -> String {
    match s {
        SizeArg::Const(c) => c.to_string(),
        SizeArg::Input(p) => match e.inputs.get(p as usize) {
            Some(&v) => operand(fusion, v),
            None => format!("<input {p}>"),
        },
    }
}

fn sizes(fusion: &Fusion, e: &Expr, s: &[SizeArg]) -> String {
    let parts: Vec<String> = s.iter().map(|&a| size_arg(fusion, e, a)).collect();
    format!("[{}]", parts.join(", "))
}

fn range(fusion: &Fusion, e: &Expr, r: &SliceRange) -> String {
    let start = size_arg(fusion, e, r.start);
    let stop = match r.stop {
        SizeArg::Const(i64::MAX) => "end".to_string(),
        s => size_arg(fusion, e, s),
    };
    if r.step == 1 {
        format!("{start}:{stop}")
    } else {
        format!("{start}:{stop}:{}", r.step)
    }
}

/// The first `n` inputs as operands (the rest are size-like attributes).
fn operands(fusion: &Fusion, e: &Expr, n: usize) -> String {
    let parts: Vec<String> = e
        .inputs
        .iter()
        .take(n)
        .map(|&v| operand(fusion, v))
        .collect();
    parts.join(", ")
}

/// The right-hand side of an expression's line.
fn rhs(fusion: &Fusion, e: &Expr) -> String {
    let name = e.op.name();
    let all = e.inputs.len();
    match &e.op {
        Op::Binary(b) if all >= 2 => match infix(*b) {
            Some(sym) => format!(
                "{} {sym} {}",
                operand(fusion, e.inputs[0]),
                operand(fusion, e.inputs[1])
            ),
            None => format!("{name}({})", operands(fusion, e, all)),
        },
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set | Op::SegmentSet => {
            format!("{name}({})", operands(fusion, e, all))
        }
        Op::Reduction { axes, .. } | Op::Welford { axes } => {
            format!("{name}({}, axes={axes:?})", operands(fusion, e, all))
        }
        Op::Scan { axis, .. } => format!("{name}({}, axis={axis})", operands(fusion, e, all)),
        Op::Sort {
            axis,
            descending,
            k: None,
        } => format!(
            "{name}({}, axis={axis}, descending={descending})",
            operands(fusion, e, all)
        ),
        Op::Sort {
            axis,
            descending,
            k: Some(k),
        } => format!(
            "{name}({}, k={k}, axis={axis}, largest={descending})",
            operands(fusion, e, all)
        ),
        Op::Var { axes, correction } | Op::VarMean { axes, correction } => {
            format!(
                "{name}({}, axes={axes:?}, correction={correction})",
                operands(fusion, e, all)
            )
        }
        Op::Broadcast { mask } => format!("{name}({}, mask={mask:?})", operands(fusion, e, all)),
        Op::Expand { sizes: s } | Op::Reshape { sizes: s } => {
            format!(
                "{name}({}, sizes={})",
                operands(fusion, e, 1),
                sizes(fusion, e, s)
            )
        }
        Op::Permute { perm } => format!("{name}({}, perm={perm:?})", operands(fusion, e, all)),
        Op::Squeeze { axes } => format!("{name}({}, axes={axes:?})", operands(fusion, e, all)),
        Op::Slice { ranges } => {
            let parts: Vec<String> = ranges.iter().map(|r| range(fusion, e, r)).collect();
            format!(
                "{name}({}, ranges=[{}])",
                operands(fusion, e, 1),
                parts.join(", ")
            )
        }
        Op::Pad { widths } => {
            let parts: Vec<String> = widths
                .iter()
                .map(|&(a, b)| format!("({}, {})", size_arg(fusion, e, a), size_arg(fusion, e, b)))
                .collect();
            format!(
                "{name}({}, widths=[{}])",
                operands(fusion, e, 2),
                parts.join(", ")
            )
        }
        Op::Cat { axis } => format!("{name}({}, axis={axis})", operands(fusion, e, all)),
        Op::Full { sizes: s } => format!(
            "{name}({}, sizes={})",
            operands(fusion, e, 1),
            sizes(fusion, e, s)
        ),
        Op::Iota { length } => {
            format!(
                "{name}({}, length={})",
                operands(fusion, e, 2),
                size_arg(fusion, e, *length)
            )
        }
        Op::Rand { dist, sizes: s } => format!(
            "rand({}, dist={}, sizes={})",
            operands(fusion, e, 4),
            dist.name(),
            sizes(fusion, e, s)
        ),
        Op::IndexSelect { axis } | Op::Gather { axis } | Op::TakeAlongAxis { axis } => {
            format!("{name}({}, axis={axis})", operands(fusion, e, all))
        }
        Op::Select { axis, index } => format!(
            "{name}({}, axis={axis}, index={})",
            operands(fusion, e, 1),
            size_arg(fusion, e, *index)
        ),
        Op::Scatter { axis, .. } => {
            format!("{name}({}, axis={axis})", operands(fusion, e, all))
        }
        Op::Size { axis } => format!("{name}({}, axis={axis})", operands(fusion, e, all)),
    }
}
