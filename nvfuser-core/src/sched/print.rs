//! The "scheduled IR" printer: every tensor of the kernel graph with its root, logical
//! and loop dims, the transforms between them, memory type and compute-at position.
//!
//! Tensors recomputed at each use (`T5_r`) print first, as one line each.
//!
//! A dim prints as `<kind><parallel><id>{<extent>}`: kind `i` iteration, `b` broadcast,
//! `x` expanded, `r` reduction; parallel `S` serial, `BIDx`.., `TIDx`.., `V`, `UR`.

use std::fmt::{self, Write};

use super::domain::{DomId, DomTransform, TensorDomain};
use super::{ScheduledFusion, TensorSchedule};
use crate::ir::{IterKind, ValId};

fn dom_name(d: &TensorDomain, id: DomId) -> String {
    let dom = d.dom(id);
    let k = match dom.kind {
        IterKind::Iteration => "i",
        IterKind::Broadcast => "b",
        IterKind::Expanded => "x",
        IterKind::Reduction => "r",
    };
    format!("{k}{}{}{{{}}}", dom.parallel.short(), id.0, dom.extent)
}

fn dom_list(d: &TensorDomain, ids: &[DomId]) -> String {
    let v: Vec<String> = ids.iter().map(|&i| dom_name(d, i)).collect();
    format!("[{}]", v.join(", "))
}

/// The printed name of a tensor (`T3_l`).
pub(crate) fn tensor_name(tv: ValId, t: &TensorSchedule) -> String {
    format!("T{}_{}", tv.id(), t.memory.suffix())
}

impl ScheduledFusion {
    /// The scheduled IR as text (also the `Display` output).
    pub fn scheduled_ir(&self) -> String {
        let s = self.schedule();
        let mut out = String::new();
        let name = |v: ValId| match s.tensors.get(&v) {
            Some(t) => tensor_name(v, t),
            None if s.recomputed(v).is_some() => format!("T{}_r", v.id()),
            None => format!("s{}", v.id()),
        };
        let _ = writeln!(
            out,
            "inputs: {}",
            s.inputs
                .iter()
                .map(|&v| name(v))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            out,
            "outputs: {}",
            s.outputs
                .iter()
                .map(|&v| name(v))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(l) = &s.sort {
            if l.select > 0 {
                let _ = writeln!(
                    out,
                    "block topk: one row per block by radix select, {} selected pairs sorted, {} threads",
                    l.select, l.threads
                );
            } else {
                let _ = writeln!(
                    out,
                    "block sort: {} rows of {} elements per block, {} threads",
                    l.rows_per_block, l.pad, l.threads
                );
            }
        }
        for e in &s.recomputed {
            let args: Vec<String> = e.inputs.iter().map(|&v| name(v)).collect();
            let _ = writeln!(
                out,
                "{} {} = {}({}) recomputed at each use",
                name(e.output),
                self.fusion().val(e.output).dtype,
                e.op.name(),
                args.join(", ")
            );
        }
        for e in &s.exprs {
            let t = &s.tensors[&e.output];
            let args: Vec<String> = e.inputs.iter().map(|&v| name(v)).collect();
            let lhs = if e.siblings.is_empty() {
                format!("{} {}", name(e.output), t.dtype)
            } else {
                let outs: Vec<String> = e
                    .outputs()
                    .iter()
                    .map(|&o| format!("{} {}", name(o), s.tensors[&o].dtype))
                    .collect();
                format!("({})", outs.join(", "))
            };
            let _ = write!(out, "{lhs} = {}({})", e.op.name(), args.join(", "));
            if let Some(ca) = t.compute_at {
                let _ = write!(out, " ca_pos({}) at T{}", ca.pos, ca.consumer.id());
            }
            if let Some(cw) = t.compute_with {
                let _ = write!(out, " cw_pos({}) with T{}", cw.pos, cw.consumer.id());
            }
            out.push('\n');
            let d = &t.domain;
            let _ = writeln!(out, "  root:    {}", dom_list(d, &d.root));
            if d.logical != d.root {
                let _ = writeln!(out, "  logical: {}", dom_list(d, &d.logical));
            }
            for tr in &d.transforms {
                match tr {
                    DomTransform::Split {
                        input,
                        outer,
                        inner,
                        factor,
                        inner_split,
                    } => {
                        let _ = writeln!(
                            out,
                            "  {}split {} by {} -> {}, {}",
                            if *inner_split { "" } else { "outer " },
                            dom_name(d, *input),
                            factor,
                            dom_name(d, *outer),
                            dom_name(d, *inner)
                        );
                    }
                    DomTransform::Merge {
                        outer,
                        inner,
                        out: m,
                    } => {
                        let _ = writeln!(
                            out,
                            "  merge {} and {} -> {}",
                            dom_name(d, *outer),
                            dom_name(d, *inner),
                            dom_name(d, *m)
                        );
                    }
                }
            }
            let _ = writeln!(out, "  loop:    {}", dom_list(d, &d.loop_dims));
        }
        out
    }
}

impl fmt::Display for ScheduledFusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.scheduled_ir())
    }
}
