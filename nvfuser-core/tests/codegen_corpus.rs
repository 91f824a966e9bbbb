//! Snapshot tests of the manual-schedule corpus: scheduled IR and generated CUDA.
//! Update with `INSTA_UPDATE=always cargo test -p nvfuser-core --test codegen_corpus`.

use nvfuser_core::codegen::{corpus, generate, KernelOptions};

fn check(name: &str) {
    let all = corpus::all().expect("corpus schedules");
    let (_, sf) = all
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("corpus entry");
    let opts = KernelOptions {
        name: name.to_string(),
        ..Default::default()
    };
    let k = generate(&sf, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    insta::assert_snapshot!(format!("{name}_scheduled"), sf.scheduled_ir());
    let src = k.cuda_source();
    let body = src
        .split("// ---- end of runtime support ----\n")
        .nth(1)
        .unwrap_or(&src);
    let mut text = format!(
        "launch: grid {:?} block {:?}\n",
        k.launch
            .grid
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
        k.launch
            .block
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    for r in &k.requirements {
        text.push_str(&format!("requires: {r:?}\n"));
    }
    text.push_str(body);
    insta::assert_snapshot!(format!("{name}_cuda"), text);
}

#[test]
fn pointwise_split128() {
    check("pointwise_split128");
}

#[test]
fn pointwise_vectorize4_f32() {
    check("pointwise_vectorize4_f32");
}

#[test]
fn pointwise_vectorize8_bf16() {
    check("pointwise_vectorize8_bf16");
}

#[test]
fn inner_sum_rfactor() {
    check("inner_sum_rfactor");
}

#[test]
fn softmax_row_in_registers() {
    check("softmax_row_in_registers");
}

#[test]
fn nondivisible_split() {
    check("nondivisible_split");
}

#[test]
fn broadcast_add() {
    check("broadcast_add");
}

#[test]
fn outer_sum() {
    check("outer_sum");
}

#[test]
fn softmax_row_in_shared() {
    check("softmax_row_in_shared");
}

#[test]
fn layer_norm_bf16() {
    check("layer_norm_bf16");
}

#[test]
fn rms_norm_bf16() {
    check("rms_norm_bf16");
}

#[test]
fn welford_three_outputs() {
    check("welford_three_outputs");
}

#[test]
fn inner_sum_grid() {
    check("inner_sum_grid");
}

#[test]
fn inner_sum_2d_block() {
    check("inner_sum_2d_block");
}

#[test]
fn resize_slice_pad_cat() {
    check("resize_slice_pad_cat");
}

#[test]
fn reshape_view() {
    check("reshape_view");
}

#[test]
fn gather_select() {
    check("gather_select");
}

#[test]
fn every_kernel_is_self_contained() {
    for (name, sf) in corpus::all().unwrap() {
        let k = generate(&sf, &KernelOptions::default()).unwrap();
        let src = k.cuda_source();
        assert!(!src.contains("#include"), "{name} includes a header");
        assert!(src.contains("extern \"C\" __global__"), "{name}");
        assert!(src.contains("__restrict__"), "{name}");
    }
}

#[test]
fn int_div_mod() {
    check("int_div_mod");
}

/// Kernels with data-dependent reads or integer division take the error buffer last,
/// and every check site writes it; kernels without them take no such parameter.
#[test]
fn checked_kernels_take_the_error_buffer() {
    use nvfuser_core::codegen::{CheckKind, ParamKind};
    for (name, sf) in corpus::all().unwrap() {
        let k = generate(&sf, &KernelOptions::default()).unwrap();
        let src = k.cuda_source();
        let body = src
            .split("// ---- end of runtime support ----\n")
            .nth(1)
            .unwrap();
        let checked = matches!(name, "gather_select" | "int_div_mod");
        assert_eq!(k.abi.error_checks().is_some(), checked, "{name}");
        if !checked {
            assert!(!body.contains("nvf_err"), "{name}");
            continue;
        }
        let last = k.abi.params.last().unwrap();
        assert!(matches!(last.kind, ParamKind::ErrorFlag { .. }), "{name}");
        assert!(
            body.contains("unsigned long long* __restrict__ nvf_err)"),
            "{name}: {body}"
        );
        let checks = k.abi.error_checks().unwrap();
        let fp = nvfuser_core::codegen::checks::fingerprint(checks);
        for (site, c) in checks.iter().enumerate() {
            let code = format!(
                "0x{:016x}ull",
                nvfuser_core::codegen::checks::code(fp, site)
            );
            assert!(
                body.contains(&code),
                "{name}: site {site} ({c:?}) writes {code}"
            );
        }
        if name == "gather_select" {
            // take_along_axis and index_select, not select (host-checked).
            let ops: Vec<&str> = checks.iter().map(|c| c.op.as_str()).collect();
            assert_eq!(ops, ["take_along_axis", "index_select"]);
            assert_eq!(checks[0].kind, CheckKind::Index { axis: 1 });
            assert_eq!(checks[1].kind, CheckKind::Index { axis: 0 });
            assert!(body.contains("nvf_check_index(nvf_err"));
        } else {
            let ops: Vec<&str> = checks.iter().map(|c| c.op.as_str()).collect();
            assert_eq!(ops, ["div", "fmod", "remainder"]);
            assert!(checks.iter().all(|c| c.kind == CheckKind::DivisionByZero));
            assert_eq!(checks[0].expr, "T2 = T0 / T1");
            for helper in [
                "nvf_div_checked",
                "nvf_fmod_checked",
                "nvf_remainder_checked",
            ] {
                assert!(
                    body.contains(&format!("{helper}(nvf_err, ")),
                    "{name}: {helper}"
                );
            }
        }
    }
}

/// Fuzzer seed 226: a tensor the fusion returns twice is one parameter pair of the
/// tuned kernel's signature (it was listed twice: NVRTC "duplicate parameter name").
#[test]
fn output_returned_twice_is_one_parameter() {
    use nvfuser_core::scheduler::{compute_heuristics, schedule_with, DeviceInfo, RuntimeInfo};
    let src = r#"
fn twice(t0: Tensor<i32, [_, _]>) -> (Tensor<i32, [_, _]>, Tensor<i32, [_, _]>) {
    let t1 = t0 + t0;
    (t1, t1)
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(nvfuser_core::DataType::I32, &[100, 128])],
    );
    let params = compute_heuristics(&fusion, &info).unwrap();
    let sf = schedule_with(&fusion, &params).unwrap();
    let k = generate(&sf, &KernelOptions::default()).unwrap();
    let src = k.cuda_source();
    let body = src
        .split("// ---- end of runtime support ----\n")
        .nth(1)
        .unwrap_or(&src);
    assert_eq!(body.matches("__restrict__ T1,").count(), 1, "{body}");
    insta::assert_snapshot!("output_returned_twice_cuda", body);
}
