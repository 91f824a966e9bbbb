//! trybuild UI tests of `fusion!`: one compile-fail file per user error (tests/ui/fail,
//! with the reviewed compiler output in the `.stderr` next to it) and compile-pass files
//! covering every op family (tests/ui/pass; each `main` runs and checks the built fusion).
//!
//! `TRYBUILD=overwrite cargo test --test macro_ui` rewrites the `.stderr` files; review
//! the diff. The toolchain is pinned (rust-toolchain.toml), so the output is stable.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
