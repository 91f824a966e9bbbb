//! Creation-op fusions shared by `creation_plans` (kernel snapshots) and
//! `gpu_creation` (GPU against the CPU reference).

/// Dropout, residual and LayerNorm as the bench and the example write it.
pub const DROPOUT_RESIDUAL_LN: &str = "fn f(x: Tensor<bf16, [N, H]>, residual: Tensor<bf16, [N, H]>,
        w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, p: f32, scale: f32, seed: i64, offset: i64, eps: f32)
        -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {
    let u = uniform([x.size(0), x.size(1)], 0.0, 1.0, seed, offset, f32);
    let h = where_(u >= p, (x as f32) * scale, 0.0f32) + (residual as f32);
    let (var, mean) = h.var_mean([1], correction = 0, keepdim = true);
    let y = (h - mean) * rsqrt(var + eps) * (w as f32) + (b as f32);
    (h as bf16, y as bf16)
}";

/// Dropout backward with the bias gradient: the mask regenerated from the seed, the
/// gradient through it, and its column sum.
pub const DROPOUT_BWD_BIAS: &str =
    "fn f(dy: Tensor<bf16, [N, H]>, p: f32, scale: f32, seed: i64, offset: i64)
        -> (Tensor<bf16, [N, H]>, Tensor<f32, [H]>) {
    let u = uniform([dy.size(0), dy.size(1)], 0.0, 1.0, seed, offset, f32);
    let dx = where_(u >= p, (dy as f32) * scale, 0.0f32);
    (dx as bf16, dx.sum([0]))
}";
