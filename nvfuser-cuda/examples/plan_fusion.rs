//! Prints how a GPU would run a fusion written in the `fusion!` language, without a
//! GPU: the execution plan (segments, schedulers, refusals, params), each kernel's
//! scheduled IR and its CUDA source.
//!
//! ```text
//! cargo run -p nvfuser-cuda --example plan_fusion -- FILE SHAPE... [--preset a100] [--ir]
//! ```
//!
//! `FILE` holds one `fn` in the `fusion!` language; each `SHAPE` is a contiguous tensor
//! argument, in order, as `dtype:d0xd1x..` (`bf16:8192x4096`, `f32:1`); scalar inputs
//! after the tensors are given 0. `--preset` picks the GPU (`h100` by default).
use nvfuser_core::scheduler::{DeviceInfo, GpuModel, InputInfo, RuntimeInfo};
use nvfuser_core::DataType;
use nvfuser_cuda::FusionExecutorCache;

fn dtype(s: &str) -> Result<DataType, String> {
    DataType::from_name(s).ok_or_else(|| format!("unknown dtype {s}"))
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut shapes: Vec<(DataType, Vec<i64>)> = Vec::new();
    let mut model = GpuModel::H100;
    let mut ir = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--preset" => {
                let m = args.next().ok_or("--preset needs a GPU name")?;
                model = m.parse().map_err(|e| format!("{e}"))?;
            }
            "--ir" => ir = true,
            _ if file.is_none() => file = Some(a),
            _ => {
                let (d, dims) = a
                    .split_once(':')
                    .ok_or(format!("expected dtype:d0xd1.., found {a}"))?;
                let dims = dims
                    .split('x')
                    .map(|x| x.parse::<i64>().map_err(|e| format!("{a}: {e}")))
                    .collect::<Result<Vec<_>, _>>()?;
                shapes.push((dtype(d)?, dims));
            }
        }
    }
    let file = file.ok_or("usage: plan_fusion FILE SHAPE... [--preset NAME] [--ir]")?;
    let src = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    let mut fusions = nvfuser_core::dsl::build_str(&src).map_err(|e| format!("{e:?}"))?;
    if fusions.is_empty() {
        return Err(format!("{file} defines no fusion"));
    }
    let fusion = fusions.remove(0).0;
    let specs: Vec<(DataType, &[i64])> = shapes.iter().map(|(d, s)| (*d, &s[..])).collect();
    let mut info = RuntimeInfo::contiguous(DeviceInfo::preset(model), &specs);
    for _ in shapes.len()..fusion.inputs().len() {
        info.inputs.push(InputInfo::Scalar(0i64.into()));
    }
    let exec = FusionExecutorCache::new(fusion);
    let plan = exec.plan_for(&info, None).map_err(|e| e.to_string())?;
    println!("{plan}");
    for (k, s) in plan.segments.iter().enumerate() {
        if let Some(kernel) = &s.kernel {
            if ir {
                println!("// segment {k}: scheduled IR\n{}", kernel.scheduled);
            }
            println!(
                "// segment {k}: {}\n{}",
                s.scheduler,
                kernel.kernel.cuda_source()
            );
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("plan_fusion: {e}");
        std::process::exit(2);
    }
}
