//! `Display for SegmentedFusion`: every segment, its scheduler, its maps and its math.
//!
//! ```text
//! 2 segments (the whole fusion was rejected: default: not supported ...)
//! segment 0: reduction; original exprs [1]
//!   inputs:  T0 <- T0
//!   outputs: T1 -> T2
//!   <the segment fusion, as `Display for Fusion` prints it>
//! segment 1: pointwise; original exprs [2, 3]
//!   inputs:  T0 <- T2, S1 <- T0.size(1) (extent id -1)
//!   ...
//! ```
//!
//! Left of an arrow are the segment's own values, right of it the original fusion's.

use std::fmt;

use super::{SegmentValue, SegmentedFusion, WholeFusion};
use crate::print::val_name;

impl fmt::Display for SegmentedFusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.segments.len();
        let plural = if n == 1 { "" } else { "s" };
        match &self.whole {
            WholeFusion::Accepted => writeln!(f, "{n} segment{plural} (the whole fusion)")?,
            WholeFusion::Rejected(r) => writeln!(
                f,
                "{n} segment{plural} (the whole fusion was rejected: {r})"
            )?,
            WholeFusion::ForcedBoundary => {
                writeln!(f, "{n} segment{plural} (segment_set forces a boundary)")?
            }
            WholeFusion::Empty => writeln!(f, "no segments (nothing to compute)")?,
        }
        for h in &self.half_boundaries {
            writeln!(
                f,
                "half-precision boundary: {} crosses as {} ({})",
                val_name(&self.original, h.value, true),
                val_name(&self.original, h.stored, true),
                self.original.val(h.stored).dtype
            )?;
        }
        for (k, seg) in self.segments.iter().enumerate() {
            let exprs: Vec<String> = seg.exprs.iter().map(|e| e.0.to_string()).collect();
            writeln!(
                f,
                "segment {k}: {}; original exprs [{}]",
                seg.scheduler,
                exprs.join(", ")
            )?;
            let ins: Vec<String> = seg
                .inputs
                .iter()
                .zip(seg.fusion.inputs())
                .map(|(x, &local)| {
                    let lhs = val_name(&seg.fusion, local, true);
                    match x {
                        SegmentValue::Val(v) => {
                            format!("{lhs} <- {}", val_name(&self.original, *v, true))
                        }
                        SegmentValue::Extent(e) => match self.original.extent_id(*e) {
                            Some(id) => format!("{lhs} <- {e} (extent id {id})"),
                            None => format!("{lhs} <- {e}"),
                        },
                    }
                })
                .collect();
            writeln!(f, "  inputs:  {}", ins.join(", "))?;
            let outs: Vec<String> = seg
                .outputs
                .iter()
                .zip(seg.fusion.outputs())
                .map(|(&v, local)| {
                    format!(
                        "{} -> {}",
                        val_name(&seg.fusion, local.val, true),
                        val_name(&self.original, v, true)
                    )
                })
                .collect();
            writeln!(f, "  outputs: {}", outs.join(", "))?;
            for line in seg.fusion.to_string().lines() {
                writeln!(f, "  {line}")?;
            }
            if !self.release_after(k).is_empty() {
                let freed: Vec<String> = self
                    .release_after(k)
                    .iter()
                    .map(|&v| val_name(&self.original, v, true))
                    .collect();
                writeln!(f, "  then free: {}", freed.join(", "))?;
            }
        }
        Ok(())
    }
}
