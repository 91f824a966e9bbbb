//! Inspecting a segmented fusion: `cargo run --example inspect_segments`.
//!
//! Builds a fusion that no single kernel can hold (each row centred by its mean, then
//! each column scaled by its maximum: a row reduction and a column reduction of the same
//! data), segments it, and shows what the segmenter made of it: every segment with its
//! scheduler, its maps to the original values (inputs, outputs, extents), its math and
//! its `fusion!` reproducer. Then runs the segments one by one through the maps and
//! checks that this equals running the whole segmented fusion and the CPU reference.
//! Runs on GPU 0, or on the CPU reference device without one.

use std::collections::HashMap;

use nvfuser::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser::prelude::*;
use nvfuser::Error;
use nvfuser_core::segment::{SegmentValue, SegmentedFusion};
use nvfuser_cuda::SegmentedRuntime;

fn build() -> Result<Fusion, Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let mean = fd.mean(xf, &[1], true)?; // [N, 1]
    let centred = fd.sub(xf, mean)?;
    let a = fd.abs(centred)?;
    let colmax = fd.max(a, &[0], true)?; // [1, H]
    let y = fd.div(centred, colmax)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn main() -> Result<(), Error> {
    let fusion = build()?;
    println!("== the fusion\n{fusion}");

    let segmented = SegmentedFusion::new(&fusion).map_err(|e| Error::UnsupportedFusion {
        reason: e.to_string(),
    })?;
    println!("== its segmentation\n{segmented}");
    let stats = segmented.stats();
    println!(
        "({} scheduler checks for {} expressions)\n",
        stats.scheduler_checks, stats.nodes
    );
    for (k, s) in segmented.segments().iter().enumerate() {
        let ids: Vec<String> = s
            .inputs()
            .iter()
            .map(|x| match (x, x.id(segmented.extents())) {
                (SegmentValue::Val(v), _) => format!("{v}"),
                (SegmentValue::Extent(e), Some(id)) => format!("{e} (id {id})"),
                (SegmentValue::Extent(e), None) => format!("{e}"),
            })
            .collect();
        println!(
            "== segment {k} ({}): inputs {}; reproducer:\n{}",
            s.scheduler(),
            ids.join(", "),
            s.to_reproducer(&format!("segment{k}"))
        );
    }

    let device = Device::best();
    let rt = SegmentedRuntime::from_segmented(segmented)?;
    let host = HostTensor::random(DataType::BF16, &[256, 1000], 7);
    let x = device.tensor_from_host(&host)?;
    let whole = rt.run(&device, &[(&x).into()])?;

    // The segments one by one: an environment of original values, filled in order.
    let mut env: HashMap<ValId, Tensor> = HashMap::from([(rt.fusion().inputs()[0], x.clone())]);
    for k in 0..rt.segmented().segments().len() {
        let args = rt.segment_args(k, &|v| env.get(&v).map(Arg::Tensor))?;
        let outs = rt.run_segment(k, &device, &args)?;
        let seg = &rt.segmented().segments()[k];
        for (&v, t) in seg.outputs().iter().zip(outs) {
            println!("segment {k} computed {v}: {:?}", t.sizes());
            env.insert(v, t);
        }
    }
    let out = rt.fusion().outputs()[0].val;
    let one_by_one = env[&out].to_host_tensor()?;
    let whole = whole[0].to_host_tensor()?;
    assert_eq!(
        one_by_one, whole,
        "segments one by one differ from the whole run"
    );
    let reference = evaluate(rt.fusion(), &[EvalInput::Tensor(host)])?;
    if let Err(m) = compare(&whole, &reference[0], Tolerance::for_dtype(DataType::BF16)) {
        eprintln!("the segmented run differs from the CPU reference: {m}");
        std::process::exit(1);
    }
    println!(
        "on {device}: the segments one by one equal the whole segmented run, and both match the CPU reference"
    );
    Ok(())
}
