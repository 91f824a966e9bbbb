//! In-place outputs that a kernel may write straight into their input
//! ([`FusionPlanner::direct_in_place`](super::FusionPlanner::direct_in_place)).
//!
//! The in-place outputs that a call planned as one pointwise kernel may write
//! straight into their input's buffer, as (kernel fusion output, input position):
//! the kernel fusion has only elementwise math, broadcasts and creation ops, and the
//! input has the output's dims with none broadcast, and the value is computed from
//! it. Each thread of such a kernel reads the input's elements at the indices it
//! writes and no other thread reads them. The runtime adds the call's conditions:
//! one `pointwise` kernel that reads the input once per element into registers
//! ([`reads_input_once`]: so the read precedes the store), an input that is
//! contiguous, 16-byte aligned and shares its buffer with no other argument. An
//! input that another output returns (itself or a view) is never written by the
//! kernel: that output must show the values from before the call. Other in-place
//! outputs are stored after the call.

use crate::ir::{Fusion, OutputSource, ValId};

/// Whether `value` is computed from `input` (so each element's read of the input comes
/// before the store of the value's element).
fn depends_on(fusion: &Fusion, value: ValId, input: ValId) -> bool {
    let mut reach = vec![false; fusion.num_vals()];
    reach[input.index()] = true;
    for (_, e) in fusion.exprs() {
        if e.inputs.iter().any(|i| reach[i.index()]) {
            for o in &e.outputs {
                reach[o.index()] = true;
            }
        }
    }
    reach[value.index()]
}

/// Whether a scheduled kernel reads fusion input `input` once per element, into
/// registers: its only reader is one copy into a `Local` tensor (the pointwise
/// schedule's `cache_after`), which every use then reads. With a value computed from
/// the input, that read comes before the value's store (see
/// [`FusionPlanner::direct_in_place`](super::FusionPlanner::direct_in_place)).
pub fn reads_input_once(scheduled: &crate::sched::ScheduledFusion, input: ValId) -> bool {
    let schedule = scheduled.schedule();
    let mut readers = schedule
        .exprs
        .iter()
        .chain(&schedule.recomputed)
        .filter(|e| e.inputs.contains(&input));
    let (Some(only), None) = (readers.next(), readers.next()) else {
        return false;
    };
    matches!(only.op, crate::ir::Op::Set)
        && schedule
            .tensors
            .get(&only.output)
            .is_some_and(|t| t.memory == crate::sched::MemoryType::Local)
}

/// See [`FusionPlanner::direct_in_place`](super::FusionPlanner::direct_in_place); `kernel`: the kernel fusion with its in-place
/// outputs still marked. The value of such an output is no other output (a kernel
/// writes a value into the first output it is).
/// `forward`: where the fusion's outputs come from. An input returned as another
/// output (itself or a view) keeps its values from before the call: the runtime copies
/// it after the kernels, so the kernel must not have written it already.
pub(super) fn direct_in_place(
    kernel: &Fusion,
    forward: Option<&[OutputSource]>,
) -> Vec<(usize, usize)> {
    use crate::ir::{IterKind, Op};
    let live = kernel.live_exprs();
    let elementwise = kernel.exprs().all(|(id, e)| {
        !live[id.index()]
            || matches!(
                e.op,
                Op::Unary(_)
                    | Op::Binary(_)
                    | Op::Ternary(_)
                    | Op::Cast
                    | Op::Set
                    | Op::Broadcast { .. }
                    | Op::Full { .. }
                    | Op::Iota { .. }
                    | Op::Rand { .. }
            )
    });
    if !elementwise {
        return Vec::new();
    }
    let mut direct = Vec::new();
    for (k, o) in kernel.outputs().iter().enumerate() {
        let Some(input) = o.alias_of else { continue };
        let (Some(p), Some(t), Some(v)) = (
            kernel.input_position(input),
            kernel.tensor_type(input),
            kernel.tensor_type(o.val),
        ) else {
            continue;
        };
        // The kernel writes a value once, into the first output it is: the value must
        // be no other output.
        let once = kernel.outputs().iter().filter(|e| e.val == o.val).count() == 1;
        if once
            && depends_on(kernel, o.val, input)
            && kernel.input_position(o.val).is_none()
            && t.rank() == v.rank()
            && t.shape().all(|d| d.kind == IterKind::Iteration)
        {
            direct.push((k, p));
        }
    }
    let returned = |p: usize| {
        forward.unwrap_or(&[]).iter().any(|s| match s {
            OutputSource::Input(q) => *q == p,
            OutputSource::View(chain) => chain.input == p,
            OutputSource::Kernel(_) => false,
        })
    };
    direct.retain(|&(_, p)| !returned(p));
    direct
}
