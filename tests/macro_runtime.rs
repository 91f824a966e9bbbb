//! Fusions defined with `fusion!`, run through their typed entry points on the CPU
//! reference device, against the same fusions built with the builder API and evaluated by
//! the CPU reference evaluator directly; plus the entry points' typed errors and caching.

use nvfuser::dsl;
use nvfuser::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser::prelude::*;

/// Defines fusions with `fusion!` and keeps their source text as a `&str`, so tests can
/// also build them with the run-time parser (`dsl::build_str`).
macro_rules! fusions_with_source {
    ($source:ident: $($src:tt)*) => {
        fusion! { $($src)* }
        const $source: &str = stringify!($($src)*);
    };
}

fusions_with_source! { NORMS:
    /// LayerNorm over the last dim, bf16 in and out, f32 math (as in DESIGN.md).
    pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
        -> Tensor<bf16, [N, H]>
    {
        let x = x as f32;
        let mean = x.mean([1]).unsqueeze(1);
        let xc = x - mean;
        let var = (xc * xc).mean([1]).unsqueeze(1);
        let y = xc * rsqrt(var + eps) * (w as f32) + (b as f32);
        y as bf16
    }

    /// RMSNorm, bf16 in and out, with an f32 weight.
    pub fn rms_norm(x: Tensor<bf16, [N, H]>, w: Tensor<f32, [H]>, eps: f32) -> Tensor<bf16, [N, H]> {
        let xf = x as f32;
        let ms = (xf * xf).mean([-1], keepdim = true);
        let y = xf * rsqrt(ms + eps) * w;
        y as bf16
    }

    /// Numerically stable softmax over the last dim, f16 in and out.
    pub fn softmax(x: Tensor<f16, [N, H]>) -> Tensor<f16, [N, H]> {
        let x = x as f32;
        let e = (x - x.max([-1], true)).exp();
        (e / e.sum([-1], true)) as f16
    }
}

fusions_with_source! { OTHERS:
    /// SiLU(gate) * up, the SwiGLU feed-forward epilogue.
    pub fn silu_mul(gate: Tensor<bf16, [N, H]>, up: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        ((gate as f32).silu() * (up as f32)) as bf16
    }

    /// Row statistics and the normalized rows: three outputs.
    pub fn row_stats(x: Tensor<f32, [N, H]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f32, [N, H]>) {
        let (var, mean) = x.var_mean([1], correction = 0);
        let z = (x - mean.unsqueeze(1)) * rsqrt(var.unsqueeze(1) + 1e-6f32);
        (var, mean, z)
    }

    /// `acc += alpha * x`, stored in place into `acc`; also returns the row sums.
    pub fn axpy_inplace(acc: Tensor<f32, [N, H]>, x: Tensor<f32, [N, H]>, alpha: f32)
        -> (Tensor<f32, [N, H]>, Tensor<f32, [N]>)
    {
        let y = acc + alpha * x;
        (inplace(y, acc), y.sum([1]))
    }
}

fn builder_layer_norm() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let w = fd.define_tensor(DataType::BF16, &[-1])?;
    let b = fd.define_tensor(DataType::BF16, &[-1])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let x = fd.cast(x, DataType::F32)?;
    let mean = fd.mean(x, &[1], true)?;
    let xc = fd.sub(x, mean)?;
    let sq = fd.mul(xc, xc)?;
    let var = fd.mean(sq, &[1], true)?;
    let ve = fd.add(var, eps)?;
    let r = fd.rsqrt(ve)?;
    let y = fd.mul(xc, r)?;
    let wf = fd.cast(w, DataType::F32)?;
    let y = fd.mul(y, wf)?;
    let bf = fd.cast(b, DataType::F32)?;
    let y = fd.add(y, bf)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn builder_rms_norm() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let w = fd.define_tensor(DataType::F32, &[-1])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let ms = fd.mean(sq, &[-1], true)?;
    let ms = fd.add(ms, eps)?;
    let r = fd.rsqrt(ms)?;
    let y = fd.mul(xf, r)?;
    let y = fd.mul(y, w)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn builder_softmax() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, -1])?;
    let x = fd.cast(x, DataType::F32)?;
    let m = fd.max(x, &[-1], true)?;
    let z = fd.sub(x, m)?;
    let e = fd.exp(z)?;
    let s = fd.sum(e, &[-1], true)?;
    let y = fd.div(e, s)?;
    let y = fd.cast(y, DataType::F16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn builder_silu_mul() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let gate = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let up = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let g = fd.cast(gate, DataType::F32)?;
    let g = fd.silu(g)?;
    let u = fd.cast(up, DataType::F32)?;
    let y = fd.mul(g, u)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn builder_row_stats() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let (var, mean) = fd.var_mean(x, &[1], 0, false)?;
    let m = fd.unsqueeze(mean, 1)?;
    let xc = fd.sub(x, m)?;
    let v = fd.unsqueeze(var, 1)?;
    let eps = fd.constant_of(1e-6, DataType::F32);
    let v = fd.add(v, eps)?;
    let r = fd.rsqrt(v)?;
    let z = fd.mul(xc, r)?;
    fd.add_output(var)?;
    fd.add_output(mean)?;
    fd.add_output(z)?;
    Ok(fd.finish()?)
}

fn builder_axpy_inplace() -> Result<Fusion, nvfuser::Error> {
    let mut fd = FusionDefinition::new();
    let acc = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let alpha = fd.define_scalar(DataType::F32)?;
    let ax = fd.mul(alpha, x)?;
    let y = fd.add(acc, ax)?;
    let s = fd.sum(y, &[1], false)?;
    fd.add_output_alias(y, acc)?;
    fd.add_output(s)?;
    Ok(fd.finish()?)
}

/// Uploads host tensors to the CPU reference device.
fn upload(hosts: &[&HostTensor]) -> Vec<Tensor> {
    let cpu = Device::cpu();
    hosts
        .iter()
        .map(|h| cpu.tensor_from_host(h).expect("upload"))
        .collect()
}

/// Checks the entry point's outputs against `evaluate(builder_fusion, inputs)`.
fn check_against_builder(what: &str, got: &[Tensor], builder: &Fusion, inputs: &[EvalInput]) {
    let want = evaluate(builder, inputs).expect("evaluate");
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = g.to_host_tensor().expect("download");
        if let Err(m) = compare(&g, w, Tolerance::for_dtype(w.dtype())) {
            panic!("{what}: output {i}: {m}");
        }
    }
}

#[test]
fn layer_norm_matches_the_builder_fusion() -> Result<(), nvfuser::Error> {
    let (n, h) = (6, 40);
    let x = HostTensor::random(DataType::BF16, &[n, h], 1);
    let w = HostTensor::random(DataType::BF16, &[h], 2);
    let b = HostTensor::random(DataType::BF16, &[h], 3);
    let t = upload(&[&x, &w, &b]);
    let y = layer_norm(&Device::cpu(), &t[0], &t[1], &t[2], 1e-5)?;
    let builder = builder_layer_norm()?;
    assert!(*layer_norm_fusion()? == builder);
    let inputs = [x.into(), w.into(), b.into(), 1e-5f32.into()];
    check_against_builder("layer_norm", &[y], &builder, &inputs);
    Ok(())
}

#[test]
fn rms_norm_softmax_and_silu_mul_match_the_builder_fusions() -> Result<(), nvfuser::Error> {
    let cpu = Device::cpu();
    let x = HostTensor::random(DataType::BF16, &[5, 24], 4);
    let w = HostTensor::random(DataType::F32, &[24], 5);
    let t = upload(&[&x, &w]);
    let y = rms_norm(&cpu, &t[0], &t[1], 1e-6)?;
    let builder = builder_rms_norm()?;
    assert!(*rms_norm_fusion()? == builder);
    let inputs = [x.into(), w.into(), 1e-6f32.into()];
    check_against_builder("rms_norm", &[y], &builder, &inputs);

    let x = HostTensor::random(DataType::F16, &[3, 17], 6);
    let y = softmax(&cpu, &upload(&[&x])[0])?;
    let builder = builder_softmax()?;
    assert!(*softmax_fusion()? == builder);
    check_against_builder("softmax", &[y], &builder, &[x.into()]);

    let g = HostTensor::random(DataType::BF16, &[4, 33], 7);
    let u = HostTensor::random(DataType::BF16, &[4, 33], 8);
    let t = upload(&[&g, &u]);
    let y = silu_mul(&cpu, &t[0], &t[1])?;
    let builder = builder_silu_mul()?;
    assert!(*silu_mul_fusion()? == builder);
    check_against_builder("silu_mul", &[y], &builder, &[g.into(), u.into()]);
    Ok(())
}

#[test]
fn several_outputs_come_back_as_a_tuple() -> Result<(), nvfuser::Error> {
    let x = HostTensor::random(DataType::F32, &[7, 12], 9);
    let (var, mean, z): (Tensor, Tensor, Tensor) = row_stats(&Device::cpu(), &upload(&[&x])[0])?;
    let builder = builder_row_stats()?;
    assert!(*row_stats_fusion()? == builder);
    assert_eq!(
        (var.sizes(), mean.sizes(), z.sizes()),
        (&[7][..], &[7][..], &[7, 12][..])
    );
    check_against_builder("row_stats", &[var, mean, z], &builder, &[x.into()]);
    Ok(())
}

#[test]
fn in_place_outputs_alias_their_input() -> Result<(), nvfuser::Error> {
    let acc = HostTensor::random(DataType::F32, &[3, 5], 10);
    let x = HostTensor::random(DataType::F32, &[3, 5], 11);
    let t = upload(&[&acc, &x]);
    let (y, s) = axpy_inplace(&Device::cpu(), &t[0], &t[1], 0.5)?;
    let fusion = axpy_inplace_fusion()?;
    assert_eq!(fusion.outputs()[0].alias_of, Some(fusion.inputs()[0]));
    let builder = builder_axpy_inplace()?;
    assert!(*fusion == builder);
    check_against_builder(
        "axpy_inplace",
        &[y, s],
        &builder,
        &[acc.into(), x.into(), 0.5f32.into()],
    );
    Ok(())
}

#[test]
fn the_macro_fusions_equal_the_run_time_parse_of_their_source() -> Result<(), nvfuser::Error> {
    let macro_fusions: [(&str, &Fusion); 6] = [
        ("layer_norm", layer_norm_fusion()?),
        ("rms_norm", rms_norm_fusion()?),
        ("softmax", softmax_fusion()?),
        ("silu_mul", silu_mul_fusion()?),
        ("row_stats", row_stats_fusion()?),
        ("axpy_inplace", axpy_inplace_fusion()?),
    ];
    let mut parsed = Vec::new();
    for src in [NORMS, OTHERS] {
        let built = dsl::build_str(src).unwrap_or_else(|errs| {
            panic!("{}", errs.iter().map(|e| e.render(src)).collect::<String>())
        });
        parsed.extend(built);
    }
    assert_eq!(parsed.len(), macro_fusions.len());
    for ((name, from_macro), (from_text, sig)) in macro_fusions.iter().zip(&parsed) {
        assert_eq!(&sig.name, name);
        assert!(*from_macro == from_text, "{name}");
        assert_eq!(
            from_macro.structural_hash(),
            from_text.structural_hash(),
            "{name}"
        );
    }
    Ok(())
}

#[test]
fn calling_twice_reuses_the_cached_fusion() -> Result<(), nvfuser::Error> {
    let first: &'static Fusion = layer_norm_fusion()?;
    let second: &'static Fusion = layer_norm_fusion()?;
    assert!(std::ptr::eq(first, second));
    let t = upload(&[&HostTensor::random(DataType::F16, &[2, 8], 12)]);
    let a = softmax(&Device::cpu(), &t[0])?;
    let b = softmax(&Device::cpu(), &t[0])?;
    assert_eq!(a.to_vec::<f16>()?, b.to_vec::<f16>()?);
    assert!(std::ptr::eq(softmax_fusion()?, softmax_fusion()?));
    // From several threads at once: every caller sees the one fusion.
    let ptrs: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| silu_mul_fusion().map(|f| f as *const Fusion as usize)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect::<Result<_, _>>()
    })?;
    assert!(ptrs.iter().all(|&p| p == ptrs[0]));
    Ok(())
}

fn layer_norm_inputs(x: &[usize], w: &[usize], b: &[usize], dtype: DataType) -> Vec<Tensor> {
    upload(&[
        &HostTensor::random(dtype, x, 1),
        &HostTensor::random(DataType::BF16, w, 2),
        &HostTensor::random(DataType::BF16, b, 3),
    ])
}

#[test]
fn a_named_dim_mismatch_is_a_typed_error() {
    let t = layer_norm_inputs(&[4, 8], &[8], &[6], DataType::BF16);
    let err = layer_norm(&Device::cpu(), &t[0], &t[1], &t[2], 1e-5).unwrap_err();
    assert!(matches!(
        err,
        nvfuser::Error::InvalidTensor {
            op: "layer_norm",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "layer_norm: expected dim `H` to have one size in every argument: `x` has H = 8 \
         (axis 1), found `b` has H = 6 (axis 0)"
    );
}

#[test]
fn a_wrong_dtype_is_a_typed_error() {
    let t = layer_norm_inputs(&[4, 8], &[8], &[8], DataType::F32);
    let err = layer_norm(&Device::cpu(), &t[0], &t[1], &t[2], 1e-5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer_norm: expected argument `x` to be a Tensor<bf16, [N, H]> (rank 2), found a \
         tensor of dtype f32, rank 2 (sizes [4, 8])"
    );
}

#[test]
fn a_wrong_rank_is_a_typed_error() {
    let t = layer_norm_inputs(&[4, 8], &[1, 8], &[8], DataType::BF16);
    let err = layer_norm(&Device::cpu(), &t[0], &t[1], &t[2], 1e-5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer_norm: expected argument `w` to be a Tensor<bf16, [H]> (rank 1), found a \
         tensor of dtype bf16, rank 2 (sizes [1, 8])"
    );
}

#[test]
fn layouts_the_entry_point_cannot_see_are_checked_by_the_executor() {
    // A transposed view where the declaration promises a contiguous row-major tensor.
    let x = HostTensor::random(DataType::F16, &[8, 3], 13);
    let t = upload(&[&x]).remove(0).permute(&[1, 0]).expect("view");
    let err = softmax(&Device::cpu(), &t).unwrap_err();
    assert!(err.to_string().contains("declared contiguous"), "{err}");
}

fusion! {
    /// The 3 largest of each row (doubled) and their positions, and the ascending
    /// order of each row.
    pub fn top3_and_order(x: Tensor<f32, [N, V]>) -> (Tensor<f32, [N, 3]>, Tensor<i64, [N, 3]>, Tensor<i64, [N, V]>) {
        let (v, i) = (x * 2.0f32).topk(3);
        (v, i, x.argsort(1))
    }
}

#[test]
fn topk_and_argsort_through_the_macro_on_the_cpu_device() -> Result<(), nvfuser::Error> {
    let device = Device::cpu();
    let x = device.tensor_from_slice(&[1.0f32, 5.0, 3.0, 5.0, -1.0, 0.0, 2.0, 2.0], [2, 4])?;
    let (v, i, o): (Tensor, Tensor, Tensor) = top3_and_order(&device, &x)?;
    // Ties go to the lower index: 5 at 1 and 3, 2 at 2 and 3.
    assert_eq!(v.to_vec::<f32>()?, [10.0, 10.0, 6.0, 4.0, 4.0, 0.0]);
    assert_eq!(i.to_vec::<i64>()?, [1, 3, 2, 2, 3, 1]);
    assert_eq!(o.to_vec::<i64>()?, [0, 2, 1, 3, 0, 1, 2, 3]);
    Ok(())
}
