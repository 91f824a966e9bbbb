//! Round trips: fusion -> reproducer -> parse -> build gives a structurally equal fusion.

mod print_corpus;

use nvfuser_core::dsl;
use nvfuser_core::prelude::*;

/// Prints `fusion` as a reproducer, rebuilds it, and checks equality and hash.
fn round_trip(name: &str, fusion: &Fusion) -> Fusion {
    let src = fusion.to_reproducer(name);
    assert_eq!(src, fusion.to_reproducer(name), "printing is deterministic");
    let built = dsl::build_str(&src).unwrap_or_else(|errs| {
        let msgs: String = errs.iter().map(|e| e.render(&src)).collect();
        panic!("{name}: the reproducer does not build:\n{msgs}\n{src}")
    });
    let (rebuilt, _) = built.into_iter().next().expect("one fn");
    assert!(
        rebuilt == *fusion,
        "{name}: not structurally equal\noriginal:\n{fusion}\nrebuilt:\n{rebuilt}\nsource:\n{src}"
    );
    assert_eq!(
        rebuilt.structural_hash(),
        fusion.structural_hash(),
        "{name}"
    );
    let ops = |f: &Fusion| f.exprs().map(|(_, e)| e.op.clone()).collect::<Vec<_>>();
    assert_eq!(ops(&rebuilt), ops(fusion), "{name}: expression order");
    // Names follow arena indices, and a rebuilt fusion places constants where they are
    // used; from the second generation on, printing is a fixed point.
    let again = rebuilt.to_reproducer(name);
    let third = dsl::build_str(&again).unwrap().remove(0).0;
    assert_eq!(
        third.to_reproducer(name),
        again,
        "{name}: reprinting is a fixed point"
    );
    rebuilt
}

#[test]
fn corpus_round_trips() {
    for (name, fusion) in print_corpus::corpus() {
        round_trip(name, &fusion);
        let wrapped = nvfuser_core::print::reproducer(
            &fusion,
            name,
            &nvfuser_core::print::ReproducerOptions {
                wrap_in_macro: true,
                public: true,
            },
        );
        let built = dsl::build_str(&wrapped).unwrap();
        assert!(built[0].0 == fusion, "{name}: wrapped form");
    }
}

#[test]
fn a_thousand_op_fusion_round_trips() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 1024]).unwrap();
    let mut y = fd.cast(x, DataType::F32).unwrap();
    for i in 0..1000 {
        y = match i % 5 {
            0 => fd.exp(y).unwrap(),
            1 => {
                let c = fd.constant(i as f64 * 0.5);
                fd.mul(y, c).unwrap()
            }
            2 => fd
                .sum(y, &[1], true)
                .map(|s| fd.sub(y, s))
                .unwrap()
                .unwrap(),
            3 => fd.tanh(y).unwrap(),
            _ => fd.add(y, y).unwrap(),
        };
    }
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    let fusion = fd.finish().unwrap();
    assert!(fusion.num_exprs() > 1000);
    round_trip("big", &fusion);
}
