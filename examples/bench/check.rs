//! Correctness before speed: slices of a case's output against the CPU reference
//! evaluator run on the matching slices of its inputs.

use nvfuser::eval::{compare, evaluate, EvalInput};
use nvfuser::prelude::*;

use crate::cases::Case;
use crate::measure::BenchResult;

/// An argument as the benchmark holds it.
pub enum Held {
    Tensor(Tensor),
    Scalar(ScalarValue),
}

impl Held {
    pub fn arg(&self) -> Arg<'_> {
        match self {
            Held::Tensor(t) => Arg::Tensor(t),
            Held::Scalar(s) => Arg::Scalar(*s),
        }
    }
}

/// Checks three slices (start, middle, end) of `output` along the case's check plan (or
/// the whole output when the plan slices no input).
/// `Ok(summary)` when every slice matches; `Err(why)` on the first mismatch.
pub fn check_output(
    case: &Case,
    args: &[Held],
    output: &Tensor,
) -> BenchResult<Result<String, String>> {
    let plan = case.check;
    let sliced = |j: usize, t: &Tensor| match plan.sliced {
        Some(list) => list.contains(&j),
        None => t.rank() >= 2,
    };
    // No input sliced (statistics over the sliced dim): the whole output at once.
    let len = args
        .iter()
        .enumerate()
        .find_map(|(j, a)| match a {
            Held::Tensor(t) if sliced(j, t) => Some(t.sizes()[plan.input_axis]),
            _ => None,
        })
        .or_else(|| output.sizes().get(plan.output_axis).copied())
        .ok_or("a case without an input to slice or an output dim to check")?;
    let whole = plan.sliced.is_some_and(|list| list.is_empty());
    let width = if whole { len } else { plan.width.min(len) };
    let mut starts = if whole || plan.from_start_only {
        vec![0]
    } else {
        vec![0, len / 2, len - width]
    };
    starts.dedup();
    let mut worst = 0.0f64;
    for &start in &starts {
        let mut inputs = Vec::with_capacity(args.len());
        for (j, a) in args.iter().enumerate() {
            inputs.push(match a {
                Held::Tensor(t) if sliced(j, t) => EvalInput::Tensor(
                    t.slice(
                        plan.input_axis as i64,
                        start as i64,
                        (start + width) as i64,
                        1,
                    )?
                    .to_host_tensor()?,
                ),
                Held::Tensor(t) => EvalInput::Tensor(t.to_host_tensor()?),
                Held::Scalar(s) => EvalInput::Scalar(*s),
            });
        }
        let want = evaluate(&case.fusion, &inputs)?;
        let got = output
            .slice(
                plan.output_axis as i64,
                start as i64,
                (start + width) as i64,
                1,
            )?
            .to_host_tensor()?;
        if let Err(m) = compare(&got, &want[0], plan.tolerance) {
            return Ok(Err(format!(
                "indices {start}..{} along dim {}: {m}",
                start + width,
                plan.output_axis
            )));
        }
        let (g, w) = (got.to_f64_vec(), want[0].to_f64_vec());
        for (g, w) in g.iter().zip(&w) {
            worst = worst.max((g - w).abs() / (1.0 + w.abs()));
        }
    }
    Ok(Ok(format!(
        "ok ({} slices of {width} along dim {}, worst rel err {worst:.1e})",
        starts.len(),
        plan.output_axis
    )))
}
