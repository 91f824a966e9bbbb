//! In-place outputs (`add_output_alias`) in the executor: written by the kernel itself
//! where the plan and the call allow it ([`FusionExecutorCache::direct_into`]),
//! otherwise stored into their inputs after the call ([`FusionExecutorCache::finish`]).
//! GPU calls only (`cuda`): the CPU device stores in-place outputs after the reference
//! evaluator (`args::store_in_place`).

use std::sync::atomic::Ordering;

use super::FusionExecutorCache;
use crate::args::Arg;
use crate::runtime::Runtime;
use crate::{Error, Tensor};

impl FusionExecutorCache {
    /// The fusion's outputs from the kernel fusion's ([`Self::forwarded`]), with the
    /// in-place ones stored into their inputs (queued after the call's kernels) and
    /// returned as those inputs. `args`: the kernel fusion's arguments (the call's
    /// first).
    pub(super) fn finish(
        &self,
        outputs: Vec<Tensor>,
        args: &[Arg<'_>],
    ) -> Result<Vec<Tensor>, Error> {
        let outputs = self.forwarded(outputs, args)?;
        if self.in_place {
            crate::args::store_in_place(self.fusion(), args, outputs)
        } else {
            Ok(outputs)
        }
    }

    /// The in-place outputs this call writes straight into their inputs (see
    /// `FusionPlanner::direct_in_place`): the runtime is one `pointwise` kernel that
    /// reads the input once per element into registers, and the input is contiguous,
    /// 16-byte aligned and shares its buffer with no other argument. The others are
    /// stored after the call (`Self::finish`).
    pub(super) fn direct_into(
        &self,
        rt: &Runtime,
        args: &[Arg<'_>],
    ) -> smallvec::SmallVec<[(usize, Tensor); 1]> {
        let mut into = smallvec::SmallVec::new();
        let direct = self.planner.direct_in_place();
        if !self.direct_on || direct.is_empty() {
            return into;
        }
        // The plan's half of the decision, once per runtime.
        let planned = rt.direct_inputs.get_or_init(|| {
            let plan = &rt.plan;
            let scheduled = match &plan.segments[..] {
                [s] if !plan.segmented && s.scheduler == "pointwise" && s.fallback.is_none() => {
                    s.kernel.as_ref().map(|k| &k.scheduled)
                }
                _ => None,
            };
            let Some(scheduled) = scheduled else {
                return Vec::new();
            };
            direct
                .iter()
                .map(|&(_, p)| p)
                .filter(|&p| {
                    let input = self.kernel_fusion().inputs()[p];
                    nvfuser_core::plan::reads_input_once(scheduled, input)
                })
                .collect()
        });
        if planned.is_empty() {
            return into;
        }
        // The call's half: the argument's layout and buffer.
        for &(k, p) in direct {
            if !planned.contains(&p) {
                continue;
            }
            let Some(Arg::Tensor(t)) = args.get(p) else {
                continue;
            };
            let alone = args.iter().enumerate().all(|(q, a)| match a {
                Arg::Tensor(u) => q == p || !u.shares_buffer(t),
                Arg::Scalar(_) => true,
            });
            if alone && t.is_contiguous() && t.data_alignment() >= 16 {
                into.push((k, (*t).clone()));
            }
        }
        if !into.is_empty() {
            self.direct.fetch_add(1, Ordering::Relaxed);
        }
        into
    }
}
