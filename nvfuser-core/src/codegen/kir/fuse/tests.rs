//! Tests of sibling loop fusion and load deduplication on hand-built kernel IR.
use super::*;
use crate::codegen::kir::{BinOp, CType};
use crate::dtype::DataType;

fn serial(var: &str, n: &str, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        var: var.into(),
        extent: Idx::var(n),
        unroll: false,
        body,
    }
}

/// `ARR[0..8] = input[row * 8 + k]` for the row `var`.
fn load(arr: &str, input: &str, var: &str, k: &str) -> Vec<Stmt> {
    vec![
        Stmt::Alloc {
            name: arr.into(),
            dtype: DataType::F32,
            size: 8,
        },
        Stmt::For {
            var: k.into(),
            extent: Idx::Const(8),
            unroll: true,
            body: vec![Stmt::Assign {
                lhs: Expr::elem(arr, Idx::var(k)),
                rhs: Expr::elem(
                    input,
                    Idx::Add(
                        Box::new(Idx::Mul(Box::new(Idx::var(var)), Box::new(Idx::Const(8)))),
                        Box::new(Idx::var(k)),
                    ),
                ),
            }],
        },
    ]
}

/// `acc += arr[0] * scale`.
fn accumulate(acc: &str, arr: &str, scale: Expr) -> Stmt {
    Stmt::Assign {
        lhs: Expr::var(acc),
        rhs: Expr::var(acc).bin(
            BinOp::Add,
            Expr::elem(arr, Idx::Const(0)).bin(BinOp::Mul, scale),
        ),
    }
}

fn decl(name: &str, init: Expr) -> Stmt {
    Stmt::Decl {
        konst: false,
        ty: CType::Data(DataType::F32),
        name: name.into(),
        init,
    }
}

fn zero() -> Expr {
    Expr::Lit(crate::dtype::ScalarValue::from(0.0f32), DataType::F32)
}

fn grid_reduce(acc: &str) -> Stmt {
    Stmt::Decl {
        konst: true,
        ty: CType::Data(DataType::Bool),
        name: format!("{acc}_last"),
        init: Expr::call(
            Func::GridReduce,
            vec![
                Expr::var(acc),
                Expr::var(format!("{acc}_work")),
                Expr::var("blockIdx.y"),
            ],
        ),
    }
}

/// Two column sums over the same rows, each with its accumulator and grid finish, as
/// the outer reduction scheduler lowers LayerNorm backward's `dw` and `db`.
fn two_column_sums(second_scale: Expr) -> Vec<Stmt> {
    let mut a_body = load("T1", "T0", "i0", "i1");
    a_body.push(accumulate("A_acc", "T1", Expr::var("w")));
    let mut b_body = load("T2", "T0", "i2", "i3");
    b_body.push(accumulate("B_acc", "T2", second_scale));
    vec![
        decl("A_acc", zero()),
        serial("i0", "rows", a_body),
        grid_reduce("A_acc"),
        Stmt::Comment("accumulator of B".into()),
        decl("B_acc", zero()),
        serial("i2", "rows", b_body),
        grid_reduce("B_acc"),
    ]
}

fn loops(stmts: &[Stmt]) -> Vec<&Stmt> {
    stmts
        .iter()
        .filter(|s| matches!(s, Stmt::For { unroll: false, .. }))
        .collect()
}

#[test]
fn independent_sums_over_the_same_rows_share_one_loop_and_one_load() {
    let mut k = two_column_sums(Expr::var("v"));
    assert_eq!(fuse_sibling_loops(&mut k), 1);
    // B's accumulator (and its comment) moved above the fused loop; both grid
    // reductions follow it, in their order.
    let kinds: Vec<String> = k
        .iter()
        .map(|s| match s {
            Stmt::Decl { name, .. } => name.clone(),
            Stmt::For { var, .. } => format!("for {var}"),
            Stmt::Comment(_) => "//".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["A_acc", "//", "B_acc", "for i0", "A_acc_last", "B_acc_last"]
    );
    let Stmt::For { body, .. } = loops(&k)[0] else {
        unreachable!()
    };
    // One load of T0 into T1; B's accumulation reads T1 with the fused loop's index.
    let allocs: Vec<&str> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Alloc { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(allocs, ["T1"]);
    assert_eq!(body.len(), 4, "{body:#?}");
    assert_eq!(
        body[3],
        accumulate("B_acc", "T1", Expr::var("v")),
        "{body:#?}"
    );
}

#[test]
fn an_accumulator_reset_between_the_loops_moves_above_them() {
    // The accumulators are register arrays of the kernel's top, each set to zero
    // just before its loop.
    let mut k = two_column_sums(Expr::var("v"));
    k[4] = Stmt::Assign {
        lhs: Expr::var("B_acc"),
        rhs: zero(),
    };
    k.insert(0, decl("B_acc", zero()));
    assert_eq!(fuse_sibling_loops(&mut k), 1);
    assert!(matches!(&k[3], Stmt::Assign { lhs, .. } if *lhs == Expr::var("B_acc")));
    assert!(matches!(&k[4], Stmt::For { var, .. } if var == "i0"));
    assert_eq!(loops(&k).len(), 1);
}

#[test]
fn a_loop_reading_the_first_loops_result_is_not_fused() {
    // B scales by A's finished sum: it must run after A's grid reduction.
    let mut k = two_column_sums(Expr::var("A_acc"));
    let before = k.clone();
    assert_eq!(fuse_sibling_loops(&mut k), 0);
    assert_eq!(k, before);
}

#[test]
fn a_loop_reading_a_value_computed_after_the_first_is_not_fused() {
    let mut k = two_column_sums(Expr::var("m"));
    // `m` is declared between the loops from A's partial sum.
    k.insert(3, decl("m", Expr::var("A_acc")));
    let before = k.clone();
    assert_eq!(fuse_sibling_loops(&mut k), 0);
    assert_eq!(k, before);
}

#[test]
fn loops_of_different_trip_counts_or_with_barriers_are_not_fused() {
    let mut k = two_column_sums(Expr::var("v"));
    if let Stmt::For { extent, .. } = &mut k[5] {
        *extent = Idx::var("cols");
    }
    assert_eq!(fuse_sibling_loops(&mut k), 0);

    let mut k = two_column_sums(Expr::var("v"));
    if let Stmt::For { body, .. } = &mut k[5] {
        body.push(Stmt::Sync("shared buffer".into()));
    }
    assert_eq!(fuse_sibling_loops(&mut k), 0);
}

#[test]
fn loads_of_different_elements_are_both_kept() {
    let mut k = two_column_sums(Expr::var("v"));
    // B loads the next row: same array shape, different addresses.
    if let Stmt::For { body, .. } = &mut k[5] {
        body.splice(0..2, load("T2", "T9", "i2", "i3"));
    }
    assert_eq!(fuse_sibling_loops(&mut k), 1);
    let Stmt::For { body, .. } = loops(&k)[0] else {
        unreachable!()
    };
    let allocs = body
        .iter()
        .filter(|s| matches!(s, Stmt::Alloc { .. }))
        .count();
    assert_eq!(allocs, 2);
}

#[test]
fn a_load_is_not_reused_after_its_array_is_written_again() {
    let mut body = load("T1", "T0", "i0", "i1");
    body.push(Stmt::Assign {
        lhs: Expr::elem("T1", Idx::Const(0)),
        rhs: zero(),
    });
    body.extend(load("T2", "T0", "i0", "i3"));
    let before = body.clone();
    dedup_loads(&mut body);
    assert_eq!(body, before);
}

/// `ARR[0..8] = input[row * 8 ..]` as one vector copy (a vectorized load).
fn vector_load(arr: &str, input: &str, var: &str) -> Vec<Stmt> {
    let at = Idx::Mul(Box::new(Idx::var(var)), Box::new(Idx::Const(8)));
    vec![
        Stmt::Alloc {
            name: arr.into(),
            dtype: DataType::F32,
            size: 8,
        },
        Stmt::VecCopy {
            dtype: DataType::F32,
            width: 8,
            dst: Expr::elem(arr, Idx::Const(0)).addr_of(),
            src: Expr::elem(input, at).addr_of(),
        },
    ]
}

/// Vector loads read their source: two column sums loading the same input rows with
/// vectors fuse, as with element loads (a vector copy's source counted as written kept
/// the vectorized outer reduction's `dw` and `db` loops apart).
#[test]
fn sums_over_vector_loads_of_one_input_share_one_loop() {
    let mut a_body = vector_load("T1", "T0", "i0");
    a_body.push(accumulate("A_acc", "T1", Expr::var("w")));
    let mut b_body = vector_load("T2", "T0", "i2");
    b_body.push(accumulate("B_acc", "T2", Expr::var("v")));
    let mut k = vec![
        decl("A_acc", zero()),
        serial("i0", "rows", a_body),
        grid_reduce("A_acc"),
        decl("B_acc", zero()),
        serial("i2", "rows", b_body),
        grid_reduce("B_acc"),
    ];
    assert_eq!(fuse_sibling_loops(&mut k), 1);
    assert_eq!(loops(&k).len(), 1);
    // A vector store into a global tensor the other loop reads still keeps them apart.
    let mut a_body = vector_load("T1", "T0", "i0");
    a_body.push(Stmt::VecCopy {
        dtype: DataType::F32,
        width: 8,
        dst: Expr::elem("T5", Idx::var("i0")).addr_of(),
        src: Expr::elem("T1", Idx::Const(0)).addr_of(),
    });
    let mut b_body = vector_load("T2", "T5", "i2");
    b_body.push(accumulate("B_acc", "T2", Expr::var("v")));
    let mut k = vec![
        serial("i0", "rows", a_body),
        decl("B_acc", zero()),
        serial("i2", "rows", b_body),
    ];
    assert_eq!(fuse_sibling_loops(&mut k), 0);
}
