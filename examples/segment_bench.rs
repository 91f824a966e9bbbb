//! Segmentation time against fusion size: `cargo run --release --example segment_bench`.
//!
//! Builds fusions of about 100, 300, 1,000 and 3,000 expressions that no single kernel
//! can hold and times `SegmentedFusion::new` (the scheduler registry decides every
//! merge) and, to separate the segmenter's own cost from the schedulers', the same
//! segmentation with a cheap rule (at most one reduction axis set per segment). Two
//! families:
//!
//! - *alternating*: blocks of pointwise math, a sum over dim 1 broadcast back, a sum
//!   over dim 0 broadcast back (a chain; every block needs several segments);
//! - *fan-out*: one tensor read by every block (mul, a sum over dim 0 or 1, a sum to a
//!   vector, accumulated): a hub whose group absorbs its consumers one merge at a time,
//!   the segmenter's known worst case.
//!
//! Prints a markdown table. No GPU needed.

use std::time::Instant;

use nvfuser_core::ir::Fusion;
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{Refusal, Rejection, Rejections, SchedulerKind};
use nvfuser_core::segment::{SegmentOptions, SegmentedFusion};

/// About `ops` expressions: blocks of 9 (mul, relu, add, sum+broadcast, sub,
/// sum+broadcast, mul).
fn alternating_reductions(ops: usize) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let w = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let mut t = x;
    let mut k = 0usize;
    while fd.fusion().num_exprs() + 9 <= ops.max(9) {
        let c = fd.constant(1.0 + k as f64 * 1e-3);
        t = fd.mul(t, c)?;
        t = fd.relu(t)?;
        t = fd.add(t, w)?;
        let rows = fd.sum(t, &[1], true)?;
        t = fd.sub(t, rows)?;
        let cols = fd.sum(t, &[0], true)?;
        t = fd.mul(t, cols)?;
        k += 1;
    }
    fd.add_output(t)?;
    fd.finish()
}

/// About `ops` expressions: `t = relu(x)` read by every block of 4 or 5 (mul, sum over
/// dim `k % 2`, sum, broadcast, add into the accumulator).
fn fan_out(ops: usize) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let t = fd.relu(x)?;
    let mut acc = fd.sum(t, &[0], false)?;
    let mut k = 0usize;
    while fd.fusion().num_exprs() + 5 <= ops.max(5) {
        let c = fd.constant(1.0 + k as f64);
        let y = fd.mul(t, c)?;
        let r = fd.sum(y, &[(k % 2) as i64], false)?;
        let r = fd.sum(r, &[0], false)?;
        acc = fd.add(acc, r)?;
        k += 1;
    }
    fd.add_output(acc)?;
    fd.finish()
}

/// A cheap rule: any fusion with at most one reduction shape.
fn one_reduction_shape(f: &Fusion) -> std::result::Result<SchedulerKind, Rejections> {
    let mut shape = None;
    for (_, e) in f.exprs() {
        if let Some(axes) = e.op.reduction_axes() {
            match &shape {
                None => shape = Some(axes.to_vec()),
                Some(s) if s.as_slice() != axes => {
                    return Err(Rejections(vec![Rejection {
                        kind: SchedulerKind::Default,
                        reason: Refusal::Other {
                            reason: "two reduction shapes".into(),
                        },
                    }]))
                }
                Some(_) => {}
            }
        }
    }
    Ok(SchedulerKind::Pointwise)
}

/// Builds a fusion of about this many expressions.
type Family = fn(usize) -> Result<Fusion>;

fn time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let r = f();
    (r, start.elapsed().as_secs_f64() * 1e3)
}

fn main() -> Result<()> {
    println!("| family | ops | segments | scheduler checks | registry (ms) | per op (us) | cheap rule (ms) | per op (us) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let families: [(&str, Family); 2] = [
        ("alternating", alternating_reductions),
        ("fan-out", fan_out),
    ];
    for (family, make) in families {
        for target in [100usize, 300, 1000, 3000] {
            let fusion = make(target)?;
            let n = fusion.num_exprs();
            let (seg, registry_ms) = time(|| SegmentedFusion::new(&fusion));
            let seg = seg.map_err(|e| Error::InvalidIr(e.to_string()))?;
            let (cheap, cheap_ms) = time(|| {
                SegmentedFusion::with_scheduler(
                    &fusion,
                    &one_reduction_shape,
                    SegmentOptions::default(),
                )
            });
            let cheap = cheap.map_err(|e| Error::InvalidIr(e.to_string()))?;
            println!(
                "| {family} | {n} | {} | {} | {registry_ms:.1} | {:.1} | {cheap_ms:.1} ({} segments) | {:.1} |",
                seg.segments().len(),
                seg.stats().scheduler_checks,
                registry_ms * 1e3 / n as f64,
                cheap.segments().len(),
                cheap_ms * 1e3 / n as f64,
            );
        }
    }
    Ok(())
}
