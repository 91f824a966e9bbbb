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
        match e {
            Expr::Idx(i) | Expr::Elem(_, i) => {
                let taken = std::mem::replace(i, Idx::Const(0));
                *i = self.idx(taken, scope).0;
            }
            Expr::Cast(_, a) | Expr::AddrOf(a) | Expr::Paren(a) => self.expr(a, scope),
            Expr::Bin(_, a, b) => {
                self.expr(a, scope);
                self.expr(b, scope);
            }
            Expr::Call(_, args) => args.iter_mut().for_each(|a| self.expr(a, scope)),
            Expr::Select(c, a, b) => {
                self.expr(c, scope);
                self.expr(a, scope);
                self.expr(b, scope);
            }
            Expr::Var(_) | Expr::Lit(..) | Expr::Code(_) | Expr::NullPtr(_) | Expr::Functor(_) => {}
        }
    }

    /// `i` rewritten bottom-up with its large subexpressions named, and its size after.
    fn idx(&mut self, i: Idx, scope: &mut Scope) -> (Idx, usize) {
        let two = |s: &mut Self, a: Box<Idx>, b: Box<Idx>, scope: &mut Scope| {
            let (a, na) = s.idx(*a, scope);
            let (b, nb) = s.idx(*b, scope);
            (Box::new(a), Box::new(b), na + nb + 1)
        };
        let (out, n) = match i {
            Idx::Const(_) | Idx::Var(_) | Idx::Shape { .. } => return (i, 1),
            // A kernel value: left where it is (it may read memory).
            Idx::Value(_) => return (i, usize::MAX / 4),
            Idx::Add(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Add(a, b), n)
            }
            Idx::Mul(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Mul(a, b), n)
            }
            Idx::Div(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Div(a, b), n)
            }
            Idx::Mod(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Mod(a, b), n)
            }
            Idx::CeilDiv(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::CeilDiv(a, b), n)
            }
            Idx::Sub(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Sub(a, b), n)
            }
            Idx::Max(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Max(a, b), n)
            }
            Idx::Min(a, b) => {
                let (a, b, n) = two(self, a, b, scope);
                (Idx::Min(a, b), n)
            }
        };
        if !(BIND_NODES..usize::MAX / 4).contains(&n) {
            return (out, n.min(usize::MAX / 4));
        }
        if let Some(name) = scope.names.get(&out) {
            return (Idx::Var(name.clone()), 1);
        }
        let name = format!("nvf_ix{}", self.next);
        self.next += 1;
        scope.decls.push(Stmt::Decl {
            konst: true,
            ty: CType::Index,
            name: name.clone(),
            init: Expr::Idx(out.clone()),
        });
        scope.names.insert(out, name.clone());
        (Idx::Var(name), 1)
    }
}

fn expr_nodes(e: &Expr) -> usize {
    match e {
        Expr::Idx(i) | Expr::Elem(_, i) => idx_nodes(i),
        Expr::Cast(_, a) | Expr::AddrOf(a) | Expr::Paren(a) => expr_nodes(a),
        Expr::Bin(_, a, b) => expr_nodes(a) + expr_nodes(b),
        Expr::Call(_, args) => args.iter().map(expr_nodes).sum(),
        Expr::Select(c, a, b) => expr_nodes(c) + expr_nodes(a) + expr_nodes(b),
        Expr::Var(_) | Expr::Lit(..) | Expr::Code(_) | Expr::NullPtr(_) | Expr::Functor(_) => 0,
    }
}

fn idx_nodes(i: &Idx) -> usize {
    match i {
        Idx::Const(_) | Idx::Var(_) | Idx::Shape { .. } => 1,
        Idx::Value(e) => 1 + expr_nodes(e),
        Idx::Add(a, b)
        | Idx::Mul(a, b)
        | Idx::Div(a, b)
        | Idx::Mod(a, b)
        | Idx::CeilDiv(a, b)
        | Idx::Sub(a, b)
        | Idx::Max(a, b)
        | Idx::Min(a, b) => 1 + idx_nodes(a) + idx_nodes(b),
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

    fn collect_vars(e: &Expr, out: &mut Vec<String>) {
        fn idx(i: &Idx, out: &mut Vec<String>) {
            match i {
                Idx::Var(v) => out.push(v.clone()),
                Idx::Add(a, b)
                | Idx::Mul(a, b)
                | Idx::Div(a, b)
                | Idx::Mod(a, b)
                | Idx::CeilDiv(a, b)
                | Idx::Sub(a, b)
                | Idx::Max(a, b)
                | Idx::Min(a, b) => {
                    idx(a, out);
                    idx(b, out);
                }
                _ => {}
            }
        }
        match e {
            Expr::Idx(i) | Expr::Elem(_, i) => idx(i, out),
            Expr::Cast(_, a) => collect_vars(a, out),
            _ => {}
        }
    }

    fn find_value(e: &Expr, want: &Idx, found: &mut bool) {
        fn idx(i: &Idx, want: &Idx, found: &mut bool) {
            if i == want {
                *found = true;
            }
            match i {
                Idx::Add(a, b)
                | Idx::Mul(a, b)
                | Idx::Div(a, b)
                | Idx::Mod(a, b)
                | Idx::CeilDiv(a, b)
                | Idx::Sub(a, b)
                | Idx::Max(a, b)
                | Idx::Min(a, b) => {
                    idx(a, want, found);
                    idx(b, want, found);
                }
                _ => {}
            }
        }
        match e {
            Expr::Idx(i) | Expr::Elem(_, i) => idx(i, want, found),
            Expr::Cast(_, a) => find_value(a, want, found),
            _ => {}
        }
    }
}
