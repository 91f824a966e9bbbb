//! The builder call that replays one expression, by op family: each function makes the
//! call here (on the replayed operands) and writes the same call as tokens (on the
//! generated names). The caller checks what the call appended.

use nvfuser_core::builder::Slice;
use nvfuser_core::ir::{Distribution, Expr, Op, ValId};
use nvfuser_core::DataType;
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use super::{local_fd, Replayer};
use crate::paths::{self, private};

/// An expression's operands, both replayed and by their generated names, and the dtype
/// of its first output.
pub(super) struct Operands {
    /// The replayed values of the operands.
    pub ins: Vec<ValId>,
    /// The generated names of the operands.
    pub names: Vec<Ident>,
    /// The dtype of the expression's first output (what casts and factories make).
    pub out_dtype: DataType,
}

impl Operands {
    /// `Err` unless there are exactly `n` operands.
    fn arity(&self, n: usize) -> Result<(), String> {
        if self.ins.len() == n {
            Ok(())
        } else {
            Err(format!("{} operands, expected {n}", self.ins.len()))
        }
    }
}

/// The replayed outputs and the call's tokens.
type Call = (Vec<ValId>, TokenStream);

/// Axes as the builder takes them, and as tokens.
fn axes_i64(axes: &[usize]) -> (Vec<i64>, TokenStream) {
    let v: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let t: Vec<TokenStream> = v.iter().map(|&a| paths::int(a)).collect();
    (v, quote!(&[#(#t),*]))
}

/// A builder error as the message of the replay's error.
fn err(e: nvfuser_core::Error) -> String {
    e.to_string()
}

/// The error of a family function given an op of another family (a bug in the
/// dispatch of [`Replayer::call`]).
fn not_in(family: &str, op: &Op) -> String {
    format!("{} is not a {family} op", op.name())
}

/// `::nvfuser::__private::<Enum>::<Variant>`.
fn op_variant(ty: &str, variant: String) -> TokenStream {
    let ty = private(ty);
    let v = Ident::new(&variant, Span::call_site());
    quote!(#ty::#v)
}

impl Replayer<'_> {
    /// Makes the builder call that replays `e`, here and as tokens.
    pub(super) fn call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        match &e.op {
            Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) | Op::Cast | Op::Set | Op::SegmentSet => {
                self.pointwise_call(e, o)
            }
            Op::Reduction { .. }
            | Op::Scan { .. }
            | Op::Var { .. }
            | Op::VarMean { .. }
            | Op::Welford { .. } => self.reduction_call(e, o),
            Op::Sort {
                axis,
                descending,
                k,
            } => {
                o.arity(1)?;
                let fd = local_fd();
                let (x, a) = (&o.names[0], paths::int(*axis as i64));
                let kt = match k {
                    Some(k) => {
                        let k = paths::int(*k);
                        quote!(::core::option::Option::Some(#k))
                    }
                    None => quote!(::core::option::Option::None),
                };
                let (values, indices) = self
                    .fd
                    .sort_op(o.ins[0], *axis as i64, *descending, *k)
                    .map_err(err)?;
                Ok((
                    vec![values, indices],
                    quote!(#fd.sort_op(#x, #a, #descending, #kt)),
                ))
            }
            Op::Broadcast { .. }
            | Op::Expand { .. }
            | Op::Reshape { .. }
            | Op::Permute { .. }
            | Op::Squeeze { .. }
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Cat { .. } => self.shape_call(e, o),
            Op::Full { .. } | Op::Iota { .. } | Op::Rand { .. } => self.creation_call(e, o),
            Op::IndexSelect { .. }
            | Op::Select { .. }
            | Op::Gather { .. }
            | Op::TakeAlongAxis { .. }
            | Op::Scatter { .. }
            | Op::Size { .. } => self.index_call(e, o),
        }
    }

    /// Unary, binary and ternary ops, casts and copies.
    fn pointwise_call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        let fd = local_fd();
        let (ins, names) = (&o.ins, &o.names);
        let b = &mut self.fd;
        Ok(match &e.op {
            Op::Unary(u) => {
                o.arity(1)?;
                let op = op_variant("UnaryOp", format!("{u:?}"));
                let x = &names[0];
                (
                    vec![b.unary(*u, ins[0]).map_err(err)?],
                    quote!(#fd.unary(#op, #x)),
                )
            }
            Op::Binary(bop) => {
                o.arity(2)?;
                let op = op_variant("BinaryOp", format!("{bop:?}"));
                let (x, y) = (&names[0], &names[1]);
                (
                    vec![b.binary(*bop, ins[0], ins[1]).map_err(err)?],
                    quote!(#fd.binary(#op, #x, #y)),
                )
            }
            Op::Ternary(t) => {
                o.arity(t.arity())?;
                let op = op_variant("TernaryOp", format!("{t:?}"));
                (
                    vec![b.ternary(*t, ins).map_err(err)?],
                    quote!(#fd.ternary(#op, &[#(#names),*])),
                )
            }
            Op::Cast => {
                o.arity(1)?;
                let (x, d) = (&names[0], paths::dtype(o.out_dtype));
                (
                    vec![b.cast(ins[0], o.out_dtype).map_err(err)?],
                    quote!(#fd.cast(#x, #d)),
                )
            }
            Op::Set => {
                o.arity(1)?;
                let x = &names[0];
                (vec![b.set(ins[0]).map_err(err)?], quote!(#fd.set(#x)))
            }
            Op::SegmentSet => {
                o.arity(1)?;
                let x = &names[0];
                (
                    vec![b.segment_set(ins[0]).map_err(err)?],
                    quote!(#fd.segment_set(#x)),
                )
            }
            other => return Err(not_in("pointwise", other)),
        })
    }

    /// Reductions, scans, var, var_mean and welford, all with `keepdim` false (the
    /// checked fusion holds only primitive expressions; see the module docs of
    /// `replay`). A scan is replayed by its own method (`cumsum(x, axis)`, ...): its
    /// operand already has the computation type, so the builder adds no cast.
    fn reduction_call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        let fd = local_fd();
        let (ins, names) = (&o.ins, &o.names);
        let b = &mut self.fd;
        Ok(match &e.op {
            Op::Reduction { op, axes } => {
                o.arity(1)?;
                let rop = op_variant("ReductionOp", format!("{op:?}"));
                let (a, at) = axes_i64(axes);
                let x = &names[0];
                (
                    vec![b.reduction(*op, ins[0], &a, false).map_err(err)?],
                    quote!(#fd.reduction(#rop, #x, #at, false)),
                )
            }
            Op::Scan { op, axis } => {
                o.arity(1)?;
                let method = Ident::new(op.name(), Span::call_site());
                let (x, a) = (&names[0], paths::int(*axis as i64));
                (
                    vec![b.scan(*op, ins[0], *axis as i64).map_err(err)?],
                    quote!(#fd.#method(#x, #a)),
                )
            }
            Op::Var { axes, correction } => {
                o.arity(1)?;
                let (a, at) = axes_i64(axes);
                let (x, c) = (&names[0], paths::int(*correction));
                (
                    vec![b.var(ins[0], &a, *correction, false).map_err(err)?],
                    quote!(#fd.var(#x, #at, #c, false)),
                )
            }
            Op::VarMean { axes, correction } => {
                o.arity(1)?;
                let (a, at) = axes_i64(axes);
                let (x, c) = (&names[0], paths::int(*correction));
                let (var, mean) = b.var_mean(ins[0], &a, *correction, false).map_err(err)?;
                (vec![var, mean], quote!(#fd.var_mean(#x, #at, #c, false)))
            }
            Op::Welford { axes } => {
                o.arity(1)?;
                let (a, at) = axes_i64(axes);
                let x = &names[0];
                let (mean, var_sum, count) = b.welford(ins[0], &a).map_err(err)?;
                (vec![mean, var_sum, count], quote!(#fd.welford(#x, #at)))
            }
            other => return Err(not_in("reduction", other)),
        })
    }

    /// Broadcast, expand, reshape, permute, squeeze, slice, pad and cat.
    fn shape_call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        let fd = local_fd();
        let (ins, names) = (&o.ins, &o.names);
        Ok(match &e.op {
            Op::Broadcast { mask } => {
                o.arity(1)?;
                let x = &names[0];
                (
                    vec![self.fd.broadcast(ins[0], mask).map_err(err)?],
                    quote!(#fd.broadcast(#x, &[#(#mask),*])),
                )
            }
            Op::Expand { sizes } | Op::Reshape { sizes } => {
                let (s, st) = self.sizes(e, sizes)?;
                let x = &names[0];
                let b = &mut self.fd;
                if matches!(e.op, Op::Expand { .. }) {
                    (
                        vec![b.expand(ins[0], &s).map_err(err)?],
                        quote!(#fd.expand(#x, #st)),
                    )
                } else {
                    (
                        vec![b.reshape(ins[0], &s).map_err(err)?],
                        quote!(#fd.reshape(#x, #st)),
                    )
                }
            }
            Op::Permute { perm } => {
                o.arity(1)?;
                let (p, pt) = axes_i64(perm);
                let x = &names[0];
                (
                    vec![self.fd.permute(ins[0], &p).map_err(err)?],
                    quote!(#fd.permute(#x, #pt)),
                )
            }
            Op::Squeeze { axes } => {
                o.arity(1)?;
                let (a, at) = axes_i64(axes);
                let x = &names[0];
                (
                    vec![self.fd.squeeze(ins[0], &a).map_err(err)?],
                    quote!(#fd.squeeze(#x, #at)),
                )
            }
            Op::Slice { ranges } => {
                let slice = private("Slice");
                let mut rs = Vec::new();
                let mut ts = Vec::new();
                for r in ranges {
                    let (start, stop) = (self.size(e, r.start)?, self.size(e, r.stop)?);
                    let (st, sp, step) = (&start.tokens, &stop.tokens, paths::int(r.step));
                    ts.push(quote!(#slice::step(#st, #sp, #step)));
                    rs.push(Slice::step(start.size, stop.size, r.step));
                }
                let x = &names[0];
                (
                    vec![self.fd.slice(ins[0], &rs).map_err(err)?],
                    quote!(#fd.slice(#x, &[#(#ts),*])),
                )
            }
            Op::Pad { widths } => {
                let mut sizes = Vec::with_capacity(widths.len());
                let mut w = Vec::with_capacity(widths.len());
                for &(lo, hi) in widths {
                    let (lo, hi) = (self.size(e, lo)?, self.size(e, hi)?);
                    let (lt, ht) = (&lo.tokens, &hi.tokens);
                    w.push(quote!((#lt, #ht)));
                    sizes.push((lo.size, hi.size));
                }
                let (x, v) = (&names[0], &names[1]);
                (
                    vec![self.fd.pad_sizes(ins[0], &sizes, ins[1]).map_err(err)?],
                    quote!(#fd.pad_sizes(#x, &[#(#w),*], #v)),
                )
            }
            Op::Cat { axis } => {
                let a = paths::int(*axis as i64);
                (
                    vec![self.fd.cat(ins, *axis as i64).map_err(err)?],
                    quote!(#fd.cat(&[#(#names),*], #a)),
                )
            }
            other => return Err(not_in("shape", other)),
        })
    }

    /// Full, iota and random tensors.
    fn creation_call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        let fd = local_fd();
        let (ins, names, out_dtype) = (&o.ins, &o.names, o.out_dtype);
        Ok(match &e.op {
            Op::Full { sizes } => {
                let (s, st) = self.sizes(e, sizes)?;
                let (v, d) = (&names[0], paths::dtype(out_dtype));
                (
                    vec![self.fd.full(&s, ins[0], out_dtype).map_err(err)?],
                    quote!(#fd.full(#st, #v, #d)),
                )
            }
            Op::Iota { length } => {
                let len = self.size(e, *length)?;
                let lt = &len.tokens;
                let (start, step, d) = (&names[0], &names[1], paths::dtype(out_dtype));
                (
                    vec![self
                        .fd
                        .iota(len.size, ins[0], ins[1], out_dtype)
                        .map_err(err)?],
                    quote!(#fd.iota(#lt, #start, #step, #d)),
                )
            }
            Op::Rand { dist, sizes } => {
                let (s, st) = self.sizes(e, sizes)?;
                let (a, bb, seed, off) = (&names[0], &names[1], &names[2], &names[3]);
                let d = paths::dtype(out_dtype);
                let b = &mut self.fd;
                let (x, method) = match dist {
                    Distribution::Uniform => (
                        b.uniform(&s, ins[0], ins[1], ins[2], ins[3], out_dtype),
                        quote!(uniform),
                    ),
                    Distribution::Normal => (
                        b.normal(&s, ins[0], ins[1], ins[2], ins[3], out_dtype),
                        quote!(normal),
                    ),
                };
                (
                    vec![x.map_err(err)?],
                    quote!(#fd.#method(#st, #a, #bb, #seed, #off, #d)),
                )
            }
            other => return Err(not_in("creation", other)),
        })
    }

    /// Index_select, select, gather, take_along_axis, scatter, scatter_add and size.
    fn index_call(&mut self, e: &Expr, o: &Operands) -> Result<Call, String> {
        let fd = local_fd();
        let (ins, names) = (&o.ins, &o.names);
        Ok(match &e.op {
            Op::IndexSelect { axis } => {
                o.arity(2)?;
                let (x, i, a) = (&names[0], &names[1], paths::int(*axis as i64));
                (
                    vec![self
                        .fd
                        .index_select(ins[0], *axis as i64, ins[1])
                        .map_err(err)?],
                    quote!(#fd.index_select(#x, #a, #i)),
                )
            }
            Op::Select { axis, index } => {
                let idx = self.size(e, *index)?;
                let (x, a, it) = (&names[0], paths::int(*axis as i64), &idx.tokens);
                (
                    vec![self
                        .fd
                        .select(ins[0], *axis as i64, idx.size)
                        .map_err(err)?],
                    quote!(#fd.select(#x, #a, #it)),
                )
            }
            Op::Gather { axis } => {
                o.arity(2)?;
                let (x, i, a) = (&names[0], &names[1], paths::int(*axis as i64));
                (
                    vec![self.fd.gather(ins[0], *axis as i64, ins[1]).map_err(err)?],
                    quote!(#fd.gather(#x, #a, #i)),
                )
            }
            Op::TakeAlongAxis { axis } => {
                o.arity(2)?;
                let (x, i, a) = (&names[0], &names[1], paths::int(*axis as i64));
                (
                    vec![self
                        .fd
                        .take_along_axis(ins[0], ins[1], *axis as i64)
                        .map_err(err)?],
                    quote!(#fd.take_along_axis(#x, #i, #a)),
                )
            }
            Op::Scatter { axis, add } => {
                o.arity(3)?;
                let (x, i, s) = (&names[0], &names[1], &names[2]);
                let a = paths::int(*axis as i64);
                let v = if *add {
                    self.fd.scatter_add(ins[0], *axis as i64, ins[1], ins[2])
                } else {
                    self.fd.scatter(ins[0], *axis as i64, ins[1], ins[2])
                };
                let method = Ident::new(e.op.name(), Span::call_site());
                (vec![v.map_err(err)?], quote!(#fd.#method(#x, #a, #i, #s)))
            }
            Op::Size { axis } => {
                o.arity(1)?;
                let (x, a) = (&names[0], paths::int(*axis as i64));
                (
                    vec![self.fd.size(ins[0], *axis as i64).map_err(err)?],
                    quote!(#fd.size(#x, #a)),
                )
            }
            other => return Err(not_in("index", other)),
        })
    }
}
