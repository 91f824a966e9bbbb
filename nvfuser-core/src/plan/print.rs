//! An [`ExecutionPlan`] as text (`Display`, what `NVFUSER_DUMP=plan` prints) and as
//! serializable data ([`PlanRecord`]).
//!
//! The record keeps what a reader or a tool compares between two plans: the host
//! program, per segment its scheduler, params, refusals, value maps, launch dims,
//! requirements and CUDA source. It does not keep the scheduled fusions, which are
//! rebuilt from the params.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ExecutionPlan, SegmentPlan};
use crate::codegen::{LaunchDims, Requirement};
use crate::ir::OutputSource;
use crate::scheduler::{HeuristicParams, Rejections};
use crate::segment::SegmentValue;

/// An [`ExecutionPlan`] as plain data, for serde (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// The host scalar program, printed, and the values it computes.
    pub host: Option<String>,
    /// Per output of the fusion, where it comes from: `kernel k` or `input p`.
    pub forward: Option<Vec<String>>,
    /// Whether the segments come from a segmentation.
    pub segmented: bool,
    /// The segments in order.
    pub segments: Vec<SegmentRecord>,
}

/// One segment of a [`PlanRecord`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// The scheduler's name.
    pub scheduler: String,
    /// Its params.
    pub params: HeuristicParams,
    /// Why earlier schedulers refused.
    pub refused: Rejections,
    /// Why the tuned schedule was replaced by the default one.
    pub fallback: Option<String>,
    /// The segment's inputs (values of the kernel fusion, or extents of its inputs).
    pub inputs: Vec<String>,
    /// The kernel-fusion values its outputs are.
    pub outputs: Vec<String>,
    /// The values freed after it.
    pub release: Vec<String>,
    /// Its kernel; `None` when nothing is launched.
    pub kernel: Option<KernelRecord>,
}

/// A kernel of a [`PlanRecord`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    /// The entry point's name.
    pub name: String,
    /// 64-bit index math.
    pub wide: bool,
    /// Grid and block extents.
    pub launch: LaunchDims,
    /// What the launch checks on the arguments.
    pub requirements: Vec<Requirement>,
    /// The CUDA C++ source.
    pub cuda: String,
}

fn value(v: &SegmentValue) -> String {
    match v {
        SegmentValue::Val(v) => v.to_string(),
        SegmentValue::Extent(e) => e.to_string(),
    }
}

fn source(s: &OutputSource) -> String {
    match s {
        OutputSource::Kernel(k) => format!("kernel output {k}"),
        OutputSource::Input(p) => format!("input {p}"),
        OutputSource::View(chain) => {
            let exprs: Vec<String> = chain
                .exprs
                .iter()
                .map(|e| format!("expr {}", e.0))
                .collect();
            format!("view of input {} through {}", chain.input, exprs.join(", "))
        }
    }
}

impl ExecutionPlan {
    /// The plan as plain data.
    pub fn record(&self) -> PlanRecord {
        PlanRecord {
            host: self.host.as_ref().map(|h| {
                let computed: Vec<String> = h.computed().iter().map(|v| v.to_string()).collect();
                format!("{}computes {}", h.fusion(), computed.join(", "))
            }),
            forward: self
                .forward
                .as_ref()
                .map(|f| f.iter().map(source).collect()),
            segmented: self.segmented,
            segments: self.segments.iter().map(SegmentPlan::record).collect(),
        }
    }
}

impl SegmentPlan {
    fn record(&self) -> SegmentRecord {
        SegmentRecord {
            scheduler: self.scheduler.to_owned(),
            params: self.params.clone(),
            refused: self.refused.clone(),
            fallback: self.fallback.clone(),
            inputs: self.inputs.iter().map(value).collect(),
            outputs: self.outputs.iter().map(|v| v.to_string()).collect(),
            release: self.release.iter().map(|v| v.to_string()).collect(),
            kernel: self.kernel.as_ref().map(|k| KernelRecord {
                name: k.kernel.abi.name.clone(),
                wide: k.kernel.abi.index_type == crate::codegen::IndexType::I64,
                launch: k.kernel.launch.clone(),
                requirements: k.kernel.requirements.clone(),
                cuda: k.kernel.cuda_source(),
            }),
        }
    }
}

impl Serialize for ExecutionPlan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.record().serialize(s)
    }
}

impl fmt::Display for ExecutionPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.segments.len();
        let kernels = self.kernels().count();
        writeln!(
            f,
            "execution plan: {n} segment{}{}, {kernels} kernel{}",
            if n == 1 { "" } else { "s" },
            if self.segmented { " (segmented)" } else { "" },
            if kernels == 1 { "" } else { "s" },
        )?;
        if let Some(h) = &self.host {
            let computed: Vec<String> = h.computed().iter().map(|v| v.to_string()).collect();
            writeln!(f, "host scalars (computes {}):", computed.join(", "))?;
            for line in h.fusion().to_string().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        if let Some(fw) = &self.forward {
            let sources: Vec<String> = fw
                .iter()
                .enumerate()
                .map(|(i, s)| format!("{i} <- {}", source(s)))
                .collect();
            writeln!(f, "outputs: {}", sources.join(", "))?;
        }
        for (k, s) in self.segments.iter().enumerate() {
            write!(f, "segment {k}: {}", s.scheduler)?;
            match &s.kernel {
                Some(pk) => {
                    let l = &pk.kernel.launch;
                    writeln!(
                        f,
                        ", kernel {} ({:?} indices), grid [{}, {}, {}], block [{}, {}, {}]",
                        pk.kernel.abi.name,
                        pk.kernel.abi.index_type,
                        l.grid[0],
                        l.grid[1],
                        l.grid[2],
                        l.block[0],
                        l.block[1],
                        l.block[2],
                    )?;
                }
                None => writeln!(f, ", nothing launched")?,
            }
            for r in &s.refused.0 {
                writeln!(f, "  {}: refused: {}", r.kind, r.reason)?;
            }
            if let Some(why) = &s.fallback {
                writeln!(f, "  fallback: {why}")?;
            }
            writeln!(f, "  params: {:?}", s.params)?;
            if self.segmented {
                let inputs: Vec<String> = s.inputs.iter().map(value).collect();
                let outputs: Vec<String> = s.outputs.iter().map(|v| v.to_string()).collect();
                writeln!(f, "  inputs: {}", inputs.join(", "))?;
                writeln!(f, "  outputs: {}", outputs.join(", "))?;
                if !s.release.is_empty() {
                    let release: Vec<String> = s.release.iter().map(|v| v.to_string()).collect();
                    writeln!(f, "  frees after: {}", release.join(", "))?;
                }
            }
            if let Some(pk) = &s.kernel {
                for r in &pk.kernel.requirements {
                    match r {
                        Requirement::Divisible { extent, by, why } => {
                            writeln!(f, "  requires: {extent} divisible by {by} ({why})")?
                        }
                        Requirement::Aligned { tensor, bytes } => {
                            writeln!(f, "  requires: {tensor} aligned to {bytes} bytes")?
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
