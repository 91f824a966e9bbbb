//! The C++ spelling of kernel IR expressions ([`Expr`]): literals, types, helper
//! names and operators, with parentheses where C++ precedence needs them (and where an
//! [`Expr::Paren`] asks for them).

use std::fmt::{self, Display, Formatter};

use crate::codegen::abi::cuda_type;
use crate::codegen::index::Idx;
use crate::codegen::kir::{BinOp, CType, Expr, Func};
use crate::dtype::{DataType, ScalarValue};
use crate::ir::ReductionOp;

// C++ precedence levels, tighter binding is higher.
const TERNARY: u8 = 3;
const OR: u8 = 4;
const AND: u8 = 5;
const BIT_OR: u8 = 6;
const BIT_XOR: u8 = 7;
const BIT_AND: u8 = 8;
const EQUALITY: u8 = 9;
const RELATIONAL: u8 = 10;
const SHIFT: u8 = 11;
const ADDITIVE: u8 = 12;
const MULTIPLICATIVE: u8 = 13;
const UNARY: u8 = 15;
const POSTFIX: u8 = 16;

fn op_prec(op: BinOp) -> u8 {
    match op {
        BinOp::Mul | BinOp::Div => MULTIPLICATIVE,
        BinOp::Add | BinOp::Sub => ADDITIVE,
        BinOp::Shl | BinOp::Shr => SHIFT,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => RELATIONAL,
        BinOp::Eq | BinOp::Ne => EQUALITY,
        BinOp::BitAnd => BIT_AND,
        BinOp::BitXor => BIT_XOR,
        BinOp::BitOr => BIT_OR,
        BinOp::And => AND,
        BinOp::Or => OR,
    }
}

fn op_text(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::And => "&&",
        BinOp::Or => "||",
        BinOp::BitAnd => "&",
        BinOp::BitOr => "|",
        BinOp::BitXor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
    }
}

impl Expr {
    /// How tightly the printed expression binds (a C++ precedence level).
    fn prec(&self) -> u8 {
        match self {
            Expr::Var(_)
            | Expr::Code(_)
            | Expr::Elem(..)
            | Expr::Call(..)
            | Expr::Functor(_)
            | Expr::Paren(_) => POSTFIX,
            // A literal may be spelled negative or as a cast.
            Expr::Lit(..) | Expr::Cast(..) | Expr::AddrOf(_) | Expr::NullPtr(_) => UNARY,
            Expr::Idx(i) => match i {
                Idx::Add(..) | Idx::Sub(..) => ADDITIVE,
                Idx::Mul(..) | Idx::Div(..) | Idx::Mod(..) => MULTIPLICATIVE,
                Idx::Const(c) if *c < 0 => UNARY,
                Idx::Value(e) => e.prec(),
                _ => POSTFIX,
            },
            Expr::Bin(op, ..) => op_prec(*op),
            Expr::Select(..) => TERNARY,
        }
    }

    /// True when the printed expression binds at least as tightly as a cast (an index
    /// expression embeds it without parentheses).
    pub(in crate::codegen) fn is_unary_or_tighter(&self) -> bool {
        self.prec() >= UNARY
    }
}

/// `e`, parenthesized when it binds less tightly than `min`.
fn operand(f: &mut Formatter<'_>, e: &Expr, min: u8) -> fmt::Result {
    if e.prec() < min {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Var(name) => f.write_str(name),
            Expr::Lit(v, dt) => f.write_str(&literal(*v, *dt)),
            Expr::Code(c) => write!(f, "0x{c:016x}ull"),
            Expr::Idx(i) => write!(f, "{i}"),
            Expr::Elem(name, i) => write!(f, "{name}[{i}]"),
            Expr::Cast(ty, e) => write!(f, "({ty})({e})"),
            Expr::Bin(op, a, b) => {
                // Left-associative: an operand of the same level is parenthesized on
                // the right only.
                let p = op_prec(*op);
                operand(f, a, p)?;
                write!(f, " {} ", op_text(*op))?;
                operand(f, b, p + 1)
            }
            Expr::Call(func, args) => {
                write!(f, "{func}(")?;
                for (k, a) in args.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            Expr::Select(c, a, b) => {
                operand(f, c, TERNARY + 1)?;
                f.write_str(" ? ")?;
                operand(f, a, TERNARY)?;
                f.write_str(" : ")?;
                operand(f, b, TERNARY)
            }
            Expr::AddrOf(e) => {
                f.write_str("&")?;
                operand(f, e, POSTFIX)
            }
            Expr::NullPtr(dt) => write!(f, "({}*)nullptr", cuda_type(*dt)),
            Expr::Functor(op) => f.write_str(functor(*op)),
            Expr::Paren(e) => write!(f, "({e})"),
        }
    }
}

/// The conditions of an `if`, and-ed.
pub(super) fn conjunction(conds: &[Expr]) -> String {
    let mut s = String::new();
    for (k, c) in conds.iter().enumerate() {
        if k > 0 {
            s.push_str(" && ");
        }
        if c.prec() < AND {
            s.push_str(&format!("({c})"));
        } else {
            s.push_str(&c.to_string());
        }
    }
    s
}

impl Display for CType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CType::Data(d) => cuda_type(*d),
            CType::Index => "nvfuser_index_t",
            CType::U64 => "unsigned long long",
        })
    }
}

impl Display for Func {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let name = match self {
            Func::Unary(u) => return write!(f, "nvf_{}", u.name()),
            Func::Binary(b) => return write!(f, "nvf_{}", b.name()),
            Func::Uniform(dt) => return write!(f, "nvf_uniform<{}>", cuda_type(*dt)),
            Func::F2I32F32 => "nvf_f2i32_f32",
            Func::F2I32F64 => "nvf_f2i32_f64",
            Func::F2I64 => "nvf_f2i64",
            Func::DivChecked => "nvf_div_checked",
            Func::FmodChecked => "nvf_fmod_checked",
            Func::RemainderChecked => "nvf_remainder_checked",
            Func::Clamp => "nvf_clamp",
            Func::UniformF64 => "nvf_uniform_f64_op",
            Func::NormalF32 => "nvf_normal_f32",
            Func::NormalF64 => "nvf_normal_f64",
            Func::WrapIndex => "nvf_wrap_index",
            Func::CheckIndex => "nvf_check_index",
            Func::InRange => "nvf_in_range",
            Func::LoadVolatile => "nvf_load_volatile",
            Func::Maximum => "nvf_maximum",
            Func::Minimum => "nvf_minimum",
            Func::WelfordUpdate => "nvf_welford_update",
            Func::BlockWelfordX => "nvf_block_welford_x",
            Func::BlockWelfordY => "nvf_block_welford_y",
            Func::BlockScanX => "nvf_block_scan_x",
            Func::GridReduce => "nvf_grid_reduce",
            Func::GridWelford => "nvf_grid_welford",
            Func::GridAllreduceGroup => "nvf_grid_allreduce_group",
            Func::GridReduceGroup => "nvf_grid_reduce_group",
            Func::SortRows => "nvf_sort_rows",
            Func::TopkRows => "nvf_topk_rows",
        };
        f.write_str(name)
    }
}

/// The preamble's functor of a reduction.
pub(super) fn functor(op: ReductionOp) -> &'static str {
    match op {
        ReductionOp::Sum | ReductionOp::Mean => "NvfSum()",
        ReductionOp::Prod => "NvfProd()",
        ReductionOp::Max => "NvfMax()",
        ReductionOp::Min => "NvfMin()",
    }
}

/// A C++ literal of `v` in type `to` (a compute type: never f16/bf16/fp8 unless cast).
fn literal(v: ScalarValue, to: DataType) -> String {
    match to {
        DataType::Bool => format!("{}", v.as_f64() != 0.0),
        DataType::I32 => {
            // `-2147483648` is the negation of a `long` literal in C++: spell i32::MIN
            // as an `int` expression.
            let i = v.cast(DataType::I32).as_i64().unwrap_or(0);
            if i == i64::from(i32::MIN) {
                "(-2147483647 - 1)".into()
            } else {
                format!("{i}")
            }
        }
        DataType::I64 => {
            let i = v.cast(DataType::I64).as_i64().unwrap_or(0);
            if i == i64::MIN {
                "(-9223372036854775807LL - 1)".into()
            } else {
                format!("{i}LL")
            }
        }
        DataType::F64 => {
            let x = v.as_f64();
            if x.is_nan() {
                "__longlong_as_double(0x7ff8000000000000LL)".into()
            } else if x.is_infinite() {
                format!(
                    "{}__longlong_as_double(0x7ff0000000000000LL)",
                    if x < 0.0 { "-" } else { "" }
                )
            } else {
                format!("{x:?}")
            }
        }
        DataType::F32 => {
            let x = v.as_f64() as f32;
            if x.is_nan() {
                "__int_as_float(0x7fc00000)".into()
            } else if x.is_infinite() {
                format!(
                    "{}__int_as_float(0x7f800000)",
                    if x < 0.0 { "-" } else { "" }
                )
            } else {
                format!("{x:?}f")
            }
        }
        DataType::F16 | DataType::BF16 | DataType::F8E4M3 | DataType::F8E5M2 => {
            format!("({})({})", cuda_type(to), literal(v, DataType::F32))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::index::ShapeField;
    use crate::ir::{BinaryOp, UnaryOp};

    fn v(name: &str) -> Expr {
        Expr::var(name)
    }

    fn shape(param: &str, field: ShapeField, axis: usize) -> Idx {
        Idx::Shape {
            param: param.into(),
            field,
            axis,
        }
    }

    fn elem(name: &str, i: Idx) -> Expr {
        Expr::elem(name, i)
    }

    #[test]
    fn casts_wrap_their_operand_in_parentheses() {
        let sum = elem("T0", Idx::var("i0")).bin(BinOp::Add, v("s1"));
        assert_eq!(sum.cast(DataType::F32).to_string(), "(float)(T0[i0] + s1)");
        let inner = v("x").cast(DataType::F16).cast(DataType::F32);
        assert_eq!(inner.to_string(), "(float)((nvf_half)(x))");
        assert_eq!(
            v("raw").cast(CType::Index).to_string(),
            "(nvfuser_index_t)(raw)"
        );
        assert_eq!(
            v("s").cast(CType::U64).to_string(),
            "(unsigned long long)(s)"
        );
    }

    #[test]
    fn binary_operators_parenthesize_by_precedence() {
        // lerp: a + w * (b - a)
        let (a, b, w) = (v("a"), v("b"), v("w"));
        let lerp = a
            .clone()
            .bin(BinOp::Add, w.bin(BinOp::Mul, b.bin(BinOp::Sub, a)));
        assert_eq!(lerp.to_string(), "a + w * (b - a)");
        // Left-associative: (x - y) - z needs none, x - (y - z) keeps its own.
        let l = v("x").bin(BinOp::Sub, v("y")).bin(BinOp::Sub, v("z"));
        assert_eq!(l.to_string(), "x - y - z");
        let r = v("x").bin(BinOp::Sub, v("y").bin(BinOp::Sub, v("z")));
        assert_eq!(r.to_string(), "x - (y - z)");
        let or_in_and = v("p").bin(BinOp::Or, v("q")).bin(BinOp::And, v("r"));
        assert_eq!(or_in_and.to_string(), "(p || q) && r");
        // An index sum as a factor.
        let i = Expr::from(Idx::var("i0") + Idx::Const(1));
        assert_eq!(i.bin(BinOp::Mul, v("s")).to_string(), "(i0 + 1) * s");
    }

    #[test]
    fn helper_calls_name_the_runtime_function() {
        let call = Expr::call(
            Func::DivChecked,
            vec![
                v("nvf_err"),
                Expr::Code(0x1234_5678_0000_0001),
                v("a"),
                v("b"),
            ],
        );
        assert_eq!(
            call.to_string(),
            "nvf_div_checked(nvf_err, 0x1234567800000001ull, a, b)"
        );
        let exp = Expr::call(Func::Unary(UnaryOp::Exp), vec![v("x")]);
        assert_eq!(exp.to_string(), "nvf_exp(x)");
        let pow = Expr::call(Func::Binary(BinaryOp::Pow), vec![v("x"), v("y")]);
        assert_eq!(pow.to_string(), "nvf_pow(x, y)");
        let u = Expr::call(Func::Uniform(DataType::BF16), vec![]);
        assert_eq!(u.to_string(), "nvf_uniform<nvf_bfloat>()");
        let ld = Expr::call(
            Func::LoadVolatile,
            vec![elem("T2", Idx::var("i0") * Idx::Const(4)).addr_of()],
        );
        assert_eq!(ld.to_string(), "nvf_load_volatile(&T2[i0 * 4])");
        let grid = Expr::NullPtr(DataType::F64);
        assert_eq!(grid.to_string(), "(double*)nullptr");
        assert_eq!(Expr::Functor(ReductionOp::Mean).to_string(), "NvfSum()");
    }

    #[test]
    fn predicates_and_selects() {
        let i = Idx::var("i1") * Idx::Const(128) + Idx::var("threadIdx.x");
        let bound = Expr::from(i).bin(BinOp::Lt, shape("T0_shape", ShapeField::Size, 0).into());
        let guard = v("blockIdx.y").bin(BinOp::Eq, Expr::int(0));
        assert_eq!(
            conjunction(&[bound.clone(), guard.clone(), v("T3_last")]),
            "i1 * 128 + threadIdx.x < T0_shape.size[0] && blockIdx.y == 0 && T3_last"
        );
        let either = bound.clone().bin(BinOp::Or, guard.clone());
        assert_eq!(
            conjunction(&[either, v("f")]),
            "(i1 * 128 + threadIdx.x < T0_shape.size[0] || blockIdx.y == 0) && f"
        );
        let all = Expr::all(vec![bound, guard]).unwrap();
        let sel = all.clone().select(v("a"), v("b"));
        assert_eq!(
            sel.to_string(),
            "i1 * 128 + threadIdx.x < T0_shape.size[0] && blockIdx.y == 0 ? a : b"
        );
        // A select as a condition or a nested else-branch; explicit parentheses stay.
        let nested = v("c").select(v("a"), v("b"));
        assert_eq!(
            nested.clone().select(v("x"), nested.clone()).to_string(),
            "(c ? a : b) ? x : c ? a : b"
        );
        assert_eq!(
            v("d").select(v("x"), nested.paren()).to_string(),
            "d ? x : (c ? a : b)"
        );
        assert_eq!(Expr::all(vec![]), None);
    }

    #[test]
    fn literals_are_spelled_by_type() {
        let lit = |x: ScalarValue, d: DataType| Expr::Lit(x, d).to_string();
        assert_eq!(lit(ScalarValue::Int(1), DataType::F32), "1.0f");
        assert_eq!(lit(ScalarValue::Int(1), DataType::F64), "1.0");
        assert_eq!(lit(ScalarValue::Int(2), DataType::I64), "2LL");
        assert_eq!(
            lit(ScalarValue::Int(i32::MIN as i64), DataType::I32),
            "(-2147483647 - 1)"
        );
        assert_eq!(
            lit(ScalarValue::Float(0.5), DataType::F16),
            "(nvf_half)(0.5f)"
        );
        assert_eq!(
            lit(ScalarValue::Float(f64::NEG_INFINITY), DataType::F32),
            "-__int_as_float(0x7f800000)"
        );
        assert_eq!(lit(ScalarValue::Bool(true), DataType::Bool), "true");
        // A negative literal needs no parentheses as an operand.
        let neg = v("x").bin(
            BinOp::Sub,
            Expr::Lit(ScalarValue::Float(-1.0), DataType::F32),
        );
        assert_eq!(neg.to_string(), "x - -1.0f");
    }

    #[test]
    fn values_embedded_in_indices() {
        let wrapped = Idx::Value(Box::new(Expr::call(
            Func::WrapIndex,
            vec![v("s2"), shape("T0_shape", ShapeField::Size, 1).into()],
        )));
        let off = wrapped * shape("T0_shape", ShapeField::Stride, 1);
        assert_eq!(
            elem("T0", off).to_string(),
            "T0[nvf_wrap_index(s2, T0_shape.size[1]) * T0_shape.stride[1]]"
        );
        let sum = Idx::Value(Box::new(v("a").bin(BinOp::Add, v("b"))));
        assert_eq!((sum * Idx::var("n")).to_string(), "(a + b) * n");
    }
}
