//! Running segments one by one on the CPU reference evaluator, through the maps.

use rustc_hash::FxHashMap;

use super::graph::Graph;
use super::{Segment, SegmentValue, SegmentedFusion};
use crate::dtype::ScalarValue;
use crate::error::{Error, Result};
use crate::eval::{evaluate, EvalInput, HostTensor};
use crate::ir::ValId;

/// Per segment: the original values it reads last (not fusion inputs or outputs).
pub(crate) fn release_plan(g: &Graph<'_>, segments: &[Segment]) -> Vec<Vec<ValId>> {
    let mut last: FxHashMap<ValId, usize> = FxHashMap::default();
    for (k, s) in segments.iter().enumerate() {
        for x in &s.inputs {
            if let SegmentValue::Val(v) = x {
                last.insert(*v, k);
            }
        }
    }
    let mut plan = vec![Vec::new(); segments.len()];
    for (v, k) in last {
        if !g.is_input[v.index()] && !g.is_output[v.index()] {
            plan[k].push(v);
        }
    }
    for p in &mut plan {
        p.sort_unstable();
    }
    plan
}

impl Segment {
    /// This segment's arguments, gathered through its input map from `value` (an
    /// original value: a fusion input or an earlier segment's output) and, for extents,
    /// from the shapes of the original input tensors that `value` returns.
    pub fn gather_inputs(
        &self,
        value: &dyn Fn(ValId) -> Option<EvalInput>,
    ) -> Result<Vec<EvalInput>> {
        self.inputs
            .iter()
            .map(|x| match x {
                SegmentValue::Val(v) => value(*v).ok_or_else(|| missing(*v)),
                SegmentValue::Extent(e) => match value(e.tensor) {
                    Some(EvalInput::Tensor(t)) => t
                        .shape()
                        .get(e.axis as usize)
                        .map(|&n| EvalInput::Scalar(ScalarValue::Int(n as i64)))
                        .ok_or_else(|| missing(e.tensor)),
                    _ => Err(missing(e.tensor)),
                },
            })
            .collect()
    }
}

fn missing(v: ValId) -> Error {
    Error::invalid(
        "segmented evaluation",
        format!("the value {v} is not available (not an input and no earlier segment computed it)"),
    )
}

impl SegmentedFusion {
    /// Runs the segments one by one on the CPU reference evaluator: each segment gets
    /// its inputs gathered through its map, its outputs are stored under their original
    /// ids, and intermediates are dropped after their last reader. Returns the original
    /// fusion's outputs. Each boundary rounds a value to its dtype, as a kernel that
    /// writes it to memory does, so results agree with [`evaluate`] on the whole fusion
    /// within the dtype's tolerance.
    pub fn evaluate(&self, inputs: &[EvalInput]) -> Result<Vec<HostTensor>> {
        let f = &self.original;
        if inputs.len() != f.inputs().len() {
            return Err(Error::arity(
                "segmented evaluation",
                "inputs",
                f.inputs().len(),
                inputs.len(),
            ));
        }
        let mut env: FxHashMap<ValId, EvalInput> = f
            .inputs()
            .iter()
            .copied()
            .zip(inputs.iter().cloned())
            .collect();
        for (k, seg) in self.segments.iter().enumerate() {
            let args = seg.gather_inputs(&|v| env.get(&v).cloned())?;
            let outs = evaluate(&seg.fusion, &args)?;
            for (&v, t) in seg.outputs.iter().zip(outs) {
                env.insert(v, EvalInput::Tensor(t));
            }
            for v in self.release_after(k) {
                env.remove(v);
            }
        }
        f.outputs()
            .iter()
            .map(|o| match env.get(&o.val) {
                Some(EvalInput::Tensor(t)) => Ok(t.clone()),
                _ => Err(missing(o.val)),
            })
            .collect()
    }
}
