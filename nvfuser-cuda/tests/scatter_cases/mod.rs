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
    /// Calls of the sweep, each the sizes of the tensor inputs in order; the plans use
    /// the first.
    pub calls: &'static [&'static [&'static [usize]]],
}

pub const CASES: &[ScatterCase] = &[
    ScatterCase {
        name: "scatter f32 rank 2 dim 0",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [M, K]>, s: Tensor<f32, [P, Q]>) -> Tensor<f32, [N, H]> {
            x.scatter(0, i, s)
        }",
        index_input: 1,
        axis: 0,
        calls: &[&[&[37, 65], &[50, 64], &[53, 70]], &[&[1, 1], &[1, 1], &[1, 1]], &[&[5, 300], &[64, 257], &[64, 300]], &[&[128, 128], &[3, 128], &[3, 128]]],
    },
    ScatterCase {
        name: "scatter_add i32 rank 3 last dim",
        src: "fn f(x: Tensor<i32, [A, B, C]>, i: Tensor<i32, [D, E, F]>, s: Tensor<i32, [D, E, F]>) -> Tensor<i32, [A, B, C]> {
            x.scatter_add(2, i, s)
        }",
        index_input: 1,
        axis: 2,
        calls: &[&[&[3, 5, 7], &[3, 4, 20], &[3, 4, 20]], &[&[2, 3, 1], &[2, 3, 9], &[2, 3, 9]], &[&[7, 9, 130], &[7, 9, 33], &[7, 9, 40]]],
    },
    ScatterCase {
        name: "scatter value bf16 rank 1",
        src: "fn f(x: Tensor<bf16, [N]>, i: Tensor<i64, [M]>) -> Tensor<bf16, [N]> {
            x.scatter(0, i, 2.5)
        }",
        index_input: 1,
        axis: 0,
        calls: &[&[&[1001], &[300]], &[&[3], &[64]], &[&[4096], &[4096]]],
    },
    ScatterCase {
        name: "scatter_add f32 rank 2 last dim with pointwise producers and consumer",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [N, K]>, s: Tensor<f32, [N, K]>) -> Tensor<f32, [N, H]> {
            let y = (x * 2.0).scatter_add(1, i, s + 1.0);
            y.exp()
        }",
        index_input: 1,
        axis: 1,
        calls: &[&[&[129, 33], &[129, 40], &[129, 40]], &[&[1, 1], &[1, 5], &[1, 5]], &[&[300, 517], &[300, 64], &[300, 64]]],
    },
    ScatterCase {
        name: "scatter_add f16 rank 3 dim 1",
        src: "fn f(x: Tensor<f16, [A, B, C]>, i: Tensor<i64, [A, K, C]>, s: Tensor<f16, [A, K, C]>) -> Tensor<f16, [A, B, C]> {
            x.scatter_add(1, i, s)
        }",
        index_input: 1,
        axis: 1,
        calls: &[&[&[4, 9, 33], &[4, 30, 33], &[4, 30, 33]], &[&[1, 2, 1], &[1, 7, 1], &[1, 7, 1]], &[&[3, 65, 17], &[3, 5, 17], &[3, 5, 17]]],
    },
    ScatterCase {
        name: "scatter bool rank 2 dim 1, index smaller than the input",
        src: "fn f(x: Tensor<bool, [N, H]>, i: Tensor<i32, [M, K]>, s: Tensor<bool, [M, K]>) -> Tensor<bool, [N, H]> {
            x.scatter(1, i, s)
        }",
        index_input: 1,
        axis: 1,
        calls: &[&[&[17, 8], &[9, 12], &[9, 12]], &[&[33, 129], &[30, 100], &[31, 101]]],
    },
    ScatterCase {
        name: "scatter_add into a row sum, then a column sum of the result (segments)",
        src: "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [M]>, s: Tensor<f32, [M]>) -> Tensor<f32, []> {
            let r = x.sum([1]);
            let y = r.scatter_add(0, i, s);
            (y * y).sum([0])
        }",
        index_input: 1,
        axis: 0,
        calls: &[&[&[64, 1000], &[100], &[100]], &[&[3, 5], &[7], &[9]], &[&[1000, 33], &[1000], &[1000]]],
    },
];
