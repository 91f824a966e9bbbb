//! A small transformer block trained for one step's worth of gradients, twice: once with
//! the norms, activations, softmax, rotary embedding and loss as nvfuser fusions (candle
//! custom ops with fused backwards), once with candle's own unfused ops. Prints the
//! values and gradients side by side: max abs and max relative differences.
//!
//! ```sh
//! cargo run -p nvfuser-candle --example transformer_block
//! ```
//!
//! The block (pre-norm, as in Llama with a LayerNorm in the MLP branch and a GELU head):
//! `h = x + attn(rms_norm(x))`, attention with rotary q/k and a causal softmax;
//! `h2 = h + down(silu_mul_packed(gate_up(layer_norm(h))))`;
//! `logits = out(gelu(head(h2)))`; `loss = mean(cross_entropy(logits, labels))`.
//! Matmuls, reshapes, the residual adds and the causal mask stay candle ops in both runs.

use std::collections::BTreeMap;

use candle_core::{DType, Device, Result, Tensor, Var, D};

const B: usize = 2;
const T: usize = 8;
const C: usize = 32;
const HEADS: usize = 2;
const DH: usize = C / HEADS;
const F: usize = 48;
const V: usize = 40;
const EPS: f64 = 1e-5;

/// A deterministic generator (SplitMix64) for the example's data.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    }

    fn tensor(&mut self, dims: &[usize], lo: f32, hi: f32, dtype: DType) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|_| lo + (hi - lo) * self.uniform()).collect();
        Tensor::from_vec(v, dims, &Device::Cpu)?.to_dtype(dtype)
    }
}

/// The block's parameters (variables, so both runs get their gradients).
struct Params {
    norm1: Var,
    wq: Var,
    wk: Var,
    wv: Var,
    wo: Var,
    norm2_w: Var,
    norm2_b: Var,
    gate_up: Var,
    down: Var,
    head: Var,
    out: Var,
}

impl Params {
    fn new(rng: &mut Rng, dtype: DType) -> Result<Params> {
        let mut w = |dims: &[usize], scale: f32| -> Result<Var> {
            Var::from_tensor(&rng.tensor(dims, -scale, scale, dtype)?)
        };
        let s = 1.0 / (C as f32).sqrt();
        Ok(Params {
            norm1: Var::from_tensor(&Rng(7).tensor(&[C], 0.8, 1.2, dtype)?)?,
            wq: w(&[C, C], s)?,
            wk: w(&[C, C], s)?,
            wv: w(&[C, C], s)?,
            wo: w(&[C, C], s)?,
            norm2_w: Var::from_tensor(&Rng(8).tensor(&[C], 0.8, 1.2, dtype)?)?,
            norm2_b: w(&[C], 0.1)?,
            gate_up: w(&[C, 2 * F], s)?,
            down: w(&[F, C], 1.0 / (F as f32).sqrt())?,
            head: w(&[C, C], s)?,
            out: w(&[C, V], s)?,
        })
    }

    fn named(&self) -> Vec<(&'static str, &Var)> {
        vec![
            ("norm1.weight", &self.norm1),
            ("attn.wq", &self.wq),
            ("attn.wk", &self.wk),
            ("attn.wv", &self.wv),
            ("attn.wo", &self.wo),
            ("norm2.weight", &self.norm2_w),
            ("norm2.bias", &self.norm2_b),
            ("mlp.gate_up", &self.gate_up),
            ("mlp.down", &self.down),
            ("head", &self.head),
            ("out", &self.out),
        ]
    }
}

/// The ops that differ between the two runs.
trait Ops {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor>;
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn softmax(&self, x: &Tensor) -> Result<Tensor>;
    fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor>;
    fn silu_mul_packed(&self, x: &Tensor) -> Result<Tensor>;
    fn gelu(&self, x: &Tensor) -> Result<Tensor>;
    fn cross_entropy(&self, logits: &Tensor, labels: &Tensor) -> Result<Tensor>;
}

/// nvfuser fusions through nvfuser-candle.
struct Fused;

impl Ops for Fused {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        nvfuser_candle::rms_norm(x, w, EPS)
    }
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
        nvfuser_candle::layer_norm(x, w, Some(b), EPS)
    }
    fn softmax(&self, x: &Tensor) -> Result<Tensor> {
        nvfuser_candle::softmax_last_dim(x)
    }
    fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        nvfuser_candle::rope(x, cos, sin)
    }
    fn silu_mul_packed(&self, x: &Tensor) -> Result<Tensor> {
        nvfuser_candle::silu_mul_packed(x)
    }
    fn gelu(&self, x: &Tensor) -> Result<Tensor> {
        nvfuser_candle::gelu(x)
    }
    fn cross_entropy(&self, logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
        nvfuser_candle::cross_entropy(logits, labels)
    }
}

/// The same math with candle's own (unfused) ops, f32 inside for half-precision inputs.
struct Unfused;

fn up(x: &Tensor) -> Result<Tensor> {
    x.to_dtype(DType::F32)
}

impl Ops for Unfused {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        let xf = up(x)?;
        let r = (xf.sqr()?.mean_keepdim(D::Minus1)? + EPS)?.sqrt()?;
        xf.broadcast_div(&r)?
            .broadcast_mul(&up(w)?)?
            .to_dtype(x.dtype())
    }
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
        let xf = up(x)?;
        let xc = xf.broadcast_sub(&xf.mean_keepdim(D::Minus1)?)?;
        let r = (xc.sqr()?.mean_keepdim(D::Minus1)? + EPS)?.sqrt()?;
        let y = xc.broadcast_div(&r)?.broadcast_mul(&up(w)?)?;
        y.broadcast_add(&up(b)?)?.to_dtype(x.dtype())
    }
    fn softmax(&self, x: &Tensor) -> Result<Tensor> {
        let xf = up(x)?;
        let e = xf
            .broadcast_sub(&xf.max_keepdim(D::Minus1)?.detach())?
            .exp()?;
        e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?
            .to_dtype(x.dtype())
    }
    fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let xf = up(x)?;
        let h = xf.dim(D::Minus1)? / 2;
        let rot = Tensor::cat(
            &[
                &xf.narrow(D::Minus1, h, h)?.neg()?,
                &xf.narrow(D::Minus1, 0, h)?,
            ],
            D::Minus1,
        )?;
        let y = (xf.broadcast_mul(&up(cos)?)? + rot.broadcast_mul(&up(sin)?)?)?;
        y.to_dtype(x.dtype())
    }
    fn silu_mul_packed(&self, x: &Tensor) -> Result<Tensor> {
        let xf = up(x)?;
        let h = xf.dim(D::Minus1)? / 2;
        let y = (xf.narrow(D::Minus1, 0, h)?.silu()? * xf.narrow(D::Minus1, h, h)?)?;
        y.to_dtype(x.dtype())
    }
    fn gelu(&self, x: &Tensor) -> Result<Tensor> {
        up(x)?.gelu()?.to_dtype(x.dtype())
    }
    fn cross_entropy(&self, logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
        let lead = logits.dims()[..logits.rank() - 1].to_vec();
        let xf = up(&logits.reshape(((), V))?)?;
        let s = xf.broadcast_sub(&xf.max_keepdim(D::Minus1)?.detach())?;
        let lse = s.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let picked = s.gather(&labels.flatten_all()?.unsqueeze(1)?, 1)?;
        (lse - picked)?.squeeze(1)?.reshape(lead)
    }
}

/// The block's inputs: tokens' embeddings, labels, rotary tables, the causal mask.
struct Inputs {
    x: Tensor,
    labels: Tensor,
    cos: Tensor,
    sin: Tensor,
    mask: Tensor,
}

impl Inputs {
    fn new(rng: &mut Rng, dtype: DType) -> Result<Inputs> {
        let x = rng.tensor(&[B, T, C], -1.0, 1.0, dtype)?;
        let labels: Vec<u32> = (0..B * T)
            .map(|_| (rng.uniform() * V as f32) as u32 % V as u32)
            .collect();
        let labels = Tensor::from_vec(labels, (B, T), &Device::Cpu)?;
        // Llama's tables: frequency i for dims i and i + DH/2.
        let mut cos = Vec::with_capacity(T * DH);
        let mut sin = Vec::with_capacity(T * DH);
        for t in 0..T {
            for d in 0..DH {
                let i = (d % (DH / 2)) as f32;
                let angle = t as f32 / 10000f32.powf(2.0 * i / DH as f32);
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let cos = Tensor::from_vec(cos, (T, DH), &Device::Cpu)?.to_dtype(dtype)?;
        let sin = Tensor::from_vec(sin, (T, DH), &Device::Cpu)?.to_dtype(dtype)?;
        let mask: Vec<f32> = (0..T * T)
            .map(|k| {
                if k % T > k / T {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        let mask = Tensor::from_vec(mask, (T, T), &Device::Cpu)?.to_dtype(dtype)?;
        Ok(Inputs {
            x,
            labels,
            cos,
            sin,
            mask,
        })
    }
}

/// The block's forward; returns the loss and the intermediates worth comparing.
fn block(
    ops: &dyn Ops,
    p: &Params,
    inp: &Inputs,
) -> Result<(Tensor, BTreeMap<&'static str, Tensor>)> {
    let mut seen = BTreeMap::new();
    let heads = |t: Tensor| -> Result<Tensor> {
        t.reshape((B, T, HEADS, DH))?.transpose(1, 2)?.contiguous()
    };
    // Attention branch.
    let n1 = ops.rms_norm(&inp.x, p.norm1.as_tensor())?;
    let q = heads(n1.broadcast_matmul(p.wq.as_tensor())?)?;
    let k = heads(n1.broadcast_matmul(p.wk.as_tensor())?)?;
    let v = heads(n1.broadcast_matmul(p.wv.as_tensor())?)?;
    let q = ops.rope(&q, &inp.cos, &inp.sin)?;
    let k = ops.rope(&k, &inp.cos, &inp.sin)?;
    let scores = (q.matmul(&k.t()?.contiguous()?)? / (DH as f64).sqrt())?;
    let probs = ops.softmax(&scores.broadcast_add(&inp.mask)?)?;
    let o = probs.matmul(&v)?.transpose(1, 2)?.reshape((B, T, C))?;
    let h = (&inp.x + o.broadcast_matmul(p.wo.as_tensor())?)?;
    // MLP branch.
    let n2 = ops.layer_norm(&h, p.norm2_w.as_tensor(), p.norm2_b.as_tensor())?;
    let act = ops.silu_mul_packed(&n2.broadcast_matmul(p.gate_up.as_tensor())?)?;
    let h2 = (&h + act.broadcast_matmul(p.down.as_tensor())?)?;
    // Head and loss.
    let g = ops.gelu(&h2.broadcast_matmul(p.head.as_tensor())?)?;
    let logits = g.broadcast_matmul(p.out.as_tensor())?;
    let rows = ops.cross_entropy(&logits, &inp.labels)?;
    let loss = rows.mean_all()?;
    seen.insert("1 rms_norm(x)", n1);
    seen.insert("2 rope(q)", q);
    seen.insert("3 softmax(scores)", probs);
    seen.insert("4 layer_norm(h)", n2);
    seen.insert("5 silu_mul_packed", act);
    seen.insert("6 gelu(head)", g);
    seen.insert("7 cross_entropy rows", rows);
    Ok((loss, seen))
}

/// Max abs difference, and max difference relative to the reference's largest magnitude.
fn diff(a: &Tensor, b: &Tensor) -> Result<(f64, f64)> {
    let a = a.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let b = b.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let scale = b
        .iter()
        .fold(0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let max_abs = a
        .iter()
        .zip(&b)
        .fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    Ok((max_abs, max_abs / scale))
}

fn run(dtype: DType) -> Result<()> {
    println!("\n== {dtype:?}: B={B} T={T} C={C} heads={HEADS} mlp={F} vocab={V}");
    let mut rng = Rng(2026);
    let params = Params::new(&mut rng, dtype)?;
    let inputs = Inputs::new(&mut rng, dtype)?;

    let (loss_f, seen_f) = block(&Fused, &params, &inputs)?;
    let grads_f = loss_f.backward()?;
    let (loss_u, seen_u) = block(&Unfused, &params, &inputs)?;
    let grads_u = loss_u.backward()?;

    let lf = loss_f.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    let lu = loss_u.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    println!(
        "loss: fused {lf:.6}  candle {lu:.6}  |diff| {:.2e}",
        (lf - lu).abs()
    );

    println!(
        "{:<24} {:>14} {:>12} {:>12}",
        "activation", "shape", "max abs", "rel to max"
    );
    for (name, t) in &seen_f {
        let (a, r) = diff(t, &seen_u[name])?;
        println!(
            "{:<24} {:>14} {a:>12.2e} {r:>12.2e}",
            name,
            format!("{:?}", t.dims())
        );
    }
    println!(
        "{:<24} {:>14} {:>12} {:>12}",
        "gradient", "shape", "max abs", "rel to max"
    );
    let mut worst: f64 = 0.0;
    for (name, var) in params.named() {
        let gf = grads_f.get(var).expect("fused gradient");
        let gu = grads_u.get(var).expect("candle gradient");
        let (a, r) = diff(gf, gu)?;
        worst = worst.max(r);
        println!(
            "{:<24} {:>14} {a:>12.2e} {r:>12.2e}",
            name,
            format!("{:?}", gf.dims())
        );
    }
    println!("worst gradient difference relative to its largest element: {worst:.2e}");
    Ok(())
}

fn main() -> Result<()> {
    println!("device: {}", nvfuser_candle::execution_device());
    println!("candle device: {:?}", Device::Cpu);
    run(DType::F32)?;
    run(DType::BF16)?;
    println!(
        "\n{} fusions built (forwards and backward variants, per op and dtype), each once, \
         kept with its executor cache for every later call",
        nvfuser_candle::cached_fusions()
    );
    Ok(())
}
