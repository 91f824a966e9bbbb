//! Every GPU test target is gated by the `gpu-tests` feature: a `tests/gpu_*.rs` file
//! without its `[[test]]` entry would build in a plain `cargo test`, find no GPU, and
//! count its skipped tests as passed.

use std::fs;
use std::path::Path;

#[test]
fn every_gpu_test_target_requires_the_gpu_tests_feature() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let mut gpu_files: Vec<String> = fs::read_dir(dir.join("tests"))
        .expect("tests/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gpu_") && n.ends_with(".rs"))
        .collect();
    gpu_files.sort();
    assert!(!gpu_files.is_empty());
    let missing: Vec<&String> = gpu_files
        .iter()
        .filter(|f| {
            let entry = format!(
                "[[test]]\nname = \"{}\"\nrequired-features = [\"gpu-tests\"]",
                f.trim_end_matches(".rs")
            );
            !manifest.contains(&entry)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "add a [[test]] entry with required-features = [\"gpu-tests\"] to nvfuser-cuda/Cargo.toml for {missing:?}"
    );
}
