//! The IR verifier: checks that a fusion is well formed.
//!
//! The builder only produces well-formed fusions; the verifier guards fusions that come
//! from elsewhere (deserialized, transformed by a pass, assembled by a segmenter) and is
//! run by `FusionDefinition::finish`.

use super::{Fusion, IterKind, Op, ValId, ValKind};
use crate::error::{Error, Result};

/// Checks every structural invariant of `fusion`.
pub fn verify(fusion: &Fusion) -> Result<()> {
    let n = fusion.vals.len();
    let bad = |msg: String| Err(Error::InvalidIr(msg));
    let in_range = |v: ValId| v.index() < n;
    let mut is_input = vec![false; n];
    for &i in &fusion.inputs {
        if !in_range(i) {
            return bad(format!("input {i} is out of range ({n} values)"));
        }
        if std::mem::replace(&mut is_input[i.index()], true) {
            return bad(format!("{i} is listed twice as an input"));
        }
        if fusion.vals[i.index()].definition.is_some() {
            return bad(format!("input {i} has a defining expression"));
        }
        if fusion.vals[i.index()].constant().is_some() {
            return bad(format!("input {i} is a constant"));
        }
    }
    if let Some(g) = fusion.generator {
        let n_in = fusion.inputs.len();
        if n_in < 2 || fusion.inputs[n_in - 2..] != [g.seed, g.offset] {
            return bad(format!(
                "the generator's seed {} and offset {} are not the last two inputs",
                g.seed, g.offset
            ));
        }
        for v in [g.seed, g.offset] {
            if fusion.vals[v.index()].is_tensor()
                || fusion.vals[v.index()].dtype != crate::DataType::I64
            {
                return bad(format!("the generator input {v} is not an i64 scalar"));
            }
        }
    }
    // Values available so far, in arena order of expressions.
    let mut defined: Vec<bool> = (0..n)
        .map(|i| is_input[i] || fusion.vals[i].constant().is_some())
        .collect();
    for (i, v) in fusion.vals.iter().enumerate() {
        if v.definition.is_none() && !defined[i] && v.is_tensor() {
            // A tensor with neither definition nor input role is dead but harmless only
            // if nothing reads it; that is checked when an expression reads it.
        }
        if let ValKind::Tensor(t) = &v.kind {
            let rank = t.rank();
            if t.contiguity.len() != rank || t.stride_order.len() != rank {
                return bad(format!(
                    "v{i}: contiguity/stride order do not have one entry per dim ({rank})"
                ));
            }
            let mut seen = vec![false; rank];
            for &o in &t.stride_order {
                if o >= rank || std::mem::replace(&mut seen[o], true) {
                    return bad(format!(
                        "v{i}: stride order {:?} is not a permutation",
                        t.stride_order
                    ));
                }
            }
            for (d, c) in t.shape().zip(&t.contiguity) {
                if d.is_broadcast_like() != c.is_none() {
                    return bad(format!(
                        "v{i}: contiguity must be None exactly for broadcast dims"
                    ));
                }
                if d.kind == IterKind::Broadcast && d.extent.as_const() != Some(1) {
                    return bad(format!("v{i}: a broadcast dim must have extent 1"));
                }
            }
            for d in &t.domain {
                let mut err = None;
                d.extent.for_each_val(&mut |x| {
                    if !in_range(x) {
                        err = Some(format!("v{i}: extent mentions unknown value {x}"));
                    }
                });
                if let Some(e) = err {
                    return bad(e);
                }
                if let super::Extent::Dim { tensor, axis } = &d.extent {
                    let ok = is_input[tensor.index()]
                        && fusion.vals[tensor.index()]
                            .tensor()
                            .is_some_and(|t| (*axis as usize) < t.rank());
                    if !ok {
                        return bad(format!("v{i}: extent refers to {tensor}.size({axis}), which is not an input tensor dim"));
                    }
                }
            }
        }
    }
    for (ei, e) in fusion.exprs.iter().enumerate() {
        for &i in &e.inputs {
            if !in_range(i) {
                return bad(format!(
                    "expression {ei} ({}) reads unknown value {i}",
                    e.op.name()
                ));
            }
            if !defined[i.index()] {
                return bad(format!(
                    "expression {ei} ({}) reads {i} before it is defined",
                    e.op.name()
                ));
            }
        }
        for &o in &e.outputs {
            if !in_range(o) {
                return bad(format!("expression {ei} defines unknown value {o}"));
            }
            if defined[o.index()] {
                return bad(format!("{o} is defined twice"));
            }
            if fusion.vals[o.index()].definition.map(|d| d.index()) != Some(ei) {
                return bad(format!("{o} does not point back at its definition {ei}"));
            }
            defined[o.index()] = true;
        }
        let (ins, outs) = (e.inputs.len(), e.outputs.len());
        let want_outs = match e.op {
            Op::VarMean { .. } | Op::Sort { .. } => 2,
            Op::Welford { .. } => 3,
            _ => 1,
        };
        if outs != want_outs {
            return bad(format!(
                "expression {ei} ({}) has {outs} outputs, expected {want_outs}",
                e.op.name()
            ));
        }
        let min_ins = match &e.op {
            Op::Binary(_)
            | Op::Pad { .. }
            | Op::IndexSelect { .. }
            | Op::Gather { .. }
            | Op::TakeAlongAxis { .. }
            | Op::Iota { .. } => 2,
            Op::Scatter { .. } => 3,
            Op::Ternary(t) => t.arity(),
            Op::Rand { .. } => 4,
            _ => 1,
        };
        if ins < min_ins {
            return bad(format!(
                "expression {ei} ({}) has {ins} inputs, expected at least {min_ins}",
                e.op.name()
            ));
        }
    }
    for o in &fusion.outputs {
        if !in_range(o.val) || !defined[o.val.index()] {
            return bad(format!("output {} is not defined", o.val));
        }
        if let Some(a) = o.alias_of {
            if !in_range(a) || !is_input[a.index()] {
                return bad(format!(
                    "output {} aliases {a}, which is not an input",
                    o.val
                ));
            }
        }
    }
    Ok(())
}
