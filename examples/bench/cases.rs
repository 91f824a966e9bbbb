//! The benchmark cases: each a fusion (defined with `fusion!` or the builder), its
//! input shapes, the logical bytes it moves, and how to check a slice of its output
//! against the CPU reference evaluator.
//!
//! Case names and shapes are shared with `scripts/bench/torch_baseline.py`; the report
//! (`scripts/bench/report.py`) joins the two by `name`.

use nvfuser::builder::Slice;
use nvfuser::eval::Tolerance;
use nvfuser::prelude::*;
use nvfuser::{fusion, Error};

fusion! {
    /// GELU with the tanh approximation, bf16 in and out, f32 math.
    pub fn gelu_tanh(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let y = (x as f32).gelu_tanh();
        y as bf16
    }

    /// SwiGLU's elementwise half: `silu(gate) * up`, bf16 in and out, f32 math.
    pub fn silu_mul(gate: Tensor<bf16, [N, H]>, up: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let y = (gate as f32).silu() * (up as f32);
        y as bf16
    }

    /// Softmax over the last dim, bf16 in and out, f32 math.
    pub fn softmax(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let m = x.max([1], keepdim = true);
        let e = (x - m).exp();
        let y = e / e.sum([1], keepdim = true);
        y as bf16
    }

    /// LayerNorm over the last dim with weight and bias, bf16 in and out, f32 math;
    /// mean and variance from one `var_mean` (Welford).
    pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
        -> Tensor<bf16, [N, H]>
    {
        let x = x as f32;
        let (var, mean) = x.var_mean([1], correction = 0, keepdim = true);
        let y = (x - mean) * rsqrt(var + eps) * (w as f32) + (b as f32);
        y as bf16
    }

    /// RMSNorm over the last dim with weight, bf16 in and out, f32 math.
    pub fn rms_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, eps: f32) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let ms = (x * x).mean([1], keepdim = true);
        let y = x * rsqrt(ms + eps) * (w as f32);
        y as bf16
    }

    /// Softmax backward over the last dim from the forward's output `y` and the output
    /// gradient `dy`: `dx = (dy - sum(dy * y)) * y`, bf16 in and out, f32 math (what
    /// PyTorch's softmax autograd computes).
    pub fn softmax_bwd(dy: Tensor<bf16, [N, H]>, y: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let y = y as f32;
        let dy = dy as f32;
        let dx = (dy - (dy * y).sum([1], keepdim = true)) * y;
        dx as bf16
    }

    /// LayerNorm backward from the forward's saved per-row mean and rstd: `dx`, and the
    /// weight and bias gradients (sums over the rows), in bf16 as PyTorch's autograd gives
    /// them for bf16 parameters; f32 math.
    pub fn layer_norm_bwd(
        dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>,
        mean: Tensor<f32, [N, 1]>, rstd: Tensor<f32, [N, 1]>,
    ) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [H]>, Tensor<bf16, [H]>) {
        let dy = dy as f32;
        let xhat = ((x as f32) - mean) * rstd;
        let g = dy * (w as f32);
        let a = g.mean([1], keepdim = true);
        let b = (g * xhat).mean([1], keepdim = true);
        let dx = (g - a - xhat * b) * rstd;
        (dx as bf16, (dy * xhat).sum([0]) as bf16, dy.sum([0]) as bf16)
    }

    /// RMSNorm backward from the forward's saved per-row rstd: `dx` and the weight
    /// gradient, bf16 out, f32 math.
    pub fn rms_norm_bwd(
        dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>,
        rstd: Tensor<f32, [N, 1]>,
    ) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [H]>) {
        let x = x as f32;
        let dy = dy as f32;
        let g = dy * (w as f32);
        let c = (g * x).mean([1], keepdim = true);
        let dx = (g - x * rstd * rstd * c) * rstd;
        (dx as bf16, (dy * x * rstd).sum([0]) as bf16)
    }

    /// GELU (erf) backward with the bias gradient: `dx = dy * gelu'(x)` for the saved
    /// pre-activation `x`, and its sum over the rows; bf16 out, f32 math.
    pub fn gelu_bwd_bias(dy: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>)
        -> (Tensor<bf16, [N, H]>, Tensor<bf16, [H]>)
    {
        let x = x as f32;
        let cdf = 0.5f32 * (1.0f32 + (x * 0.70710678f32).erf());
        let pdf = (x * x * -0.5f32).exp() * 0.39894228f32;
        let dx = (dy as f32) * (cdf + x * pdf);
        (dx as bf16, dx.sum([0]) as bf16)
    }

    /// Sum over the innermost dim.
    pub fn inner_sum(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N]> {
        x.sum([1])
    }

    /// Sum over the outermost dim.
    pub fn outer_sum(x: Tensor<f32, [N, H]>) -> Tensor<f32, [H]> {
        x.sum([0])
    }

    /// A materialized transpose (`set` copies; the permute of an input alone would be
    /// returned as a view of it).
    pub fn transpose(x: Tensor<f32, [N, H]>) -> Tensor<f32, [H, N]> {
        x.permute([1, 0]).set()
    }

    /// Rotary embedding of `[T, H, 128]` queries with `[T, 128]` cos/sin tables, its
    /// rotate-half written with slice, neg and cat; bf16 in and out, f32 math.
    pub fn rope(x: Tensor<bf16, [T, H, 128]>, cos: Tensor<bf16, [T, 128]>, sin: Tensor<bf16, [T, 128]>)
        -> Tensor<bf16, [T, H, 128]>
    {
        let r = cat([-x.slice([.., .., 64..128]), x.slice([.., .., 0..64])], 2);
        let y = (x as f32) * (cos as f32).unsqueeze(1) + (r as f32) * (sin as f32).unsqueeze(1);
        y as bf16
    }

    /// Cross-entropy per row as written from its definition: the log-sum-exp of the
    /// f32 logits minus the label's logit (take_along_axis), squeezed to `[N]`.
    pub fn cross_entropy(logits: Tensor<bf16, [N, V]>, labels: Tensor<i64, [N, 1]>) -> Tensor<f32, [N]> {
        let x = logits as f32;
        let m = x.max([1], keepdim = true);
        let lse = (x - m).exp().sum([1], keepdim = true).log() + m;
        (lse - x.take_along_axis(labels, 1)).squeeze([1])
    }

    /// Cross-entropy backward per row, as autograd computes it from the logits: the
    /// softmax of the f32 logits minus the one-hot of the label (an `iota` compared with
    /// the labels), times the loss gradient `g` of the row; bf16 out.
    pub fn cross_entropy_bwd(g: Tensor<f32, [N]>, logits: Tensor<bf16, [N, V]>, labels: Tensor<i64, [N, 1]>)
        -> Tensor<bf16, [N, V]>
    {
        let x = logits as f32;
        let e = (x - x.max([1], keepdim = true)).exp();
        let p = e / e.sum([1], keepdim = true);
        let col = iota(x.size(1), 0, 1, i64).unsqueeze(0);
        let onehot = (col == labels) as f32;
        let dx = (p - onehot) * g.unsqueeze(1);
        dx as bf16
    }

    /// Embedding lookup scaled by sqrt(d) = 64: rows of a `[V, D]` table by `[T]` ids.
    pub fn embedding(table: Tensor<bf16, [V, D]>, ids: Tensor<i64, [T]>) -> Tensor<bf16, [T, D]> {
        let y = table.index_select(0, ids) as f32 * 64.0f32;
        y as bf16
    }

    /// Batch norm forward in training mode, channels-last: statistics over the rows of
    /// `[N*H*W, C]` (biased variance), then the normalization with weight and bias.
    pub fn batch_norm_nhwc(x: Tensor<bf16, [M, C]>, w: Tensor<f32, [C]>, b: Tensor<f32, [C]>) -> Tensor<bf16, [M, C]> {
        let x = x as f32;
        let (var, mean) = x.var_mean([0], correction = 0, keepdim = true);
        let y = (x - mean) * rsqrt(var + 1e-5f32) * w + b;
        y as bf16
    }

    /// A transformer block's epilogue: dropout of `x` (a Philox `uniform` mask in the
    /// shape of `x`, kept values scaled by `scale` = 1 / (1 - p)), the residual added,
    /// then LayerNorm with weight and bias; the new residual stream `h` and the
    /// normalized `y` out, bf16, f32 math.
    pub fn dropout_residual_layer_norm(
        x: Tensor<bf16, [N, H]>, residual: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>,
        p: f32, scale: f32, seed: i64, offset: i64, eps: f32,
    ) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {
        let u = uniform([x.size(0), x.size(1)], 0.0, 1.0, seed, offset, f32);
        let h = where_(u >= p, (x as f32) * scale, 0.0f32) + (residual as f32);
        let (var, mean) = h.var_mean([1], correction = 0, keepdim = true);
        let y = (h - mean) * rsqrt(var + eps) * (w as f32) + (b as f32);
        (h as bf16, y as bf16)
    }

    /// Causal attention probabilities: scores scaled by 1/sqrt(128), the keys after each
    /// query masked to -inf (the mask from two `iota`s), softmax over the keys; bf16 in
    /// and out, f32 math.
    pub fn causal_softmax(s: Tensor<bf16, [B, S, T]>) -> Tensor<bf16, [B, S, T]> {
        let row = iota(s.size(1), 0, 1, i64).unsqueeze(1);
        let col = iota(s.size(2), 0, 1, i64).unsqueeze(0);
        let x = where_(col <= row, (s as f32) * 0.088388346f32, f32::NEG_INFINITY);
        let e = (x - x.max([2], keepdim = true)).exp();
        (e / e.sum([2], keepdim = true)) as bf16
    }

    /// Attention's head split: projected queries `[B, S, H, D]` scaled by 1/sqrt(D)
    /// and permuted to `[B, H, S, D]`, bf16 in and out, f32 math.
    pub fn head_split(x: Tensor<bf16, [B, S, H, D]>) -> Tensor<bf16, [B, H, S, D]> {
        ((x as f32) * 0.088388346f32).permute([0, 2, 1, 3]) as bf16
    }

    /// A KV-cache append: the new step's keys after the cache, along the sequence.
    pub fn kv_append(cache: Tensor<bf16, [B, S, D]>, new: Tensor<bf16, [B, 1, D]>) -> Tensor<bf16, [B, _, D]> {
        cat([cache, new], 1)
    }
}

/// SiLU-mul on one `[N, 2H]` input, `silu(x[:, :H]) * x[:, H:]`, built at run time with
/// the builder; `H` is known when the fusion is defined (as when a framework traces a
/// model), so the slice bounds are constants.
fn silu_mul_sliced_fusion(h: usize) -> Result<Fusion, Error> {
    let h = h as i64;
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 2 * h])?;
    let gate = fd.slice(x, &[Slice::all(), Slice::range(0, h)])?;
    let up = fd.slice(x, &[Slice::all(), Slice::range(h, 2 * h)])?;
    let gate = fd.cast(gate, DataType::F32)?;
    let up = fd.cast(up, DataType::F32)?;
    let gate = fd.silu(gate)?;
    let y = fd.mul(gate, up)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// One input of a case.
#[derive(Clone, Debug)]
pub enum Input {
    /// A tensor filled with deterministic values in [-2, 2).
    Tensor { dtype: DataType, shape: Vec<usize> },
    /// An i64 tensor of indices in `0..bound` (labels, token ids).
    Index { shape: Vec<usize>, bound: usize },
    /// A scalar argument (eps).
    Scalar(ScalarValue),
}

impl Input {
    /// The shape of a tensor input (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        match self {
            Input::Tensor { shape, .. } | Input::Index { shape, .. } => shape,
            Input::Scalar(_) => &[],
        }
    }
}

/// How a slice of the output is checked: the inputs of rank 2 or more (or those listed
/// in `sliced`) are sliced along `input_axis`, the output along `output_axis`, with the
/// same index range (the others, weights and tables, are passed whole). Valid because
/// the fusions treat the sliced index independently (rows of a norm, columns of an
/// outer sum, tokens of a lookup, ...).
#[derive(Clone, Copy, Debug)]
pub struct CheckPlan {
    pub input_axis: usize,
    pub output_axis: usize,
    /// The inputs sliced, by position, when not every input of rank 2 or more.
    pub sliced: Option<&'static [usize]>,
    /// Indices per checked range.
    pub width: usize,
    /// Only the slice at index 0: the fusion draws random numbers keyed on the element's
    /// linear index, which a slice elsewhere renumbers (dropout masks).
    pub from_start_only: bool,
    pub tolerance: Tolerance,
}

/// A benchmark case.
#[derive(Clone, Debug)]
pub struct Case {
    /// The key shared with the PyTorch baseline, e.g. `layernorm` or
    /// `sweep/rmsnorm/h4096`.
    pub name: String,
    /// `main` (the cases) or `sweep` (hidden-size sweep of the norms).
    pub group: &'static str,
    /// The kernel family for the sweep plot: `softmax`, `layernorm`, `rmsnorm`, ...
    pub kernel: &'static str,
    /// The problem shape (of the main input).
    pub shape: Vec<usize>,
    /// The main input's dtype.
    pub dtype: DataType,
    pub fusion: Fusion,
    pub inputs: Vec<Input>,
    /// Logical bytes: every input and output once.
    pub bytes: u64,
    pub check: CheckPlan,
    /// What a reader should know about the definition.
    pub note: &'static str,
}

const BF16_TOL: Tolerance = Tolerance {
    rtol: 1.6e-2,
    atol: 1e-3,
};

fn tensor(dtype: DataType, shape: &[usize]) -> Input {
    Input::Tensor {
        dtype,
        shape: shape.to_vec(),
    }
}

fn input_bytes(inputs: &[Input]) -> u64 {
    inputs
        .iter()
        .map(|i| match i {
            Input::Tensor { dtype, shape } => {
                shape.iter().product::<usize>() as u64 * dtype.size_bytes() as u64
            }
            Input::Index { shape, .. } => shape.iter().product::<usize>() as u64 * 8,
            Input::Scalar(_) => 0,
        })
        .sum()
}

fn rows(input_axis: usize, output_axis: usize, width: usize, tolerance: Tolerance) -> CheckPlan {
    CheckPlan {
        input_axis,
        output_axis,
        sliced: None,
        width,
        from_start_only: false,
        tolerance,
    }
}

/// A row-wise bf16 case `[n, h] -> [n, h]` (pointwise or a norm over the last dim).
fn rowwise(
    name: String,
    kernel: &'static str,
    fusion: &Fusion,
    inputs: Vec<Input>,
    n: usize,
    h: usize,
    note: &'static str,
) -> Case {
    let bytes = input_bytes(&inputs) + (n * h * 2) as u64;
    Case {
        group: group_of(&name),
        name,
        kernel,
        shape: vec![n, h],
        dtype: DataType::BF16,
        fusion: fusion.clone(),
        inputs,
        bytes,
        check: rows(0, 0, 4, BF16_TOL),
        note,
    }
}

/// `sweep` for the hidden-size sweep (`sweep/...` names), else `main`.
fn group_of(name: &str) -> &'static str {
    if name.starts_with("sweep/") {
        "sweep"
    } else {
        "main"
    }
}

fn eps() -> Input {
    Input::Scalar(ScalarValue::from(1e-5f32))
}

/// Softmax, its backward, LayerNorm or RMSNorm over `[n, h]` bf16.
fn norm(kernel: &'static str, name: String, n: usize, h: usize) -> Result<Case, Error> {
    let x = tensor(DataType::BF16, &[n, h]);
    let w = tensor(DataType::BF16, &[h]);
    Ok(match kernel {
        "softmax" => rowwise(name, kernel, softmax_fusion()?, vec![x], n, h, "f32 math"),
        "softmax_bwd" => rowwise(
            name,
            kernel,
            softmax_bwd_fusion()?,
            vec![x.clone(), x],
            n,
            h,
            "dy and y in, dx out; f32 math",
        ),
        "layernorm" => rowwise(
            name,
            kernel,
            layer_norm_fusion()?,
            vec![x, w.clone(), w, eps()],
            n,
            h,
            "weight + bias, var_mean, f32 math",
        ),
        _ => rowwise(
            name,
            kernel,
            rms_norm_fusion()?,
            vec![x, w, eps()],
            n,
            h,
            "weight, f32 math",
        ),
    })
}

/// A backward case over `[n, h]` bf16 rows: LayerNorm (`layernorm_bwd`: dy, x, w, mean,
/// rstd in; dx, dw, db out), RMSNorm (`rmsnorm_bwd`: dy, x, w, rstd in; dx, dw out) or
/// GELU with the bias gradient (`gelu_bwd_bias`: dy, x in; dx, db out). The output
/// checked by slices is `dx` (its rows depend on the same rows of the inputs); the
/// column sums are checked against the reference in `gpu_training`.
fn backward(kernel: &'static str, name: String, n: usize, h: usize) -> Result<Case, Error> {
    let x = tensor(DataType::BF16, &[n, h]);
    let w = tensor(DataType::BF16, &[h]);
    let stat = tensor(DataType::F32, &[n, 1]);
    let (fusion, inputs, columns, note) = match kernel {
        "layernorm_bwd" => (
            layer_norm_bwd_fusion()?,
            vec![x.clone(), x, w, stat.clone(), stat],
            2,
            "dy, x, w, mean, rstd in; dx, dw, db (bf16) out; f32 math",
        ),
        "rmsnorm_bwd" => (
            rms_norm_bwd_fusion()?,
            vec![x.clone(), x, w, stat],
            1,
            "dy, x, w, rstd in; dx, dw (bf16) out; f32 math",
        ),
        _ => (
            gelu_bwd_bias_fusion()?,
            vec![x.clone(), x],
            1,
            "dy, x in; dx = dy * gelu'(x), db = dx.sum(0) (bf16) out; f32 math",
        ),
    };
    let mut case = rowwise(name, kernel, fusion, inputs, n, h, note);
    case.bytes += (columns * h * 2) as u64;
    Ok(case)
}

/// Divides every size by `shrink` (at least 1): tiny shapes for a CPU smoke run.
fn s(size: usize, shrink: usize) -> usize {
    (size / shrink).max(1)
}

/// The cases. `shrink` > 1 divides every dim (for the CPU smoke run).
pub fn main_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    let (n, h) = (s(16384, shrink), s(32768, shrink));
    cases.push(rowwise(
        "gelu_tanh".into(),
        "gelu_tanh",
        gelu_tanh_fusion()?,
        vec![tensor(DataType::BF16, &[n, h])],
        n,
        h,
        "f32 math",
    ));
    let (n, h) = (s(8192, shrink), s(14336, shrink));
    cases.push(rowwise(
        "silu_mul".into(),
        "silu_mul",
        silu_mul_fusion()?,
        vec![
            tensor(DataType::BF16, &[n, h]),
            tensor(DataType::BF16, &[n, h]),
        ],
        n,
        h,
        "two inputs gate, up: [N, H] each (the [N, 2H] problem as two tensors)",
    ));
    let mut sliced = rowwise(
        "silu_mul_sliced".into(),
        "silu_mul_sliced",
        &silu_mul_sliced_fusion(h)?,
        vec![tensor(DataType::BF16, &[n, 2 * h])],
        n,
        h,
        "one input [N, 2H], silu(x[:, :H]) * x[:, H:] (slice ops, builder-defined)",
    );
    sliced.shape = vec![n, 2 * h];
    cases.push(sliced);
    let (n, h) = (s(32768, shrink), s(8192, shrink));
    cases.push(norm("softmax", "softmax".into(), n, h)?);
    cases.push(norm("layernorm", "layernorm".into(), n, h)?);
    cases.push(norm("rmsnorm", "rmsnorm".into(), n, h)?);
    let (n2, h2) = (s(8192, shrink), s(4096, shrink));
    cases.push(norm("rmsnorm", "rmsnorm_8192x4096".into(), n2, h2)?);
    cases.push(norm("softmax_bwd", "softmax_bwd".into(), n, h)?);
    // A vocabulary-sized row (not a power of two).
    let (n3, h3) = (s(4096, shrink), s(32000, shrink));
    cases.push(norm(
        "softmax_bwd",
        "softmax_bwd_4096x32000".into(),
        n3,
        h3,
    )?);

    let f32_case = |name: &str,
                    kernel: &'static str,
                    fusion: &Fusion,
                    shape: [usize; 2],
                    out: usize,
                    check: CheckPlan,
                    note: &'static str| {
        let inputs = vec![tensor(DataType::F32, &shape)];
        Case {
            name: name.into(),
            group: "main",
            kernel,
            shape: shape.to_vec(),
            dtype: DataType::F32,
            fusion: fusion.clone(),
            bytes: input_bytes(&inputs) + out as u64 * 4,
            inputs,
            check,
            note,
        }
    };
    // f32 sums: the GPU accumulates in f32, the reference in f64; the rounding error grows
    // with the reduced length (about sqrt(len) * 2^-24 * |values|), so atol scales with it.
    let sum_tol = |len: usize| Tolerance::new(1e-4, 1e-6 * len as f64);
    let (n, h) = (s(32768, shrink), s(8192, shrink));
    cases.push(f32_case(
        "inner_sum",
        "inner_sum",
        inner_sum_fusion()?,
        [n, h],
        n,
        rows(0, 0, 8, sum_tol(h)),
        "sum over the last dim",
    ));
    let (n, h) = (s(8192, shrink), s(32768, shrink));
    cases.push(f32_case(
        "outer_sum",
        "outer_sum",
        outer_sum_fusion()?,
        [n, h],
        h,
        rows(1, 0, 160, sum_tol(n)),
        "sum over the first dim",
    ));
    let n = s(8192, shrink);
    cases.push(f32_case(
        "transpose",
        "transpose",
        transpose_fusion()?,
        [n, n],
        n * n,
        rows(0, 1, 8, Tolerance::exact()),
        "permute([1, 0]) written contiguous",
    ));
    Ok(cases)
}

/// A builder fusion of one `[n, h]` input: `cumsum` along `axis` computed in f32 and
/// returned in the input's dtype.
fn cumsum_fusion(dtype: DataType, axis: i64) -> Result<Fusion, Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let y = fd.cumsum(x, axis)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// Scans (the Parity issue): row cumsums at the issue's `[N, 32K]` in f32 and bf16, and
/// a column cumsum.
pub fn scan_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    // A running sum's rounding error grows with the scanned length and the running
    // value (about sqrt(len) here): atol scales with the length.
    let scan_tol = |len: usize, dt: DataType| match dt {
        DataType::BF16 => Tolerance::new(1.6e-2, 1e-3 + 4e-7 * len as f64),
        _ => Tolerance::new(1e-4, 4e-7 * len as f64),
    };
    let (n, h) = (s(8192, shrink), s(32768, shrink));
    for (name, dt, axis) in [
        ("cumsum_f32", DataType::F32, 1),
        ("cumsum_bf16", DataType::BF16, 1),
        ("cumsum_cols_f32", DataType::F32, 0),
    ] {
        let inputs = vec![tensor(dt, &[n, h])];
        let (check, note) = if axis == 1 {
            (
                rows(0, 0, 4, scan_tol(h, dt)),
                "x.cumsum(1), f32 running sum",
            )
        } else {
            (
                rows(1, 1, 160, scan_tol(n, dt)),
                "x.cumsum(0), f32 running sum",
            )
        };
        cases.push(Case {
            name: name.into(),
            group: "main",
            kernel: "cumsum",
            shape: vec![n, h],
            dtype: dt,
            fusion: cumsum_fusion(dt, axis)?,
            bytes: 2 * input_bytes(&inputs),
            inputs,
            check,
            note,
        });
    }
    Ok(cases)
}

/// A builder fusion of one `[n, h]` f32 input: `topk(x, k, 1)` (values and indices), or
/// the stable `sort(x, 1)` when `k` is `None`.
fn sort_fusion(k: Option<i64>) -> Result<Fusion, Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let (v, i) = match k {
        Some(k) => fd.topk(x, k, 1, true, true)?,
        None => fd.sort(x, 1, false, true)?,
    };
    fd.add_output(v)?;
    fd.add_output(i)?;
    Ok(fd.finish()?)
}

/// Sorting (the Parity issue): `topk` with k = 64 and k = 8 and a full `sort` of
/// `[N, 32K]` f32 rows. Bytes: the input once, the values (f32) and the indices (i64)
/// written; and a topk (k = 50) over an LLM vocabulary, `[64, 128256]` (radix select: a
/// row that no block could sort whole).
pub fn sort_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    let (n, h) = (s(4096, shrink), s(32768, shrink));
    let exact = Tolerance::new(0.0, 0.0);
    for (name, k, note) in [
        (
            "topk_f32",
            Some(64),
            "torch.topk(x, 64, 1): values f32 + indices i64",
        ),
        (
            "topk8_f32",
            Some(8),
            "torch.topk(x, 8, 1): values f32 + indices i64",
        ),
        (
            "sort_f32",
            None,
            "torch.sort(x, 1, stable=True): values f32 + indices i64",
        ),
    ] {
        let inputs = vec![tensor(DataType::F32, &[n, h])];
        let out = k.map_or(h, |k| k as usize);
        cases.push(Case {
            name: name.into(),
            group: "main",
            kernel: if k.is_some() { "topk" } else { "sort" },
            shape: vec![n, h],
            dtype: DataType::F32,
            fusion: sort_fusion(k)?,
            bytes: input_bytes(&inputs) + (n * out * (4 + 8)) as u64,
            inputs,
            check: rows(0, 0, 4, exact),
            note,
        });
    }
    let (n, v) = (s(64, shrink), s(128256, shrink));
    let inputs = vec![tensor(DataType::F32, &[n, v])];
    cases.push(Case {
        name: "topk_vocab_f32".into(),
        group: "main",
        kernel: "topk",
        shape: vec![n, v],
        dtype: DataType::F32,
        fusion: sort_fusion(Some(50.min(v as i64)))?,
        bytes: input_bytes(&inputs) + (n * 50.min(v) * (4 + 8)) as u64,
        inputs,
        check: rows(0, 0, 4, exact),
        note: "torch.topk(logits, 50, 1) over a vocabulary of 128256: values f32 + indices i64",
    });
    Ok(cases)
}

/// Training-side cases beyond the norm sweep: the backwards at two LLM shapes (tokens x
/// hidden of a 7B and a 70B model), and channels-last batch norm forward.
pub fn training_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    for kernel in ["layernorm_bwd", "rmsnorm_bwd"] {
        for (n, h) in [(8192, 4096), (4096, 8192)] {
            let (n, h) = (s(n, shrink), s(h, shrink));
            cases.push(backward(kernel, format!("{kernel}_{n}x{h}"), n, h)?);
        }
    }
    let (n, h) = (s(8192, shrink), s(16384, shrink));
    cases.push(backward("gelu_bwd_bias", "gelu_bwd_bias".into(), n, h)?);
    // A ResNet stage: N = 32 images of 56 x 56 pixels, 256 channels.
    let (m, c) = (s(32 * 56 * 56, shrink), s(256, shrink));
    let inputs = vec![
        tensor(DataType::BF16, &[m, c]),
        tensor(DataType::F32, &[c]),
        tensor(DataType::F32, &[c]),
    ];
    cases.push(Case {
        name: "batchnorm_fwd_nhwc".into(),
        group: "main",
        kernel: "batchnorm",
        shape: vec![m, c],
        dtype: DataType::BF16,
        fusion: batch_norm_nhwc_fusion()?.clone(),
        bytes: input_bytes(&inputs) + (m * c * 2) as u64,
        inputs,
        check: CheckPlan {
            sliced: Some(&[]),
            ..rows(0, 0, 0, BF16_TOL)
        },
        note: "x [N*H*W, C] bf16, stats over rows (var_mean), weight + bias f32",
    });
    Ok(cases)
}

/// Data movement fused with math (the Movement issue's cases): rope, cross-entropy
/// forward, an embedding lookup, causal softmax, dropout + residual + LayerNorm and a
/// KV-cache append. `shrink` > 1 divides every dim.
pub fn movement_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    let case = |name: &str,
                fusion: &Fusion,
                shape: Vec<usize>,
                inputs: Vec<Input>,
                out_bytes: u64,
                check: CheckPlan,
                note: &'static str| Case {
        name: name.into(),
        group: "main",
        kernel: "movement",
        shape,
        dtype: DataType::BF16,
        fusion: fusion.clone(),
        bytes: input_bytes(&inputs) + out_bytes,
        inputs,
        check,
        note,
    };
    // Llama-style queries: 16384 tokens of 32 heads of 128.
    let (t, h) = (s(16384, shrink), s(32, shrink));
    cases.push(case(
        "rope",
        rope_fusion()?,
        vec![t, h, 128],
        vec![
            tensor(DataType::BF16, &[t, h, 128]),
            tensor(DataType::BF16, &[t, 128]),
            tensor(DataType::BF16, &[t, 128]),
        ],
        (t * h * 128 * 2) as u64,
        rows(0, 0, 4, BF16_TOL),
        "x [T, H, 128], cos/sin [T, 128] broadcast over heads; rotate-half by slice, neg, cat",
    ));
    let (n, v) = (s(4096, shrink), s(32000, shrink));
    cases.push(case(
        "cross_entropy_fwd",
        cross_entropy_fusion()?,
        vec![n, v],
        vec![
            tensor(DataType::BF16, &[n, v]),
            Input::Index {
                shape: vec![n, 1],
                bound: v,
            },
        ],
        (n * 4) as u64,
        rows(0, 0, 4, Tolerance::new(1e-4, 1e-4)),
        "logsumexp(f32 logits) - take_along_axis(logits, labels), per row",
    ));
    cases.push(case(
        "cross_entropy_bwd",
        cross_entropy_bwd_fusion()?,
        vec![n, v],
        vec![
            tensor(DataType::F32, &[n]),
            tensor(DataType::BF16, &[n, v]),
            Input::Index {
                shape: vec![n, 1],
                bound: v,
            },
        ],
        (n * v * 2) as u64,
        CheckPlan {
            sliced: Some(&[0, 1, 2]),
            ..rows(0, 0, 4, BF16_TOL)
        },
        "g [N] f32, logits [N, V] bf16, labels [N, 1]: (softmax(logits) - onehot(labels)) * g, bf16 out",
    ));
    let (vocab, d, tokens) = (s(32000, shrink), s(4096, shrink), s(8192, shrink));
    let mut lookup = case(
        "embedding",
        embedding_fusion()?,
        vec![tokens, d],
        vec![
            tensor(DataType::BF16, &[vocab, d]),
            Input::Index {
                shape: vec![tokens],
                bound: vocab,
            },
        ],
        (tokens * d * 2) as u64,
        CheckPlan {
            sliced: Some(&[1]),
            ..rows(0, 0, 4, BF16_TOL)
        },
        "table [V, D] bf16, ids [T]: rows gathered and scaled; bytes count the rows read, not the table",
    );
    lookup.bytes = (tokens * 8 + 2 * tokens * d * 2) as u64;
    cases.push(lookup);
    // 32 heads of 2048 queries by 2048 keys.
    let (b, q) = (s(32, shrink), s(2048, shrink));
    cases.push(case(
        "causal_softmax",
        causal_softmax_fusion()?,
        vec![b, q, q],
        vec![tensor(DataType::BF16, &[b, q, q])],
        (b * q * q * 2) as u64,
        rows(0, 0, 4, BF16_TOL),
        "scores [B, S, S] * 1/sqrt(128), keys after the query masked to -inf (iota mask), softmax over the keys",
    ));
    // Llama-7B's hidden size, 16384 tokens.
    let (n, h) = (s(16384, shrink), s(4096, shrink));
    let scalar = |v: ScalarValue| Input::Scalar(v);
    cases.push(case(
        "dropout_residual_layernorm",
        dropout_residual_layer_norm_fusion()?,
        vec![n, h],
        vec![
            tensor(DataType::BF16, &[n, h]),
            tensor(DataType::BF16, &[n, h]),
            tensor(DataType::BF16, &[h]),
            tensor(DataType::BF16, &[h]),
            scalar(ScalarValue::from(0.1f32)),
            scalar(ScalarValue::from(1.0f32 / 0.9)),
            scalar(ScalarValue::from(1234i64)),
            scalar(ScalarValue::from(0i64)),
            eps(),
        ],
        (2 * n * h * 2) as u64,
        CheckPlan {
            from_start_only: true,
            ..rows(0, 0, 4, BF16_TOL)
        },
        "dropout(x, 0.1) (Philox uniform mask) + residual, then LayerNorm (weight + bias); h and y out",
    ));
    // Llama-7B's queries: 4 sequences of 4096 tokens, 32 heads of 128.
    let (b, t, h) = (s(4, shrink), s(4096, shrink), s(32, shrink));
    cases.push(case(
        "head_split",
        head_split_fusion()?,
        vec![b, t, h, 128],
        vec![tensor(DataType::BF16, &[b, t, h, 128])],
        (b * t * h * 128 * 2) as u64,
        rows(0, 0, 4, BF16_TOL),
        "(x [B, S, H, 128] * 1/sqrt(128)).permute(0, 2, 1, 3): [B, H, S, 128], bf16",
    ));
    let (b, len) = (s(256, shrink), s(2048, shrink));
    cases.push(case(
        "kv_append",
        kv_append_fusion()?,
        vec![b, len, 128],
        vec![
            tensor(DataType::BF16, &[b, len - 1, 128]),
            tensor(DataType::BF16, &[b, 1, 128]),
        ],
        (b * len * 128 * 2) as u64,
        rows(0, 0, 4, Tolerance::exact()),
        "cat([cache [B, S-1, 128], new [B, 1, 128]], 1)",
    ));
    Ok(cases)
}

/// The hidden sizes of the sweep.
pub const SWEEP_HIDDEN: [usize; 6] = [1024, 2048, 4096, 8192, 16384, 32768];

/// Softmax, LayerNorm and RMSNorm and their backwards with `rows * hidden = 2^28` elements
/// (512 MiB of bf16 per tensor) for each hidden size; `shrink` divides the element count.
pub fn sweep_cases(shrink: usize) -> Result<Vec<Case>, Error> {
    let total = (1usize << 28) / shrink.max(1);
    let mut cases = Vec::new();
    for kernel in [
        "softmax",
        "softmax_bwd",
        "layernorm",
        "rmsnorm",
        "layernorm_bwd",
        "rmsnorm_bwd",
    ] {
        for h in SWEEP_HIDDEN {
            let h = s(h, shrink.isqrt().max(1));
            let n = (total / h).max(1);
            let name = format!("sweep/{kernel}/h{h}");
            cases.push(if kernel.ends_with("norm_bwd") {
                backward(kernel, name, n, h)?
            } else {
                norm(kernel, name, n, h)?
            });
        }
    }
    Ok(cases)
}
