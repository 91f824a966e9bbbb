//! The fusions of the benchmark suite and the scheduler tests, built with the builder
//! API: what transformer blocks run between matmuls. Each takes its element type and
//! returns the fusion with symbolic sizes (any shape of the right rank runs).

use crate::builder::FusionDefinition;
use crate::dtype::DataType;
use crate::ir::Fusion;
use crate::Result;

/// `gelu_tanh(x)` over `[N, H]`: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, math in
/// f32, result in `dtype`.
pub fn gelu_tanh(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let x3 = fd.mul(xf, xf)?;
    let x3 = fd.mul(x3, xf)?;
    let c = fd.constant(0.044715f64);
    let inner = fd.mul(x3, c)?;
    let inner = fd.add(xf, inner)?;
    let k = fd.constant(0.797_884_560_802_865_4f64);
    let inner = fd.mul(inner, k)?;
    let t = fd.tanh(inner)?;
    let one = fd.constant(1.0f64);
    let t = fd.add(t, one)?;
    let half = fd.constant(0.5f64);
    let y = fd.mul(xf, half)?;
    let y = fd.mul(y, t)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    fd.finish()
}

/// `silu(gate) * up` over two `[N, H]` inputs (the SwiGLU MLP activation), math in f32.
pub fn silu_mul(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let gate = fd.define_tensor(dtype, &[-1, -1])?;
    let up = fd.define_tensor(dtype, &[-1, -1])?;
    let g = fd.cast(gate, DataType::F32)?;
    let u = fd.cast(up, DataType::F32)?;
    let s = fd.sigmoid(g)?;
    let y = fd.mul(g, s)?;
    let y = fd.mul(y, u)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    fd.finish()
}

/// Softmax over the last dim of `[N, H]`, math in f32.
pub fn softmax(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let xf = fd.cast(x, DataType::F32)?;
    let m = fd.max(xf, &[1], false)?;
    let mb = fd.broadcast(m, &[false, true])?;
    let d = fd.sub(xf, mb)?;
    let e = fd.exp(d)?;
    let s = fd.sum(e, &[1], false)?;
    let sb = fd.broadcast(s, &[false, true])?;
    let y = fd.div(e, sb)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    fd.finish()
}

/// LayerNorm forward over the last dim of `[N, H]` with weight and bias `[H]` and a
/// scalar `eps` input: `y` in `dtype`, math in f32 (var_mean).
pub fn layer_norm(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let b = fd.define_tensor(dtype, &[-1])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let (var, mean) = fd.var_mean(xf, &[1], 0, false)?;
    let mb = fd.broadcast(mean, &[false, true])?;
    let xc = fd.sub(xf, mb)?;
    let ve = fd.add(var, eps)?;
    let rstd = fd.rsqrt(ve)?;
    let rb = fd.broadcast(rstd, &[false, true])?;
    let xn = fd.mul(xc, rb)?;
    let wb = fd.broadcast(w, &[true, false])?;
    let wf = fd.cast(wb, DataType::F32)?;
    let bb = fd.broadcast(b, &[true, false])?;
    let bf = fd.cast(bb, DataType::F32)?;
    let y = fd.mul(xn, wf)?;
    let y = fd.add(y, bf)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    fd.finish()
}

/// RMSNorm forward over the last dim of `[N, H]` with weight `[H]` and a scalar `eps`
/// input, math in f32.
pub fn rms_norm(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let ms = fd.mean(sq, &[1], false)?;
    let ve = fd.add(ms, eps)?;
    let r = fd.rsqrt(ve)?;
    let rb = fd.broadcast(r, &[false, true])?;
    let xn = fd.mul(xf, rb)?;
    let wb = fd.broadcast(w, &[true, false])?;
    let wf = fd.cast(wb, DataType::F32)?;
    let y = fd.mul(xn, wf)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    fd.finish()
}

/// `sum(x, [1])` over `[N, H]`.
pub fn inner_sum(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let s = fd.sum(x, &[1], false)?;
    fd.add_output(s)?;
    fd.finish()
}

/// `sum(x, [0])` over `[N, H]`.
pub fn outer_sum(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let s = fd.sum(x, &[0], false)?;
    fd.add_output(s)?;
    fd.finish()
}

/// `permute(x, [1, 0])` of `[N, H]`, written contiguous.
pub fn transpose(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let y = fd.permute(x, &[1, 0])?;
    // Materialized: a permute of an input alone would be a view of it.
    let y = fd.set(y)?;
    fd.add_output(y)?;
    fd.finish()
}

/// `x + bias` with `x: [N, H]` and `bias: [H]` (a 2-D pointwise case).
pub fn bias_add(dtype: DataType) -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let b = fd.define_tensor(dtype, &[-1])?;
    let bb = fd.broadcast(b, &[true, false])?;
    let y = fd.add(x, bb)?;
    fd.add_output(y)?;
    fd.finish()
}

/// Every workload with its name, for sweeps.
#[allow(clippy::type_complexity)]
pub const ALL: &[(&str, fn(DataType) -> Result<Fusion>)] = &[
    ("gelu_tanh", gelu_tanh),
    ("silu_mul", silu_mul),
    ("softmax", softmax),
    ("layer_norm", layer_norm),
    ("rms_norm", rms_norm),
    ("inner_sum", inner_sum),
    ("outer_sum", outer_sum),
    ("transpose", transpose),
    ("bias_add", bias_add),
];

/// One input of a workload call: a tensor shape or a scalar value.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadInput {
    /// A tensor of this dtype and shape.
    Tensor(DataType, Vec<usize>),
    /// A scalar.
    Scalar(crate::ScalarValue),
}

/// The inputs of workload `name` (one of [`ALL`]) for a `[rows, hidden]` problem, in
/// the fusion's input order; `None` for an unknown name.
pub fn inputs(
    name: &str,
    dtype: DataType,
    rows: usize,
    hidden: usize,
) -> Option<Vec<WorkloadInput>> {
    let x = WorkloadInput::Tensor(dtype, vec![rows, hidden]);
    let vec_h = WorkloadInput::Tensor(dtype, vec![hidden]);
    let eps = WorkloadInput::Scalar(crate::ScalarValue::from(1e-5f32));
    Some(match name {
        "gelu_tanh" | "softmax" | "inner_sum" | "outer_sum" | "transpose" => vec![x],
        "silu_mul" => vec![x.clone(), x],
        "layer_norm" => vec![x, vec_h.clone(), vec_h, eps],
        "rms_norm" => vec![x, vec_h, eps],
        "bias_add" => vec![x, vec_h],
        _ => return None,
    })
}

/// LayerNorm backward in the `fusion!` language, with the gradients' dtype and the cast
/// that gives it (see [`LAYER_NORM_BWD`]).
macro_rules! layer_norm_bwd_source {
    ($grads:literal, $cast:literal) => {
        concat!(
            "fn layer_norm_bwd(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>,\n",
            "    mean: Tensor<f32, [N, 1]>, rstd: Tensor<f32, [N, 1]>)\n",
            "    -> (Tensor<bf16, [N, H]>, Tensor<", $grads, ", [H]>, Tensor<", $grads, ", [H]>) {\n",
            "    let dy = dy as f32;\n",
            "    let xhat = ((x as f32) - mean) * rstd;\n",
            "    let g = dy * (w as f32);\n",
            "    let a = g.mean([1], keepdim = true);\n",
            "    let b = (g * xhat).mean([1], keepdim = true);\n",
            "    let dx = (g - a - xhat * b) * rstd;\n",
            "    (dx as bf16, (dy * xhat).sum([0])", $cast, ", dy.sum([0])", $cast, ")\n",
            "}\n"
        )
    };
}

/// LayerNorm backward as a user writes it (source of the `fusion!` language, for
/// `dsl::build_str`), from the forward's saved per-row `mean` and `rstd`: `dx` in bf16,
/// the weight and bias gradients `dw`, `db` (sums over the rows) in f32. Shared by the
/// segmentation, coverage, snapshot and GPU tests.
pub const LAYER_NORM_BWD: &str = layer_norm_bwd_source!("f32", "");

/// [`LAYER_NORM_BWD`] with `dw` and `db` in bf16, as PyTorch's autograd gives them for
/// bf16 parameters.
pub const LAYER_NORM_BWD_BF16_GRADS: &str = layer_norm_bwd_source!("bf16", " as bf16");

/// RMSNorm backward from the forward's saved per-row `rstd`: `dx` and the weight
/// gradient `dw` (a sum over the rows), bf16 out, f32 math (source of the `fusion!`
/// language). Shared by the inner-outer tests.
pub const RMS_NORM_BWD: &str = "\
fn rms_norm_bwd(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>,
    rstd: Tensor<f32, [N, 1]>) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [H]>) {
    let x = x as f32;
    let dy = dy as f32;
    let g = dy * (w as f32);
    let c = (g * x).mean([1], keepdim = true);
    let dx = (g - x * rstd * rstd * c) * rstd;
    (dx as bf16, (dy * x * rstd).sum([0]) as bf16)
}
";

/// GELU (erf) backward with the bias gradient, as a user writes it in the `fusion!`
/// language: `dx = dy * gelu'(x)` for the saved pre-activation `x`, in bf16, and its sum
/// over the rows in f32. Shared by the coverage and GPU tests.
pub const GELU_BWD_BIAS: &str = "\
fn gelu_bwd_bias(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>) -> (Tensor<bf16, [N, H]>, Tensor<f32, [H]>) {
    let x = x as f32;
    let cdf = 0.5f32 * (1.0f32 + (x * 0.70710678f32).erf());
    let pdf = (x * x * -0.5f32).exp() * 0.39894228f32;
    let dx = (dy as f32) * (cdf + x * pdf);
    (dx as bf16, dx.sum([0]))
}
";
