//! Tries variations of the heuristic params of one workload on the GPU and prints the
//! bandwidth of each (CUDA-event kernel time, median of 15): how the heuristics were
//! tuned. `param_sweep softmax bf16 32768 8192`; `column_var_mean` (batch norm's
//! statistics over the rows), `column_dw_db` (LayerNorm backward's weight and bias
//! gradients), `gelu_bwd_bias` (bf16 only) and `column_sum` are workloads of their own
//! here, and so are `layer_norm_bwd` and `rms_norm_bwd` (bf16, their inner-outer
//! variants when the heuristic picks the inner-outer kernel), and `logsumexp`
//! (cross-entropy's per-row statistic, no full-size output).
use nvfuser_core::eval::HostTensor;
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::workloads::{self, WorkloadInput};
use nvfuser_core::DataType;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache};

fn variants(auto: &HeuristicParams, shape: &(i64, i64)) -> Vec<HeuristicParams> {
    let mut out = vec![auto.clone()];
    match auto {
        HeuristicParams::Pointwise(p) => {
            for unroll in [1, 2, 4, 8] {
                for threads in [128, 256, 512] {
                    let mut q = p.clone();
                    q.unroll = unroll;
                    q.threads = threads;
                    out.push(HeuristicParams::Pointwise(q));
                }
            }
        }
        HeuristicParams::InnerPersistent(p) if p.row_blocks > 0 => {
            // Inner-outer: threads per row and resident blocks per SM (the rows in a
            // serial loop over `sm * b` blocks; `__launch_bounds__(tx, b)`).
            let chunks = (p.hidden + p.vectorize - 1) / p.vectorize;
            let sm: i64 = 132;
            for tx in [128, 256, 512] {
                for b in [1, 2, 3, 4, 6, 8] {
                    if tx * b > 2048 || tx > chunks {
                        continue;
                    }
                    let mut q = p.clone();
                    q.threads_x = tx;
                    q.batch = (chunks + tx - 1) / tx;
                    q.row_blocks = (sm * b).min(shape.0);
                    q.compile.min_blocks_per_sm = Some(b);
                    q.launch.grid = [q.row_blocks, 1, 1];
                    q.launch.block = [tx, 1, 1];
                    out.push(HeuristicParams::InnerPersistent(q));
                }
            }
        }
        HeuristicParams::InnerPersistent(p) => {
            // Threads per row (and the batch that covers the row), with and without
            // a bound of resident blocks per SM (`__launch_bounds__(tx, b)`).
            for tx in [64, 128, 256, 512, 1024] {
                let chunks = (p.hidden + p.vectorize - 1) / p.vectorize;
                for b in [None, Some(2048 / tx)] {
                    let mut q = p.clone();
                    q.threads_x = tx;
                    q.batch = (chunks + tx - 1) / tx;
                    q.rows_per_block = (128 / tx).max(1);
                    q.launch.block = [tx, q.rows_per_block, 1];
                    q.launch.grid[0] = (shape.0 + q.rows_per_block - 1) / q.rows_per_block;
                    q.compile.min_blocks_per_sm = b;
                    out.push(HeuristicParams::InnerPersistent(q));
                }
            }
        }
        HeuristicParams::Reduction(p) => {
            for tx in [128, 256, 512] {
                for unroll in [1, 2, 4, 8] {
                    let mut q = p.clone();
                    q.threads_x = tx;
                    q.unroll = unroll;
                    out.push(HeuristicParams::Reduction(q));
                }
            }
        }
        HeuristicParams::OuterReduction(p) => {
            // Columns per block, rows per block (threadIdx.y) and the grid split the
            // heuristic would pick for them (at least 64 rows per thread), and half that.
            // With the heuristic's columns per thread (`vectorize`) and with one.
            let (rows, cols) = *shape;
            let sm: i64 = 132;
            let mut widths = vec![p.vectorize];
            if p.vectorize > 1 {
                widths.push(1);
            }
            for (tx, ty, vec) in [32, 64, 128, 256, 512]
                .into_iter()
                .flat_map(|tx| [1, 2, 4, 8, 16].map(|ty| (tx, ty)))
                .flat_map(|(tx, ty)| widths.iter().map(move |&v| (tx, ty, v)))
            {
                if tx * ty > 1024 || tx * ty < 128 {
                    continue;
                }
                let blocks = (cols + tx * vec - 1) / (tx * vec);
                let g = ((80 * sm + blocks * ty - 1) / (blocks * ty))
                    .min(rows / (64 * ty))
                    .max(1);
                for (g, unroll) in [(g, p.unroll), ((g / 2).max(1), p.unroll), (g, 4), (g, 16)] {
                    let mut q = p.clone();
                    q.threads_x = tx;
                    q.threads_y = ty;
                    q.grid_split = g;
                    q.unroll = unroll;
                    q.vectorize = vec;
                    q.launch.grid = [blocks, g, 1];
                    q.launch.block = [tx, ty, 1];
                    out.push(HeuristicParams::OuterReduction(q));
                }
            }
        }
        HeuristicParams::Transpose(p) => {
            for tile in [32, 64] {
                for ty in [2, 4, 8, 16] {
                    if tile * ty <= 1024 {
                        let mut q = p.clone();
                        q.tile = tile;
                        q.threads_y = ty;
                        out.push(HeuristicParams::Transpose(q));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map_or("gelu_tanh", |s| s.as_str());
    let dtype = match a.get(2).map_or("bf16", |s| s.as_str()) {
        "f32" => DataType::F32,
        "f16" => DataType::F16,
        _ => DataType::BF16,
    };
    let rows: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let hidden: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let device = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("param_sweep needs a GPU: {e}");
            return;
        }
    };
    let (fusion, inputs) = if name == "column_dw_db" {
        // LayerNorm backward's weight and bias gradients: two column sums of
        // `[rows, hidden]` reading dy and x (and the per-row mean and rstd).
        let src = format!(
            "fn k(dy: Tensor<{dtype}, [_, _]>, x: Tensor<{dtype}, [_, _]>, mean: Tensor<f32, [_, 1]>, rstd: Tensor<f32, [_, 1]>)
                -> (Tensor<{dtype}, [_]>, Tensor<{dtype}, [_]>) {{
                let dy = dy as f32;
                let xhat = ((x as f32) - mean) * rstd;
                ((dy * xhat).sum([0]) as {dtype}, dy.sum([0]) as {dtype})
            }}"
        );
        let fusion = nvfuser_core::dsl::build_str(&src).unwrap().remove(0).0;
        (
            fusion,
            vec![
                WorkloadInput::Tensor(dtype, vec![rows, hidden]),
                WorkloadInput::Tensor(dtype, vec![rows, hidden]),
                WorkloadInput::Tensor(DataType::F32, vec![rows, 1]),
                WorkloadInput::Tensor(DataType::F32, vec![rows, 1]),
            ],
        )
    } else if name == "layer_norm_bwd" || name == "rms_norm_bwd" {
        // The norm backwards from the forward's saved statistics (bf16 dy, x, w).
        let ln = name == "layer_norm_bwd";
        let src = if ln {
            workloads::LAYER_NORM_BWD
        } else {
            workloads::RMS_NORM_BWD
        };
        let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
        let mut inputs = vec![
            WorkloadInput::Tensor(DataType::BF16, vec![rows, hidden]),
            WorkloadInput::Tensor(DataType::BF16, vec![rows, hidden]),
            WorkloadInput::Tensor(DataType::BF16, vec![hidden]),
            WorkloadInput::Tensor(DataType::F32, vec![rows, 1]),
        ];
        if ln {
            inputs.push(WorkloadInput::Tensor(DataType::F32, vec![rows, 1]));
        }
        (fusion, inputs)
    } else if name == "gelu_bwd_bias" {
        // GELU backward with the bias gradient: an output stored beside its column sum.
        let fusion = nvfuser_core::dsl::build_str(workloads::GELU_BWD_BIAS)
            .unwrap()
            .remove(0)
            .0;
        (
            fusion,
            vec![
                WorkloadInput::Tensor(DataType::BF16, vec![rows, hidden]),
                WorkloadInput::Tensor(DataType::BF16, vec![rows, hidden]),
            ],
        )
    } else if name == "column_sum" {
        // A column sum of `[rows, hidden]` in f32 (a bias gradient).
        let src = format!(
            "fn k(x: Tensor<{dtype}, [_, _]>) -> Tensor<f32, [_]> {{ (x as f32).sum([0]) }}"
        );
        let fusion = nvfuser_core::dsl::build_str(&src).unwrap().remove(0).0;
        (
            fusion,
            vec![WorkloadInput::Tensor(dtype, vec![rows, hidden])],
        )
    } else if name == "logsumexp" {
        // Cross-entropy's row statistic: log-sum-exp of the f32 rows, one value per row
        // out (no full-size output: the row is read and reduced twice, never stored).
        let src = format!(
            "fn k(x: Tensor<{dtype}, [_, _]>) -> Tensor<f32, [_, 1]> {{
                let x = x as f32;
                let m = x.max([1], keepdim = true);
                (x - m).exp().sum([1], keepdim = true).log() + m
            }}"
        );
        let fusion = nvfuser_core::dsl::build_str(&src).unwrap().remove(0).0;
        (
            fusion,
            vec![WorkloadInput::Tensor(dtype, vec![rows, hidden])],
        )
    } else if name == "column_var_mean" {
        // Batch norm's statistics, channels-last: mean and biased variance of each
        // column of `[rows, hidden]`, in f32.
        let src = format!(
            "fn k(x: Tensor<{dtype}, [_, _]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>) {{
                let x = x as f32;
                let (var, mean) = x.var_mean([0], correction = 0);
                (var, mean)
            }}"
        );
        let fusion = nvfuser_core::dsl::build_str(&src).unwrap().remove(0).0;
        (
            fusion,
            vec![WorkloadInput::Tensor(dtype, vec![rows, hidden])],
        )
    } else {
        let build = workloads::ALL
            .iter()
            .find(|w| w.0 == name)
            .expect("workload")
            .1;
        (
            build(dtype).unwrap(),
            workloads::inputs(name, dtype, rows, hidden).unwrap(),
        )
    };
    let exec = FusionExecutorCache::new(fusion);
    let tensors: Vec<_> = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w {
            WorkloadInput::Tensor(d, s) => Some(
                device
                    .tensor_from_host(&HostTensor::random(*d, s, i as u64 + 1))
                    .unwrap(),
            ),
            WorkloadInput::Scalar(_) => None,
        })
        .collect();
    let mut args: Vec<Arg<'_>> = tensors.iter().map(Into::into).collect();
    for w in &inputs {
        if let WorkloadInput::Scalar(v) = w {
            args.push(Arg::Scalar(*v));
        }
    }
    let auto = exec.heuristics(&device, &args).unwrap();
    println!("{name} {dtype} [{rows}, {hidden}] on {device}");
    for (i, p) in variants(&auto, &(rows as i64, hidden as i64))
        .iter()
        .enumerate()
    {
        let mut times = Vec::new();
        let mut gbs = 0.0;
        let mut err = None;
        for _ in 0..15 {
            match exec.run_profiled_with(&device, &args, Some(p)) {
                Ok((_, prof)) => {
                    times.push(prof.time_ms);
                    gbs = (prof.bytes_read + prof.bytes_written) as f64;
                }
                Err(e) => {
                    err = Some(e.to_string());
                    break;
                }
            }
        }
        let label = if i == 0 { "auto " } else { "     " };
        let json = serde_json::to_string(p).unwrap();
        match err {
            Some(e) => println!("{label} error: {e} | {json}"),
            None => {
                times.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let t = times[times.len() / 2];
                println!(
                    "{label} {:8.1} us {:6.0} GB/s | {json}",
                    t * 1e3,
                    gbs / t / 1e6
                );
            }
        }
    }
}
