//! Random fusions, segmented under several acceptance rules (including a non-monotone
//! one): every segmentation is well formed, in a runnable order, accepted by its rule,
//! and evaluates, segment by segment through the maps, to the whole fusion's values.

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::Fusion;
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{can_schedule, SchedulerKind};
use nvfuser_core::segment::{SegmentOptions, SegmentValue, SegmentedFusion};

mod segment_common;
use segment_common::{accept_all, no_broadcast_of_reduction, one_reduction_shape, reject, Verdict};

type Rule<'a> = &'a dyn Fn(&Fusion) -> Verdict;

/// The kind the toy rules give an accepted fusion.
fn kind(f: &Fusion) -> SchedulerKind {
    accept_all(f).unwrap_or(SchedulerKind::Pointwise)
}

fn at_most_four(f: &Fusion) -> Verdict {
    if f.num_exprs() > 4 {
        reject("more than 4 expressions")
    } else {
        Ok(kind(f))
    }
}

/// Not monotone: rejects about a third of the candidate fusions by their structure.
fn arbitrary(f: &Fusion) -> Verdict {
    if f.num_exprs() > 1 && f.structural_hash().is_multiple_of(3) {
        reject("arbitrary")
    } else {
        Ok(kind(f))
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random fusion of about `ops` steps over `[N, H]` f32 tensors (and a bf16 input).
fn random_fusion(seed: u64, ops: usize) -> Fusion {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9) + 1);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let h = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let hf = fd.cast(h, DataType::F32).unwrap();
    let mut pool = vec![x, hf];
    for _ in 0..ops {
        let a = pool[rng.below(pool.len())];
        let b = pool[rng.below(pool.len())];
        let v = match rng.below(9) {
            0 => fd.tanh(a).unwrap(),
            1 => fd.sin(a).unwrap(),
            2 => fd.add(a, b).unwrap(),
            3 => fd.mul(a, b).unwrap(),
            4 => {
                let r = fd.sum(a, &[1], true).unwrap();
                fd.sub(b, r).unwrap()
            }
            5 => {
                let r = fd.mean(a, &[0], true).unwrap();
                fd.sub(b, r).unwrap()
            }
            6 => fd.segment_set(a).unwrap(),
            7 => {
                let c = fd.cast(a, DataType::BF16).unwrap();
                fd.cast(c, DataType::F32).unwrap()
            }
            _ => {
                let r = fd.max(a, &[1], false).unwrap();
                let r = fd.broadcast(r, &[false, true]).unwrap();
                fd.mul(b, r).unwrap()
            }
        };
        pool.push(v);
    }
    let last = *pool.last().unwrap();
    fd.add_output(last).unwrap();
    let extra = pool[2 + rng.below(pool.len() - 2)];
    if extra != last {
        fd.add_output(extra).unwrap();
    }
    // A bf16 output turns the half-precision boundaries on.
    if rng.below(2) == 0 {
        let o = fd.cast(last, DataType::BF16).unwrap();
        fd.add_output(o).unwrap();
    }
    fd.finish().unwrap()
}

/// Returns the number of segments.
fn check(seed: u64, f: &Fusion, name: &str, rule: &dyn Fn(&Fusion) -> Verdict) -> usize {
    let seg = SegmentedFusion::with_scheduler(f, rule, SegmentOptions::default())
        .unwrap_or_else(|e| panic!("seed {seed}, {name}: {e}\n{f}"));
    let ctx = || format!("seed {seed}, {name}:\n{f}\n{seg}");
    // Well formed, accepted, runnable in order, maps consistent.
    let mut available: std::collections::HashSet<ValId> = f.inputs().iter().copied().collect();
    for (k, s) in seg.segments().iter().enumerate() {
        nvfuser_core::ir::verify(s.fusion())
            .unwrap_or_else(|e| panic!("segment {k}: {e}\n{}", ctx()));
        assert_eq!(
            rule(s.fusion()).ok(),
            Some(s.scheduler()),
            "segment {k}\n{}",
            ctx()
        );
        for x in s.inputs() {
            let v = match x {
                SegmentValue::Val(v) => *v,
                SegmentValue::Extent(e) => e.tensor,
            };
            assert!(
                available.contains(&v),
                "segment {k} reads {v} too early\n{}",
                ctx()
            );
        }
        available.extend(s.outputs().iter().copied());
        for &v in seg.release_after(k) {
            for later in &seg.segments()[k + 1..] {
                assert!(!later.inputs().contains(&SegmentValue::Val(v)), "{}", ctx());
            }
        }
    }
    let inputs: Vec<EvalInput> = f
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            EvalInput::Tensor(HostTensor::random(
                f.val(i).dtype,
                &[5, 7],
                seed * 7 + k as u64,
            ))
        })
        .collect();
    let whole = evaluate(f, &inputs).unwrap();
    let parts = seg.evaluate(&inputs).unwrap();
    for (k, (a, b)) in parts.iter().zip(&whole).enumerate() {
        let tol = match b.dtype() {
            DataType::F32 => Tolerance::new(1e-4, 1e-4),
            d => Tolerance::for_dtype(d),
        };
        compare(a, b, tol).unwrap_or_else(|m| panic!("output {k}: {m}\n{}", ctx()));
    }
    seg.segments().len()
}

#[test]
fn random_fusions_segment_soundly() {
    let rules: [(&str, Rule<'_>); 6] = [
        ("accept all", &accept_all),
        ("one reduction shape", &one_reduction_shape),
        ("no broadcast of a reduction", &no_broadcast_of_reduction),
        ("at most four", &at_most_four),
        ("arbitrary", &arbitrary),
        ("registry", &can_schedule),
    ];
    let mut segments = [0usize; 6];
    let mut exprs = 0;
    for seed in 0..100 {
        let f = random_fusion(seed, 4 + (seed as usize % 25));
        exprs += f.num_exprs();
        for (k, (name, rule)) in rules.iter().enumerate() {
            segments[k] += check(seed, &f, name, *rule);
        }
    }
    println!("{exprs} expressions; segments per rule: {segments:?}");
    // Every rule but "accept all" splits something (segment_set splits even there).
    assert!(segments.iter().all(|&n| n > 100), "{segments:?}");
}

/// GPU fuzz seed 9810677: greedy merging trusted a topological numbering that an
/// earlier merge of the same sweep had made stale, merged two groups into a cycle, and
/// the input-sibling pass then panicked ("no entry found for key") on the group the
/// cyclic graph left out of its order.
#[test]
fn greedy_merging_keeps_the_groups_acyclic() {
    let src = "fn fuzz_case(
    #[layout(contiguity = [false, false, _, false])] t0: Tensor<f64, [_, _, 1, _]>,
) -> (Tensor<f64, [_, _, 1, _]>, Tensor<f64, [_, _, 1, _]>) {
    let t1 = t0 < t0;
    let t2 = t0.gelu_tanh();
    let t3 = t2.gelu_tanh();
    let t5 = t0.var([1], 1);
    let t6 = t5.broadcast([false, true, false, false]);
    let t7 = t3.slice([.., .., (0, -1, 2), ..]);
    let s8 = t3.size(1);
    let t9 = t6.expand([-1, s8, -1, -1]);
    let t10 = t7.minimum(t9);
    let (t11, t12) = t10.var_mean([0, 1, 2, 3], 1);
    let t13 = t12.broadcast([true, true, true, true]);
    let t14 = where_(t1, t6, t13);
    (t14, t2)
}";
    let f = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    for sizes in [[1i64, 1, 1, 1], [16, 4, 1, 255]] {
        let info = nvfuser_core::scheduler::RuntimeInfo::contiguous(
            nvfuser_core::scheduler::DeviceInfo::h100_for_tests(),
            &[(DataType::F64, &sizes)],
        );
        let plan = nvfuser_core::plan::plan(&f, &info).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert!(plan.segmented && plan.segments.len() >= 2, "{plan}");
    }
}
