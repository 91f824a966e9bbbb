//! Stateful random ops through the typed entry points of `fusion!` and the executor: the
//! device's generator supplies the seed and offset, moves on after each call, and
//! `Device::manual_seed` / `rng_state` / `set_rng_state` replay a sequence of calls.
//!
//! The generators are per process and per device, so every test here uses its own
//! process-wide lock: tests of one binary run on several threads.

use std::sync::{Mutex, MutexGuard};

use nvfuser::generator::DEFAULT_SEED;
use nvfuser::prelude::*;
use nvfuser::{RngState, ScalarValue};

fusion! {
    /// Dropout written with the generator: keep with probability 0.75, scale by 4/3.
    fn dropout(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N, H]> {
        let u = rand_uniform([x.size(0), x.size(1)], 0.0, 1.0, f32);
        where_(u < 0.75, x * (1.0 / 0.75), 0.0)
    }

    /// Two independent draws of one call.
    fn two_normals(x: Tensor<f32, [N]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>) {
        let a = rand_normal([x.size(0)], 0.0, 1.0, f32);
        let b = rand_normal([x.size(0)], 0.0, 1.0, f32);
        (x + a, x + b)
    }
}

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn ones(dev: &Device, n: usize, h: usize) -> Tensor {
    dev.tensor_from_slice(&vec![1.0f32; n * h], [n, h]).unwrap()
}

#[test]
fn each_call_draws_new_numbers_and_a_seed_replays_them() {
    let _g = serial();
    let dev = Device::cpu();
    let x = ones(&dev, 64, 33);
    dev.manual_seed(7);
    assert_eq!(dev.rng_state(), RngState { seed: 7, offset: 0 });
    let a: Vec<f32> = dropout(&dev, &x).unwrap().to_vec().unwrap();
    assert_eq!(dev.rng_state(), RngState { seed: 7, offset: 1 });
    let b: Vec<f32> = dropout(&dev, &x).unwrap().to_vec().unwrap();
    assert_ne!(a, b, "two calls drew the same mask");
    // Each element is dropped (0) or kept and scaled (4/3), and about 3/4 are kept.
    let kept = a.iter().filter(|&&v| v != 0.0).count();
    assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    assert!((1400..=1770).contains(&kept), "{kept} of 2112 kept");

    dev.manual_seed(7);
    let a2: Vec<f32> = dropout(&dev, &x).unwrap().to_vec().unwrap();
    let b2: Vec<f32> = dropout(&dev, &x).unwrap().to_vec().unwrap();
    assert_eq!((a2, b2), (a, b));
}

#[test]
fn a_saved_state_replays_and_explicit_values_leave_the_generator_alone() {
    let _g = serial();
    let dev = Device::cpu();
    let x = dev.tensor_from_slice(&[0.0f32; 100], [100]).unwrap();
    dev.manual_seed(11);
    let exec = FusionExecutorCache::new(two_normals_fusion().unwrap().clone());
    let saved = dev.rng_state();
    let first = exec.run(&dev, &[(&x).into()]).unwrap();
    // Two ops: the offset moved on by two.
    assert_eq!(dev.rng_state().offset, saved.offset + 2);
    let (a, b) = (
        first[0].to_vec::<f32>().unwrap(),
        first[1].to_vec::<f32>().unwrap(),
    );
    assert_ne!(a, b, "two ops of one call drew the same numbers");
    // The same call with the seed and offset passed explicitly: the same numbers, and
    // the generator does not move.
    let before = dev.rng_state();
    let again = exec
        .run(
            &dev,
            &[
                (&x).into(),
                Arg::Scalar(ScalarValue::Int(saved.seed as i64)),
                Arg::Scalar(ScalarValue::Int(saved.offset as i64)),
            ],
        )
        .unwrap();
    assert_eq!(dev.rng_state(), before);
    assert_eq!(again[0].to_vec::<f32>().unwrap(), a);
    assert_eq!(again[1].to_vec::<f32>().unwrap(), b);
    // Restoring the state replays the call.
    dev.set_rng_state(saved);
    let replay = exec.run(&dev, &[(&x).into()]).unwrap();
    assert_eq!(replay[1].to_vec::<f32>().unwrap(), b);
    // The draws look normal: mean near 0, variance near 1 over 100 values.
    let mean = a.iter().sum::<f32>() / 100.0;
    let var = a.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 99.0;
    assert!(
        mean.abs() < 0.4 && (0.5..1.6).contains(&var),
        "{mean} {var}"
    );
}

#[test]
fn a_wrong_number_of_arguments_is_a_typed_error() {
    let _g = serial();
    let dev = Device::cpu();
    let exec = FusionExecutorCache::new(two_normals_fusion().unwrap().clone());
    let x = dev.tensor_from_slice(&[0.0f32; 4], [4]).unwrap();
    let one = Arg::Scalar(ScalarValue::Int(1));
    let err = exec.run(&dev, &[(&x).into(), one]).unwrap_err().to_string();
    assert!(
        err.contains("3 arguments")
            && err.contains("or 1 without the random generator's seed and offset"),
        "{err}"
    );
}

#[test]
fn the_first_seed_is_pytorchs_default() {
    assert_eq!(DEFAULT_SEED, 67_280_421_310_721);
    assert_eq!(RngState::default().seed, DEFAULT_SEED);
}
