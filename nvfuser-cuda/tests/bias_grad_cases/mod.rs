//! Pointwise math feeding both full outputs and column sums (an activation's backward
//! with its bias gradient), shared by `outer_shared_values` (planned for an H100 and
//! NVRTC-compiled without a GPU) and `gpu_outer` (run on the GPU against the CPU
//! reference): GELU (erf), SiLU and dropout backward; several full outputs and
//! several sums; bf16, f16 and f32; widths that take 16-byte vectors, narrower ones
//! and odd ones that take none; rank 3 reduced over two dims; a `[H]` bias broadcast
//! over the rows; a full f32 output beside bf16 inputs (too wide for one 16-byte
//! store); a Welford statistic beside a full output (one column per thread).

#![allow(dead_code)]

use nvfuser_core::DataType;

pub struct Case {
    pub name: &'static str,
    pub src: String,
    /// Tensor inputs: dtype and shape.
    pub shapes: Vec<(DataType, Vec<usize>)>,
    /// Whether the kernel computes the shared value once (its defining op, e.g.
    /// `nvf_erf`, appears once in the kernel).
    pub once: Option<&'static str>,
}

fn dt(name: &str) -> DataType {
    match name {
        "bf16" => DataType::BF16,
        "f16" => DataType::F16,
        _ => DataType::F32,
    }
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // Widths: 16-byte vectors of bf16 (8), of f32 (4 for f32 inputs), 4 columns of
    // bf16 (4100), and one column per thread (4097, 1001).
    let sizes: &[[usize; 2]] = &[
        [2048, 4096],
        [3000, 4100],
        [777, 4097],
        [4096, 1001],
        [65, 8],
    ];
    for t in ["bf16", "f16", "f32"] {
        for s in sizes {
            out.push(Case {
                name: "gelu_bwd_bias",
                src: format!(
                    "fn k(dy: Tensor<{t}, [_, _]>, x: Tensor<{t}, [_, _]>) -> (Tensor<{t}, [_, _]>, Tensor<f32, [_]>) {{
                        let x = x as f32;
                        let cdf = 0.5f32 * (1.0f32 + (x * 0.70710678f32).erf());
                        let pdf = (x * x * -0.5f32).exp() * 0.39894228f32;
                        let dx = (dy as f32) * (cdf + x * pdf);
                        (dx as {t}, dx.sum([0]))
                    }}"
                ),
                shapes: vec![(dt(t), s.to_vec()), (dt(t), s.to_vec())],
                once: Some("nvf_erf("),
            });
        }
        out.push(Case {
            name: "silu_bwd_bias",
            src: format!(
                "fn k(dy: Tensor<{t}, [_, _]>, x: Tensor<{t}, [_, _]>) -> (Tensor<{t}, [_, _]>, Tensor<{t}, [_]>) {{
                    let x = x as f32;
                    let s = 1.0f32 / (1.0f32 + (-x).exp());
                    let dx = (dy as f32) * s * (1.0f32 + x * (1.0f32 - s));
                    (dx as {t}, dx.sum([0]) as {t})
                }}"
            ),
            shapes: vec![(dt(t), vec![4096, 2048]), (dt(t), vec![4096, 2048])],
            once: Some("nvf_exp("),
        });
    }
    // Dropout backward with its bias gradient (a bool mask).
    out.push(Case {
        name: "dropout_bwd_bias",
        src: "fn k(dy: Tensor<bf16, [_, _]>, m: Tensor<bool, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<f32, [_]>) {
            let dx = (dy as f32) * (m as f32) * 1.25f32;
            (dx as bf16, dx.sum([0]))
        }"
        .into(),
        shapes: vec![(DataType::BF16, vec![1024, 3072]), (DataType::Bool, vec![1024, 3072])],
        once: None,
    });
    // Two full outputs and two sums (the second sum in a nest of its own).
    out.push(Case {
        name: "two_outputs_two_sums",
        src: "fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_]>, Tensor<f32, [_]>) {
            let x = x as f32;
            let s = 1.0f32 / (1.0f32 + (-x).exp());
            let dx = (dy as f32) * s * (1.0f32 + x * (1.0f32 - s));
            (dx as bf16, s * x, dx.sum([0]), (dx * x).sum([0]))
        }"
        .into(),
        shapes: vec![(DataType::BF16, vec![2048, 1536]), (DataType::BF16, vec![2048, 1536])],
        once: None,
    });
    // A bias broadcast over the rows, bf16 [N, H] with an f32 [H] bias.
    out.push(Case {
        name: "bias_gelu_bwd",
        src: "fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>, b: Tensor<f32, [_]>) -> (Tensor<bf16, [_, _]>, Tensor<f32, [_]>) {
            let h = (x as f32) + b;
            let dx = (dy as f32) * (1.0f32 / (1.0f32 + (-1.702f32 * h).exp())) ;
            (dx as bf16, dx.sum([0]))
        }"
        .into(),
        shapes: vec![
            (DataType::BF16, vec![3000, 2048]),
            (DataType::BF16, vec![3000, 2048]),
            (DataType::F32, vec![2048]),
        ],
        once: Some("nvf_exp("),
    });
    // A full f32 output beside bf16 inputs: 8 columns of f32 are 32 bytes, stored
    // element by element inside the vector loop.
    out.push(Case {
        name: "f32_full_output",
        src: "fn k(dy: Tensor<bf16, [_, _]>, x: Tensor<bf16, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_]>) {
            let dx = (dy as f32) * (x as f32).tanh();
            (dx, dx.sum([0]))
        }"
        .into(),
        shapes: vec![(DataType::BF16, vec![4096, 1024]), (DataType::BF16, vec![4096, 1024])],
        once: Some("nvf_tanh("),
    });
    // Rank 3, reduced over its two leading dims.
    out.push(Case {
        name: "rank3_bias_grad",
        src: "fn k(dy: Tensor<bf16, [_, _, _]>, x: Tensor<bf16, [_, _, _]>) -> (Tensor<bf16, [_, _, _]>, Tensor<f32, [_]>) {
            let dx = (dy as f32) * (x as f32).tanh();
            (dx as bf16, dx.sum([0, 1]))
        }"
        .into(),
        shapes: vec![(DataType::BF16, vec![8, 300, 768]), (DataType::BF16, vec![8, 300, 768])],
        once: Some("nvf_tanh("),
    });
    // A Welford statistic beside a full output: one column per thread.
    out.push(Case {
        name: "var_mean_beside_output",
        src: "fn k(x: Tensor<bf16, [_, _]>) -> (Tensor<bf16, [_, _]>, Tensor<f32, [_]>, Tensor<f32, [_]>) {
            let y = (x as f32).tanh();
            let (v, m) = y.var_mean([0], correction = 0);
            (y as bf16, v, m)
        }"
        .into(),
        shapes: vec![(DataType::BF16, vec![5000, 640])],
        once: Some("nvf_tanh("),
    });
    out
}
