//! A fusion built at run time with the builder API, no macro: what a framework does
//! when it turns its own graph into nvfuser-rs IR.
//!
//! `cargo run --example runtime_builder -- [ACTIVATION] [DTYPE]`, with ACTIVATION one of
//! relu, gelu, gelu_tanh, silu, sigmoid, tanh (default gelu_tanh) and DTYPE one of f32,
//! bf16, f16 (default bf16). The program builds `y = act(x * scale + bias)` for the
//! choices it was given, prints the IR and the `fusion!` source that rebuilds it, runs it
//! (on the CPU reference evaluator when there is no GPU, with a notice), and checks it
//! against plain Rust. Building the same definition again finds the same executor in a
//! `FusionCache` (structural hash and equality), so nothing is compiled twice.

mod common;

use nvfuser::prelude::*;
use nvfuser::{Error, FusionCache};

/// The activations this program knows, as (name, builder method, f64 reference).
type Activation = (
    &'static str,
    fn(&mut FusionDefinition, ValId) -> nvfuser_core::Result<ValId>,
    fn(f64) -> f64,
);

const ACTIVATIONS: [Activation; 6] = [
    ("relu", FusionDefinition::relu, |v| v.max(0.0)),
    ("gelu", FusionDefinition::gelu, |v| {
        0.5 * v * (1.0 + libm_erf(v / std::f64::consts::SQRT_2))
    }),
    ("gelu_tanh", FusionDefinition::gelu_tanh, |v| {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        0.5 * v * (1.0 + (k * (v + 0.044_715 * v * v * v)).tanh())
    }),
    ("silu", FusionDefinition::silu, |v| v / (1.0 + (-v).exp())),
    ("sigmoid", FusionDefinition::sigmoid, |v| {
        1.0 / (1.0 + (-v).exp())
    }),
    ("tanh", FusionDefinition::tanh, f64::tanh),
];

/// erf to about 1.5e-7 (Abramowitz and Stegun 7.1.26): plenty for a 16-bit check.
fn libm_erf(v: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * v.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    (1.0 - poly * (-v * v).exp()).copysign(v)
}

/// `y = act(x * scale + bias)` over `[N, H]` (bias `[H]`), math in f32 for 16-bit
/// dtypes, the output in `dtype`.
fn build(act: &Activation, dtype: DataType) -> Result<Fusion, Error> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?; // -1: a symbolic size
    let bias = fd.define_tensor(dtype, &[-1])?;
    let scale = fd.define_scalar(DataType::F32)?; // a run-time scalar argument
    let (x, bias) = if dtype == DataType::F32 {
        (x, bias)
    } else {
        (fd.cast(x, DataType::F32)?, fd.cast(bias, DataType::F32)?)
    };
    let y = fd.mul(x, scale)?;
    let y = fd.add(y, bias)?; // [N, H] + [H] broadcasts over rows
    let y = (act.1)(&mut fd, y)?;
    let y = fd.cast(y, dtype)?; // a no-op for f32
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let act_name = args.first().map_or("gelu_tanh", String::as_str);
    let dtype_name = args.get(1).map_or("bf16", String::as_str);
    let Some(act) = ACTIVATIONS.iter().find(|a| a.0 == act_name) else {
        let names: Vec<_> = ACTIVATIONS.iter().map(|a| a.0).collect();
        eprintln!("unknown activation {act_name:?}; expected one of {names:?}");
        std::process::exit(2);
    };
    let (dtype, tol) = match dtype_name {
        "f32" => (DataType::F32, 1e-5),
        "bf16" => (DataType::BF16, common::BF16_TOL),
        "f16" => (DataType::F16, 2e-3),
        other => {
            eprintln!("unknown dtype {other:?}; expected f32, bf16 or f16");
            std::process::exit(2);
        }
    };

    let device = common::device();
    let (n, h) = common::pick(&device, (8192, 8192), (64, 1024));
    let fusion = build(act, dtype)?;
    println!("y = {act_name}(x * scale + bias), {dtype}, [{n}, {h}], built at run time:\n{fusion}");
    println!(
        "The same fusion as `fusion!` source (Fusion::to_reproducer):\n{}",
        fusion.to_reproducer("scale_bias_act")
    );

    // A definition cache: structurally equal fusions share one executor (and its
    // compiled kernels). Building the definition again is a hit.
    let cache = FusionCache::new(16);
    let exec = cache.get_or_insert(fusion);
    let again = cache.get_or_insert(build(act, dtype)?);
    let stats = cache.stats();
    println!(
        "FusionCache: {} definition(s), {} hit(s); the rebuilt definition {} the same executor",
        stats.entries,
        stats.hits,
        if std::sync::Arc::ptr_eq(&exec, &again) {
            "found"
        } else {
            "did not find"
        }
    );

    let (x, xd) = common::random(&device, dtype, &[n, h], 1)?;
    let (b, bd) = common::random(&device, dtype, &[h], 2)?;
    let scale = 0.5f32;
    let args = [(&xd).into(), (&bd).into(), scale.into()];
    let y = exec.run(&device, &args)?;
    println!("ran on {device}");

    let (xs, bs) = (x.to_f64_vec(), b.to_f64_vec());
    let want: Vec<f64> = xs
        .chunks(h)
        .flat_map(|row| {
            row.iter()
                .zip(&bs)
                .map(|(v, b)| (act.2)(v * f64::from(scale) + b))
        })
        .collect();
    let ok = common::check("y", &y[0], &want, tol)?;
    common::profile(&device, &exec, &args, 20)?;
    common::finish(ok)
}
