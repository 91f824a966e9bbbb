//! A checked fusion as ordinary builder calls, verified at compile time.
//!
//! The DSL's interpreter built the fusion through the builder's conveniences (keepdim,
//! half-precision reductions, rank extension), so the fusion holds only primitive
//! expressions. Replaying those primitives through the builder, one call per expression
//! in arena order on the same operands, appends exactly those expressions again (the
//! property the Rust reproducer relies on). This module emits those calls as tokens and,
//! in the same walk, makes each call here at compile time: every call must append exactly
//! one expression with the original's outputs, and the replayed fusion must be
//! structurally equal to the checked one. A violation is a bug in this crate or in the
//! builder and is reported as an internal error at compile time; it can never produce a
//! fusion that differs from the one the user's source was checked as.
//!
//! The emitted statements build into a local `__nvf_fd: FusionDefinition`, define inputs
//! with `define_tensor_spec` (the declared layout), constants with `constant_of` on first
//! use, and name value `vN` of the fusion `__nvf_vN`.

use nvfuser_core::builder::{FusionDefinition, Size};
use nvfuser_core::ir::{BinaryOp, Distribution, Expr, Fusion, Op, SizeArg, ValId, ValKind};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::paths::{self, private};

mod call;
mod input;

use call::Operands;
use input::InputSpec;

/// A fusion as builder calls.
pub(crate) struct Replayed {
    /// Statements that build `__nvf_fd` (declared `mut` by the first statement).
    pub stmts: TokenStream,
    /// The structural hash of the checked fusion.
    pub hash: u64,
}

/// Replays `fusion` (see the module docs); `Err` says what diverged.
pub(crate) fn replay(fusion: &Fusion) -> Result<Replayed, String> {
    let mut r = Replayer {
        src: fusion,
        fd: FusionDefinition::new(),
        map: vec![None; fusion.num_vals()],
        used: used_vals(fusion),
        stmts: Vec::new(),
    };
    let fd = local_fd();
    let new = private("FusionDefinition");
    r.stmts.push(quote!(let mut #fd = #new::new();));
    // The random generator's seed and offset are not replayed as inputs: the stateful
    // random ops (`rand_uniform`, `rand_normal`) make them again.
    for &input in fusion.user_inputs() {
        r.input(input)?;
    }
    for (id, e) in fusion.exprs() {
        r.expr(e)
            .map_err(|why| format!("expression {} ({}): {why}", id.0, e.op.name()))?;
    }
    for o in fusion.outputs() {
        let v = r.var(o.val);
        let val = r.get(o.val)?;
        match o.alias_of {
            Some(a) => {
                let input = r.var(a);
                let ai = r.get(a)?;
                r.fd.add_output_alias(val, ai).map_err(|e| e.to_string())?;
                r.stmts.push(quote!(#fd.add_output_alias(#v, #input)?;));
            }
            None => {
                r.fd.add_output(val).map_err(|e| e.to_string())?;
                r.stmts.push(quote!(#fd.add_output(#v)?;));
            }
        }
    }
    let replayed = r.fd.finish().map_err(|e| e.to_string())?;
    if replayed != *fusion {
        return Err(format!(
            "the replayed fusion differs from the checked one\nchecked:\n{fusion}\nreplayed:\n{replayed}"
        ));
    }
    let stmts = r.stmts;
    Ok(Replayed {
        stmts: quote!(#(#stmts)*),
        hash: fusion.structural_hash(),
    })
}

/// The generated `FusionDefinition` local.
pub(crate) fn local_fd() -> Ident {
    paths::local("fd")
}

/// Which values something reads after they are defined (so only those get a binding).
fn used_vals(f: &Fusion) -> Vec<bool> {
    let mut used = vec![false; f.num_vals()];
    for (_, e) in f.exprs() {
        for &i in &e.inputs {
            used[i.index()] = true;
        }
    }
    for o in f.outputs() {
        used[o.val.index()] = true;
        if let Some(a) = o.alias_of {
            used[a.index()] = true;
        }
    }
    used
}

/// A size argument, both as a value here and as tokens.
struct SizeTok {
    size: Size,
    tokens: TokenStream,
}

struct Replayer<'a> {
    src: &'a Fusion,
    fd: FusionDefinition,
    /// Value of the checked fusion -> value of the replay.
    map: Vec<Option<ValId>>,
    used: Vec<bool>,
    stmts: Vec<TokenStream>,
}

impl Replayer<'_> {
    /// The generated name of value `v` of the checked fusion.
    fn var(&self, v: ValId) -> Ident {
        Ident::new(&format!("__nvf_v{}", v.id()), Span::mixed_site())
    }

    /// The replayed value of `v`.
    fn get(&self, v: ValId) -> Result<ValId, String> {
        self.map
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| format!("value {v} is read before it is defined"))
    }

    /// `let __nvf_vN = <call>;`, or just `<call>;` when nothing reads `vN`.
    fn bind(&mut self, v: ValId, call: TokenStream) {
        if self.used[v.index()] {
            let name = self.var(v);
            self.stmts.push(quote!(let #name = #call;));
        } else {
            self.stmts.push(quote!(#call;));
        }
    }

    fn input(&mut self, v: ValId) -> Result<(), String> {
        let fd = local_fd();
        let val = self.src.val(v);
        let (id, call) = match &val.kind {
            ValKind::Tensor(t) => {
                let spec = InputSpec::of(val.dtype, t)?;
                let id = self
                    .fd
                    .define_tensor_spec(spec.spec())
                    .map_err(|e| e.to_string())?;
                let tokens = spec.tokens();
                (id, quote!(#fd.define_tensor_spec(#tokens)?))
            }
            ValKind::Scalar(_) => {
                let id = self
                    .fd
                    .define_scalar(val.dtype)
                    .map_err(|e| e.to_string())?;
                let dtype = paths::dtype(val.dtype);
                (id, quote!(#fd.define_scalar(#dtype)?))
            }
        };
        self.map[v.index()] = Some(id);
        self.bind(v, call);
        Ok(())
    }

    /// Defines the constants among `e`'s operands that are not defined yet.
    fn constants(&mut self, e: &Expr) -> Result<(), String> {
        self.constants_of(&e.inputs)
    }

    /// [`Replayer::constants`] of some operands.
    fn constants_of(&mut self, operands: &[ValId]) -> Result<(), String> {
        let fd = local_fd();
        for &i in operands {
            if self.map.get(i.index()).copied().flatten().is_some() {
                continue;
            }
            let val = self.src.val(i);
            let Some(c) = val.constant() else {
                return Err(format!(
                    "operand {i} is neither an input, a constant, nor defined earlier"
                ));
            };
            self.map[i.index()] = Some(self.fd.constant_of(c, val.dtype));
            let (value, dtype) = (paths::scalar(c), paths::dtype(val.dtype));
            self.bind(i, quote!(#fd.constant_of(#value, #dtype)));
        }
        Ok(())
    }

    fn size(&self, e: &Expr, s: SizeArg) -> Result<SizeTok, String> {
        let size = private("Size");
        Ok(match s {
            SizeArg::Const(c) => {
                let c_tok = paths::int(c);
                SizeTok {
                    size: Size::Const(c),
                    tokens: quote!(#size::Const(#c_tok)),
                }
            }
            SizeArg::Input(p) => {
                let v = *e
                    .inputs
                    .get(p as usize)
                    .ok_or_else(|| format!("size argument {p} is not an input"))?;
                let name = self.var(v);
                SizeTok {
                    size: Size::Val(self.get(v)?),
                    tokens: quote!(#size::Val(#name)),
                }
            }
        })
    }

    fn sizes(&self, e: &Expr, sizes: &[SizeArg]) -> Result<(Vec<Size>, TokenStream), String> {
        let all = sizes
            .iter()
            .map(|&s| self.size(e, s))
            .collect::<Result<Vec<_>, _>>()?;
        let tokens = all.iter().map(|s| &s.tokens);
        let tokens = quote!(&[#(#tokens),*]);
        Ok((all.into_iter().map(|s| s.size).collect(), tokens))
    }

    /// Replays a stateful random op: `rand_uniform`/`rand_normal` on its first two
    /// operands, which appends its offset's `offset + k` (after the first such op) and
    /// the op itself.
    fn generator_rand(
        &mut self,
        e: &Expr,
        dist: Distribution,
        sizes: &[SizeArg],
    ) -> Result<(), String> {
        // Not the seed and the offset (operands 2 and 3): the builder call makes them.
        let operands: Vec<ValId> = e
            .inputs
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != 2 && k != 3)
            .map(|(_, &v)| v)
            .collect();
        self.constants_of(&operands)?;
        let (a, b) = (self.get(e.inputs[0])?, self.get(e.inputs[1])?);
        let (an, bn) = (self.var(e.inputs[0]), self.var(e.inputs[1]));
        let (s, st) = self.sizes(e, sizes)?;
        let out = *e.outputs.first().ok_or("an expression without outputs")?;
        let dtype = self.src.val(out).dtype;
        let d = paths::dtype(dtype);
        let fd = local_fd();
        let (r, call) = match dist {
            Distribution::Uniform => (
                self.fd.rand_uniform(&s, a, b, dtype),
                quote!(#fd.rand_uniform(#st, #an, #bn, #d)),
            ),
            Distribution::Normal => (
                self.fd.rand_normal(&s, a, b, dtype),
                quote!(#fd.rand_normal(#st, #an, #bn, #d)),
            ),
        };
        let r = r.map_err(|e| e.to_string())?;
        let (_, appended) = self.fd.fusion().exprs().last().ok_or("no expression")?;
        if appended.op != e.op || appended.outputs.as_slice() != [r] {
            return Err(format!(
                "the builder call appended {:?}, expected {:?}",
                appended.op, e.op
            ));
        }
        self.map[out.index()] = Some(r);
        self.bind(out, quote!(#call?));
        Ok(())
    }

    /// Replays one expression: the call here, the call as tokens, and the check that the
    /// call appended exactly this expression.
    fn expr(&mut self, e: &Expr) -> Result<(), String> {
        if let Some(g) = self.src.generator_inputs() {
            // `offset + k` of a stateful random op: its builder call makes it.
            if matches!(e.op, Op::Binary(BinaryOp::Add)) && e.inputs.first() == Some(&g.offset) {
                return Ok(());
            }
            if let Op::Rand { dist, sizes } = &e.op {
                if e.inputs.get(2) == Some(&g.seed) {
                    return self.generator_rand(e, *dist, sizes);
                }
            }
        }
        self.constants(e)?;
        let ins: Vec<ValId> = e
            .inputs
            .iter()
            .map(|&i| self.get(i))
            .collect::<Result<_, _>>()?;
        let names: Vec<Ident> = e.inputs.iter().map(|&i| self.var(i)).collect();
        let out_dtype = e
            .outputs
            .first()
            .map(|&o| self.src.val(o).dtype)
            .ok_or("an expression without outputs")?;
        let operands = Operands {
            ins,
            names,
            out_dtype,
        };
        let before = self.fd.fusion().num_exprs();
        // (the replayed outputs, the call's tokens)
        let (outs, call) = self.call(e, &operands)?;
        // The call must have appended exactly this expression.
        let after = self.fd.fusion().num_exprs();
        if after != before + 1 {
            return Err(format!(
                "the builder call appended {} expressions, expected 1",
                after - before
            ));
        }
        let (_, appended) = self.fd.fusion().exprs().last().ok_or("no expression")?;
        if appended.op != e.op || appended.outputs.as_slice() != outs.as_slice() {
            return Err(format!(
                "the builder call appended {:?}, expected {:?}",
                appended.op, e.op
            ));
        }
        if outs.len() != e.outputs.len() {
            return Err(format!(
                "{} outputs, expected {}",
                outs.len(),
                e.outputs.len()
            ));
        }
        for (&o, &r) in e.outputs.iter().zip(&outs) {
            self.map[o.index()] = Some(r);
        }
        let call = quote!(#call?);
        match e.outputs.as_slice() {
            [one] => self.bind(*one, call),
            many => {
                let pats = many.iter().map(|&o| {
                    if self.used[o.index()] {
                        let name = self.var(o);
                        quote!(#name)
                    } else {
                        quote!(_)
                    }
                });
                self.stmts.push(quote!(let (#(#pats),*) = #call;));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
