//! Sibling loop fusion on the kernel IR, and the removal of loads it makes repeated.
//!
//! The lowering gives every loop nest of a kernel its own loops. Two reductions over the
//! same rows (LayerNorm backward's `dw = sum(dy * xhat)` and `db = sum(dy)`), or an output
//! stored beside a column sum of it (GELU backward and its bias gradient), become two
//! serial loops of equal trip count, one after the other, each loading the same input
//! rows from global memory. [`fuse_sibling_loops`] turns them into one loop when that
//! cannot change what any statement computes, and then [`dedup_loads`] drops a register
//! array filled exactly as another one already is, so each element is loaded once.
//!
//! Both passes reason about names only: every register, accumulator, shared buffer and
//! global tensor is a distinct identifier in the kernel IR, so two statements conflict
//! exactly when one writes a name the other reads or writes. Statements with a
//! block-level effect (barriers, block and grid reductions, helpers that take addresses)
//! are never moved into or across another loop.

use std::collections::{HashMap, HashSet};

use super::{Expr, Func, Idx, Stmt};

/// The names a list of statements declares, reads and writes.
#[derive(Default, Debug)]
struct Names {
    /// Declared here: registers, scalars, loop variables.
    decls: HashSet<String>,
    reads: HashSet<String>,
    writes: HashSet<String>,
    /// Holds a barrier, a block or grid reduction, or a helper with effects beyond its
    /// arguments' values.
    collective: bool,
}

impl Names {
    fn of(stmts: &[Stmt]) -> Names {
        let mut n = Names::default();
        for s in stmts {
            n.stmt(s);
        }
        n
    }

    fn of_one(s: &Stmt) -> Names {
        Names::of(std::slice::from_ref(s))
    }

    /// Names read or written here but declared elsewhere.
    fn free_reads(&self) -> impl Iterator<Item = &String> {
        self.reads.iter().filter(|n| !self.decls.contains(*n))
    }

    fn free_writes(&self) -> impl Iterator<Item = &String> {
        self.writes.iter().filter(|n| !self.decls.contains(*n))
    }

    fn free(&self) -> HashSet<&String> {
        self.free_reads().chain(self.free_writes()).collect()
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Comment(_) => {}
            Stmt::Alloc { name, .. } => {
                self.decls.insert(name.clone());
            }
            Stmt::For {
                var, extent, body, ..
            } => {
                self.decls.insert(var.clone());
                self.idx(extent);
                for b in body {
                    self.stmt(b);
                }
            }
            Stmt::If { cond, body } => {
                for c in cond {
                    self.expr(c);
                }
                for b in body {
                    self.stmt(b);
                }
            }
            Stmt::Decl { name, init, .. } => {
                self.decls.insert(name.clone());
                self.writes.insert(name.clone());
                self.expr(init);
            }
            Stmt::Assign { lhs, rhs } => {
                self.lvalue(lhs);
                self.expr(rhs);
            }
            Stmt::VecCopy { dst, src, .. } => {
                // `dst` is an address: everything it names may be written; `src` is
                // only read through (a load of an input's vector reads the input).
                self.effects(dst);
                self.read_through(src);
            }
            Stmt::Sync(_) => self.collective = true,
            Stmt::Call { args, .. } => {
                self.collective = true;
                for a in args {
                    self.effects(a);
                }
            }
            Stmt::BlockReduce { acc, smem, .. } => {
                self.collective = true;
                self.effects(acc);
                self.reads.insert(smem.clone());
                self.writes.insert(smem.clone());
            }
        }
    }

    /// An assigned lvalue: its array (or scalar) is written, its index read.
    fn lvalue(&mut self, e: &Expr) {
        match e {
            Expr::Var(n) => {
                self.writes.insert(n.clone());
            }
            Expr::Elem(n, i) => {
                self.writes.insert(n.clone());
                self.idx(i);
            }
            other => self.effects(other),
        }
    }

    /// An argument a helper may write through: a register or array passed by reference
    /// (or by address) is read and may be written; the values computed around it, and
    /// every index, are only read.
    fn effects(&mut self, e: &Expr) {
        match e {
            Expr::Var(n) => {
                self.reads.insert(n.clone());
                if !is_builtin(n) {
                    self.writes.insert(n.clone());
                }
            }
            Expr::Elem(n, i) => {
                self.reads.insert(n.clone());
                self.writes.insert(n.clone());
                self.idx(i);
            }
            Expr::AddrOf(inner) | Expr::Paren(inner) => self.effects(inner),
            other => self.expr(other),
        }
    }

    /// An address that is only read through: the array it names is read, not written.
    fn read_through(&mut self, e: &Expr) {
        match e {
            Expr::AddrOf(inner) | Expr::Paren(inner) => self.read_through(inner),
            Expr::Var(n) => {
                self.reads.insert(n.clone());
            }
            Expr::Elem(n, i) => {
                self.reads.insert(n.clone());
                self.idx(i);
            }
            other => self.expr(other),
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Call(f, args) if !is_pure(*f) => {
                if is_collective(*f) {
                    self.collective = true;
                }
                for a in args {
                    self.effects(a);
                }
            }
            Expr::AddrOf(inner) => self.effects(inner),
            _ => {
                let mut reads = Vec::new();
                expr_children_names(e, &mut reads);
                self.reads.extend(reads);
                e.for_each_child(|c| self.expr(c));
            }
        }
    }

    fn idx(&mut self, i: &Idx) {
        idx_names(i, &mut |n| {
            self.reads.insert(n.to_string());
        });
    }
}

/// Thread and block builtins: read, never written.
fn is_builtin(n: &str) -> bool {
    ["threadIdx.", "blockIdx.", "blockDim.", "gridDim."]
        .iter()
        .any(|p| n.starts_with(p))
}

/// Functions of their arguments' values alone.
fn is_pure(f: Func) -> bool {
    matches!(
        f,
        Func::Unary(_)
            | Func::Binary(_)
            | Func::F2I32F32
            | Func::F2I32F64
            | Func::F2I64
            | Func::Clamp
            | Func::Uniform(_)
            | Func::UniformF64
            | Func::NormalF32
            | Func::NormalF64
            | Func::WrapIndex
            | Func::InRange
            | Func::Maximum
            | Func::Minimum
    )
}

/// Helpers that synchronize the block or the grid.
fn is_collective(f: Func) -> bool {
    matches!(
        f,
        Func::BlockWelfordX
            | Func::BlockWelfordY
            | Func::BlockScanX
            | Func::SortRows
            | Func::TopkRows
            | Func::GridReduce
            | Func::GridWelford
            | Func::GridAllreduceGroup
            | Func::GridReduceGroup
    )
}

/// The names `e` itself holds (not those of its sub-expressions).
fn expr_children_names(e: &Expr, out: &mut Vec<String>) {
    if let Expr::Var(n) | Expr::Elem(n, _) = e {
        out.push(n.clone());
    }
    if let Some(i) = e.own_idx() {
        idx_names(i, &mut |m| out.push(m.to_string()));
    }
}

/// Every name in `e`, its indices included.
fn expr_names(e: &Expr, f: &mut impl FnMut(&str)) {
    let mut own = Vec::new();
    expr_children_names(e, &mut own);
    for n in &own {
        f(n);
    }
    e.for_each_child(|c| expr_names(c, f));
}

fn idx_names(i: &Idx, f: &mut dyn FnMut(&str)) {
    match i {
        Idx::Var(n) => f(n),
        Idx::Shape { param, .. } => f(param),
        Idx::Value(e) => expr_names(e, &mut |n| f(n)),
        _ => {
            if let Some((a, b)) = i.operands() {
                idx_names(a, f);
                idx_names(b, f);
            }
        }
    }
}

/// Renames identifiers in a statement, its expressions and indices.
fn rename_stmt(s: &mut Stmt, map: &HashMap<String, String>) {
    let re = |n: &mut String| rename(n, map);
    match s {
        Stmt::Comment(_) | Stmt::Sync(_) => {}
        Stmt::Alloc { name, .. } => re(name),
        Stmt::For {
            var, extent, body, ..
        } => {
            re(var);
            rename_idx(extent, map);
            body.iter_mut().for_each(|b| rename_stmt(b, map));
        }
        Stmt::If { cond, body } => {
            cond.iter_mut().for_each(|c| rename_expr(c, map));
            body.iter_mut().for_each(|b| rename_stmt(b, map));
        }
        Stmt::Decl { name, init, .. } => {
            re(name);
            rename_expr(init, map);
        }
        Stmt::Assign { lhs, rhs } => {
            rename_expr(lhs, map);
            rename_expr(rhs, map);
        }
        Stmt::VecCopy { dst, src, .. } => {
            rename_expr(dst, map);
            rename_expr(src, map);
        }
        Stmt::Call { args, .. } => args.iter_mut().for_each(|a| rename_expr(a, map)),
        Stmt::BlockReduce { acc, smem, .. } => {
            rename_expr(acc, map);
            re(smem);
        }
    }
}

fn rename(n: &mut String, map: &HashMap<String, String>) {
    if let Some(m) = map.get(n) {
        *n = m.clone();
    }
}

fn rename_expr(e: &mut Expr, map: &HashMap<String, String>) {
    if let Expr::Var(n) | Expr::Elem(n, _) = e {
        rename(n, map);
    }
    if let Some(i) = e.own_idx_mut() {
        rename_idx(i, map);
    }
    e.for_each_child_mut(|c| rename_expr(c, map));
}

fn rename_idx(i: &mut Idx, map: &HashMap<String, String>) {
    match i {
        Idx::Var(n) => rename(n, map),
        Idx::Value(e) => rename_expr(e, map),
        _ => {
            if let Some((a, b)) = i.operands_mut() {
                rename_idx(a, map);
                rename_idx(b, map);
            }
        }
    }
}

fn disjoint<'a>(a: impl IntoIterator<Item = &'a String>, b: &HashSet<&String>) -> bool {
    a.into_iter().all(|n| !b.contains(n))
}

/// True when running `b` before `r` computes what running `r` before `b` does: neither
/// writes a name the other reads or writes. `b` has no block-level effect (the callers
/// refuse those), so `r` may be a barrier or a grid reduction.
fn commute(b: &Names, r: &Names) -> bool {
    debug_assert!(!b.collective);
    let b_free = b.free();
    let r_all: HashSet<&String> = r.reads.iter().chain(&r.writes).chain(&r.decls).collect();
    disjoint(b.free_writes(), &r_all)
        && disjoint(r.writes.iter().chain(&r.decls), &b_free)
        && r.decls.is_disjoint(&b.decls)
}

/// Fuses, in `stmts` and every body below, each serial loop with a later sibling loop of
/// the same trip count when the two are independent, and then drops the repeated loads
/// of each fused body (see the module docs). Returns the number of loops fused.
pub fn fuse_sibling_loops(stmts: &mut Vec<Stmt>) -> usize {
    let mut fused = 0;
    let mut i = 0;
    while i < stmts.len() {
        let mut j = i + 1;
        let mut merged = false;
        while j < stmts.len() {
            if try_fuse(stmts, i, j) {
                fused += 1;
                merged = true;
                break;
            }
            j += 1;
        }
        if !merged {
            i += 1;
        }
    }
    for s in stmts.iter_mut() {
        match s {
            Stmt::For { body, .. } | Stmt::If { body, .. } => fused += fuse_sibling_loops(body),
            _ => {}
        }
    }
    fused
}

/// Fuses loop `j` into loop `i` (`i < j`) if that is sound, hoisting above loop `i` the
/// declarations between them that loop `j` uses. The fused loop stays at `i`'s place
/// (shifted by the hoisted statements).
fn try_fuse(stmts: &mut Vec<Stmt>, i: usize, j: usize) -> bool {
    let (
        Stmt::For {
            var: va,
            extent: ea,
            unroll: false,
            ..
        },
        Stmt::For {
            var: vb,
            extent: eb,
            unroll: false,
            ..
        },
    ) = (&stmts[i], &stmts[j])
    else {
        return false;
    };
    if ea != eb {
        return false;
    }
    let rename: HashMap<String, String> = [(vb.clone(), va.clone())].into();
    let mut b_stmt = stmts[j].clone();
    rename_stmt(&mut b_stmt, &rename);
    let a = Names::of_one(&stmts[i]);
    let b = Names::of_one(&b_stmt);
    if a.collective || b.collective {
        return false;
    }
    // The two bodies in one iteration: neither may touch what the other writes, and
    // their declarations (the loop variable aside) must not meet.
    let (a_free, b_free) = (a.free(), b.free());
    let va_name = va.clone();
    if !disjoint(a.free_writes(), &b_free)
        || !disjoint(b.free_writes(), &a_free)
        || a.decls.iter().any(|d| *d != va_name && b.decls.contains(d))
        || !disjoint(&a.decls, &b_free)
        || !disjoint(&b.decls, &a_free)
    {
        return false;
    }
    // The statements between move above loop `i` (with a comment just before them) or
    // stay after the fused loop.
    // Those that declare or write what loop `j` uses must run before it, and so must
    // whatever they read from the statements between.
    let mid = &stmts[i + 1..j];
    let mut hoist = vec![false; mid.len()];
    let mut needed: HashSet<String> = b_free.iter().map(|n| (*n).clone()).collect();
    for k in (0..mid.len()).rev() {
        let n = Names::of_one(&mid[k]);
        if n.decls.iter().chain(&n.writes).any(|d| needed.contains(d)) {
            hoist[k] = true;
            needed.extend(n.free_reads().cloned());
        }
    }
    for k in 0..mid.len() {
        if !hoist[k] && matches!(mid[k], Stmt::Comment(_)) && hoist.get(k + 1) == Some(&true) {
            hoist[k] = true;
        }
    }
    let mut above = Names::of_one(&stmts[i]);
    for (k, m) in mid.iter().enumerate() {
        let n = Names::of_one(m);
        if hoist[k] {
            // Moves above loop `i` and the statements before it that stay.
            if n.collective || !commute(&n, &above) {
                return false;
            }
        } else {
            if !commute(&b, &n) {
                return false;
            }
            above.reads.extend(n.reads.iter().cloned());
            above.writes.extend(n.writes.iter().cloned());
            above.decls.extend(n.decls.iter().cloned());
            above.collective |= n.collective;
        }
    }
    // Sound: rebuild `stmts[i..=j]`.
    let tail: Vec<Stmt> = stmts.drain(i..=j).collect();
    let mut it = tail.into_iter();
    let Some(Stmt::For {
        var,
        extent,
        unroll,
        body: mut a_body,
    }) = it.next()
    else {
        unreachable!("stmts[i] is a loop")
    };
    let mut hoisted = Vec::new();
    let mut stay = Vec::new();
    for (k, m) in it.by_ref().take(j - i - 1).enumerate() {
        if hoist[k] {
            hoisted.push(m);
        } else {
            stay.push(m);
        }
    }
    let Stmt::For { body: b_body, .. } = b_stmt else {
        unreachable!("stmts[j] is a loop")
    };
    a_body.extend(b_body);
    dedup_loads(&mut a_body);
    let rebuilt: Vec<Stmt> = hoisted
        .into_iter()
        .chain(std::iter::once(Stmt::For {
            var,
            extent,
            unroll,
            body: a_body,
        }))
        .chain(stay)
        .collect();
    stmts.splice(i..i, rebuilt);
    true
}

/// The one name a statement writes outside itself, with no effects beyond it.
fn sole_write(n: &Names) -> Option<&String> {
    if n.collective {
        return None;
    }
    let mut w = n.free_writes();
    let first = w.next()?;
    w.next().is_none().then_some(first)
}

/// Drops, from `stmts`, each statement that fills a register array exactly as an earlier
/// statement fills another of the same type and size (the same loads, under the same
/// predicates), and reads the earlier array in its place.
pub fn dedup_loads(stmts: &mut Vec<Stmt>) {
    let mut q = 0;
    while q < stmts.len() {
        match repeat_of(stmts, q) {
            Some((keep, drop)) => {
                let map: HashMap<String, String> = [(drop.clone(), keep)].into();
                stmts.remove(q);
                stmts.retain(|s| !matches!(s, Stmt::Alloc { name, .. } if *name == drop));
                for s in stmts.iter_mut() {
                    rename_stmt(s, &map);
                }
                // Its allocation came before it: the next statement is now at `q - 1`.
                q = q.saturating_sub(1);
            }
            None => q += 1,
        }
    }
}

/// If `stmts[q]` repeats an earlier sibling's fill of another array, `(earlier, repeat)`.
fn repeat_of(stmts: &[Stmt], q: usize) -> Option<(String, String)> {
    let fill = |s: &Stmt| matches!(s, Stmt::For { unroll: true, .. });
    if !fill(&stmts[q]) {
        return None;
    }
    let names: Vec<Names> = stmts[..=q].iter().map(Names::of_one).collect();
    let y = sole_write(&names[q])?.clone();
    let alloc = |name: &str| {
        stmts.iter().find_map(|s| match s {
            Stmt::Alloc {
                name: n,
                dtype,
                size,
            } if n == name => Some((*dtype, *size)),
            _ => None,
        })
    };
    let y_alloc = alloc(&y)?;
    // Each of the two arrays is written by its fill alone, here and after.
    let later: Vec<Names> = stmts[q + 1..].iter().map(Names::of_one).collect();
    let writers = |name: &String| {
        names
            .iter()
            .chain(&later)
            .filter(|n| n.writes.contains(name))
            .count()
    };
    if writers(&y) != 1 {
        return None;
    }
    let Stmt::For { var: vq, .. } = &stmts[q] else {
        return None;
    };
    for p in 0..q {
        let Stmt::For {
            var: vp,
            unroll: true,
            ..
        } = &stmts[p]
        else {
            continue;
        };
        let Some(x) = sole_write(&names[p]) else {
            continue;
        };
        if *x == y || alloc(x) != Some(y_alloc) || writers(x) != 1 {
            continue;
        }
        let map: HashMap<String, String> =
            [(y.clone(), x.clone()), (vq.clone(), vp.clone())].into();
        let mut renamed = stmts[q].clone();
        rename_stmt(&mut renamed, &map);
        if renamed != stmts[p] {
            continue;
        }
        // What the fill reads is unchanged between the two.
        let read_set: HashSet<&String> = names[p].free_reads().collect();
        let clobbered = names[p + 1..q]
            .iter()
            .any(|n| n.collective || n.free_writes().any(|w| read_set.contains(w)));
        if !clobbered {
            return Some((x.clone(), y));
        }
    }
    None
}

#[cfg(test)]
mod tests;
