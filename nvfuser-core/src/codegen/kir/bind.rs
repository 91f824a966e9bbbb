//! Named index subexpressions for statements whose index math would be too large to
//! spell inline.
//!
//! Index expressions are trees: a reshape's producer index divides and takes the
//! remainder of its consumer's index, so each reshape in a chain copies the index below
//! it twice, and a `where` (or any op) that reads one recomputed value three times copies
//! all of that three times. A fuzzed chain of three reshapes under a `where` gave a
//! single statement of 2 MB of CUDA, which NVRTC took minutes to compile.
//!
//! [`bind_large_indices`] rewrites each statement of more than [`LARGE`] index nodes
//! bottom-up: every subexpression of at least [`BIND_NODES`] nodes becomes a
//! `const nvfuser_index_t nvf_ixN` declared just before the statement (one declaration
//! per distinct subexpression), so the statement and its declarations grow linearly with
//! the fusion. Index math is pure integer arithmetic on loop variables, thread builtins,
//! scalars and shape fields, so computing it before the statement (even where the
//! statement would have skipped it, behind `?:` or `&&`) changes no value and reads no
//! memory; subexpressions that hold a kernel value ([`Idx::Value`], a data-dependent
//! index) are left in place. Statements below the threshold, which is every statement of
//! the benchmark and corpus kernels, are untouched.

use std::collections::HashMap;

use super::{CType, Expr, Idx, Stmt};

/// Index nodes in one statement above which its index math is bound to names.
pub const LARGE: usize = 4096;

/// The size from which a subexpression of a large statement gets a name.
pub const BIND_NODES: usize = 8;

/// Binds the index math of every large statement in `stmts` (and in the bodies below)
/// to named constants; returns the number of names declared.
pub fn bind_large_indices(stmts: &mut Vec<Stmt>) -> usize {
    let mut b = Binder::default();
    b.list(stmts);
    b.next
}

#[derive(Default)]
struct Binder {
    next: usize,
}

/// The names bound for one statement, and their declarations in order.
#[derive(Default)]
struct Scope {
    names: HashMap<Idx, String>,
    decls: Vec<Stmt>,
}

impl Binder {
    fn list(&mut self, stmts: &mut Vec<Stmt>) {
        let mut out = Vec::with_capacity(stmts.len());
        for mut s in stmts.drain(..) {
            let mut scope = Scope::default();
            match &mut s {
                Stmt::For { body, .. } => self.list(body),
                Stmt::If { cond, body } => {
                    self.list(body);
                    self.exprs(cond.iter_mut().collect(), &mut scope);
                }
                Stmt::Decl { init, .. } => self.exprs(vec![init], &mut scope),
                Stmt::Assign { lhs, rhs } => self.exprs(vec![lhs, rhs], &mut scope),
                Stmt::VecCopy { dst, src, .. } => self.exprs(vec![dst, src], &mut scope),
                Stmt::Call { args, .. } => self.exprs(args.iter_mut().collect(), &mut scope),
                Stmt::BlockReduce { acc, .. } => self.exprs(vec![acc], &mut scope),
                Stmt::Comment(_) | Stmt::Alloc { .. } | Stmt::Sync(_) => {}
            }
            out.append(&mut scope.decls);
            out.push(s);
        }
        *stmts = out;
    }

    /// Binds the index math of one statement's expressions, if they are large.
    fn exprs(&mut self, es: Vec<&mut Expr>, scope: &mut Scope) {
        let nodes: usize = es.iter().map(|e| expr_nodes(e)).sum();
        if nodes <= LARGE {
            return;
        }
        for e in es {
            self.expr(e, scope);
        }
    }

    fn expr(&mut self, e: &mut Expr, scope: &mut Scope) {
        if let Some(i) = e.own_idx_mut() {
            self.idx(i, scope);
        }
        e.for_each_child_mut(|c| self.expr(c, scope));
    }

    /// Rewrites `i` bottom-up with its large subexpressions named; returns its size after,
    /// or `None` when it holds a kernel value ([`Idx::Value`]: it may read memory, so it
    /// and everything above it stay in place).
    fn idx(&mut self, i: &mut Idx, scope: &mut Scope) -> Option<usize> {
        if matches!(i, Idx::Value(_)) {
            return None;
        }
        let Some((a, b)) = i.operands_mut() else {
            return Some(1);
        };
        let (na, nb) = (self.idx(a, scope), self.idx(b, scope));
        let n = na? + nb? + 1;
        if n < BIND_NODES {
            return Some(n);
        }
        let name = match scope.names.get(i) {
            Some(name) => name.clone(),
            None => {
                let name = format!("nvf_ix{}", self.next);
                self.next += 1;
                scope.decls.push(Stmt::Decl {
                    konst: true,
                    ty: CType::Index,
                    name: name.clone(),
                    init: Expr::Idx(i.clone()),
                });
                scope.names.insert(i.clone(), name.clone());
                name
            }
        };
        *i = Idx::Var(name);
        Some(1)
    }
}

fn expr_nodes(e: &Expr) -> usize {
    let mut n = e.own_idx().map_or(0, idx_nodes);
    e.for_each_child(|c| n += expr_nodes(c));
    n
}

fn idx_nodes(i: &Idx) -> usize {
    match (i, i.operands()) {
        (_, Some((a, b))) => 1 + idx_nodes(a) + idx_nodes(b),
        (Idx::Value(e), None) => 1 + expr_nodes(e),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;

    /// The index of a chain of `depth` reshapes: each level divides and takes the
    /// remainder of the level below, so the tree doubles at each level.
    fn chain(depth: usize) -> Idx {
        let mut i = Idx::Add(
            Box::new(Idx::Mul(
                Box::new(Idx::var("blockIdx.x")),
                Box::new(Idx::Const(128)),
            )),
            Box::new(Idx::var("threadIdx.x")),
        );
        for k in 0..depth {
            let size = Idx::Shape {
                param: "T0_shape".into(),
                field: super::super::ShapeField::Size,
                axis: k % 3,
            };
            i = Idx::Add(
                Box::new(Idx::Mul(
                    Box::new(Idx::Div(Box::new(i.clone()), Box::new(size.clone()))),
                    Box::new(Idx::Const(7)),
                )),
                Box::new(Idx::Mod(Box::new(i), Box::new(size))),
            );
        }
        i
    }

    fn load(i: Idx) -> Stmt {
        Stmt::Assign {
            lhs: Expr::elem("T1", Idx::var("i0")),
            rhs: Expr::elem("T0", i).cast(DataType::F32),
        }
    }

    #[test]
    fn small_statements_are_left_as_they_are() {
        let mut k = vec![load(chain(3))];
        let before = k.clone();
        assert_eq!(bind_large_indices(&mut k), 0);
        assert_eq!(k, before);
    }

    #[test]
    fn a_doubling_index_is_bound_to_one_name_per_level() {
        let depth = 12;
        let mut k = vec![load(chain(depth))];
        assert!(idx_nodes(&chain(depth)) > LARGE);
        let bound = bind_large_indices(&mut k);
        // One name per distinct subexpression: linear in the depth, not exponential.
        assert!((depth..=4 * depth).contains(&bound), "{bound} names");
        assert_eq!(k.len(), bound + 1);
        let nodes: usize = k
            .iter()
            .map(|s| match s {
                Stmt::Decl { init, .. } => expr_nodes(init),
                Stmt::Assign { rhs, .. } => expr_nodes(rhs),
                _ => 0,
            })
            .sum();
        assert!(nodes < 40 * depth, "{nodes} nodes after binding");
        // Each name is declared before its first use, and the statement reads the last.
        let mut declared = std::collections::HashSet::new();
        for s in &k {
            let mut used = Vec::new();
            if let Stmt::Decl { init, .. } | Stmt::Assign { rhs: init, .. } = s {
                collect_vars(init, &mut used);
            }
            for u in used.iter().filter(|u| u.starts_with("nvf_ix")) {
                assert!(declared.contains(u), "{u} used before its declaration");
            }
            if let Stmt::Decl { name, .. } = s {
                declared.insert(name.clone());
            }
        }
    }

    #[test]
    fn data_dependent_indices_stay_in_place() {
        let gathered = Idx::Value(Box::new(Expr::elem("T2", Idx::var("i0"))));
        let big = Idx::Add(Box::new(chain(12)), Box::new(gathered.clone()));
        let mut k = vec![load(big)];
        bind_large_indices(&mut k);
        let Some(Stmt::Assign { rhs, .. }) = k.last() else {
            unreachable!()
        };
        let mut found = false;
        find_value(rhs, &gathered, &mut found);
        assert!(
            found,
            "the gathered index is still read by the statement itself"
        );
        for s in &k[..k.len() - 1] {
            let Stmt::Decl { init, .. } = s else {
                unreachable!()
            };
            let mut inside = false;
            find_value(init, &gathered, &mut inside);
            assert!(!inside, "a data-dependent index was hoisted");
        }
    }

    /// The variables of `e`'s indices, outside kernel values.
    fn collect_vars(e: &Expr, out: &mut Vec<String>) {
        fn idx(i: &Idx, out: &mut Vec<String>) {
            if let Idx::Var(v) = i {
                out.push(v.clone());
            }
            if let Some((a, b)) = i.operands() {
                idx(a, out);
                idx(b, out);
            }
        }
        if let Some(i) = e.own_idx() {
            idx(i, out);
        }
        e.for_each_child(|c| collect_vars(c, out));
    }

    /// Whether `want` is a subexpression of one of `e`'s indices.
    fn find_value(e: &Expr, want: &Idx, found: &mut bool) {
        fn idx(i: &Idx, want: &Idx, found: &mut bool) {
            *found |= i == want;
            if let Some((a, b)) = i.operands() {
                idx(a, want, found);
                idx(b, want, found);
            }
        }
        if let Some(i) = e.own_idx() {
            idx(i, want, found);
        }
        e.for_each_child(|c| find_value(c, want, found));
    }
}
