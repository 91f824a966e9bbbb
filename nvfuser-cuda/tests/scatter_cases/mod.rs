//! The scatter fusions that `scatter_plans` plans (and snapshots) without a GPU and
//! `gpu_scatter` runs on one against the CPU reference.

#![allow(dead_code)]

/// One fusion of the language and the sizes of its tensor inputs for the plans: the
/// scattered input, the index, then the source (when it is a tensor).
pub struct ScatterCase {
    pub name: &'static str,
    pub src: &'static str,
    /// Which input is the index and which axis it scatters along (its values are drawn
    /// in `0..size of the first input along axis`).
    pub index_input: usize,
    pub axis: usize,
    pub sizes: &'static [&'static [usize]],
}

pub const CASES: &[ScatterCase] = &[
    ScatterCase {
        name: "scatter f32 rank 2 dim 0",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [M, K]>, s: Tensor<f32, [P, Q]>) -> Tensor<f32, [N, H]> {
            x.scatter(0, i, s)
        }",
        index_input: 1,
        axis: 0,
        sizes: &[&[37, 65], &[50, 64], &[53, 70]],
    },
    ScatterCase {
        name: "scatter_add i32 rank 3 last dim",
        src: "fn f(x: Tensor<i32, [A, B, C]>, i: Tensor<i32, [D, E, F]>, s: Tensor<i32, [D, E, F]>) -> Tensor<i32, [A, B, C]> {
            x.scatter_add(2, i, s)
        }",
        index_input: 1,
        axis: 2,
        sizes: &[&[3, 5, 7], &[3, 4, 20], &[3, 4, 20]],
    },
    ScatterCase {
        name: "scatter value bf16 rank 1",
        src: "fn f(x: Tensor<bf16, [N]>, i: Tensor<i64, [M]>) -> Tensor<bf16, [N]> {
            x.scatter(0, i, 2.5)
        }",
        index_input: 1,
        axis: 0,
        sizes: &[&[1001], &[300]],
    },
    ScatterCase {
        name: "scatter_add f32 rank 2 last dim with pointwise producers and consumer",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [N, K]>, s: Tensor<f32, [N, K]>) -> Tensor<f32, [N, H]> {
            let y = (x * 2.0).scatter_add(1, i, s + 1.0);
            y.exp()
        }",
        index_input: 1,
        axis: 1,
        sizes: &[&[129, 33], &[129, 40], &[129, 40]],
    },
    ScatterCase {
        name: "scatter_add f16 rank 3 dim 1",
        src: "fn f(x: Tensor<f16, [A, B, C]>, i: Tensor<i64, [A, K, C]>, s: Tensor<f16, [A, K, C]>) -> Tensor<f16, [A, B, C]> {
            x.scatter_add(1, i, s)
        }",
        index_input: 1,
        axis: 1,
        sizes: &[&[4, 9, 33], &[4, 30, 33], &[4, 30, 33]],
    },
    ScatterCase {
        name: "scatter bool rank 2 dim 1, index smaller than the input",
        src: "fn f(x: Tensor<bool, [N, H]>, i: Tensor<i32, [M, K]>, s: Tensor<bool, [M, K]>) -> Tensor<bool, [N, H]> {
            x.scatter(1, i, s)
        }",
        index_input: 1,
        axis: 1,
        sizes: &[&[17, 8], &[9, 12], &[9, 12]],
    },
];
