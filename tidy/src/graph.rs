//! The host library as a graph of files: each path a file names (see
//! [`crate::uses`]) resolved to the file that defines what it names,
//! through re-exports (`pub use` and globs) so that a `mod.rs` that only
//! re-exports is no hub of false cycles; and the cycles of that graph, as
//! strongly connected components.

use crate::uses::{Import, ModulePath, Named, Parsed, parse};
use std::collections::{BTreeMap, BTreeSet};

/// Every file of a crate, parsed, by module.
#[derive(Debug, Default)]
pub struct Files {
    /// By module; each with its path below `src`.
    pub files: BTreeMap<ModulePath, (String, Parsed)>,
}

/// One use of a file by another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The file that uses, below `src`.
    pub from: String,
    /// The file that defines what it uses.
    pub to: String,
    /// The path as written.
    pub written: String,
}

impl Files {
    /// Parses `sources` (text by path below `src`); the errors name the
    /// file.
    pub fn parse(sources: &BTreeMap<String, String>) -> Result<Files, String> {
        let mut files = BTreeMap::new();
        for (path, text) in sources {
            let parsed = parse(path, text).map_err(|e| format!("{path}: {e}"))?;
            files.insert(parsed.module.clone(), (path.clone(), parsed));
        }
        Ok(Files { files })
    }

    /// The longest prefix of `path` that is a file's module: the file, and
    /// how many segments it took.
    fn file_of(&self, path: &[String]) -> Option<(&ModulePath, usize)> {
        (0..=path.len()).rev().find_map(|n| self.files.get_key_value(&path[..n]).map(|(k, _)| (k, n)))
    }

    /// The file that defines what `path` names: its last module, if that
    /// defines the next name, else wherever the module's `use` of that
    /// name, or one of its globs, leads. `None` when nothing defines it;
    /// `depth` bounds chains of re-exports.
    fn defined_in(&self, path: &[String], depth: u32) -> Option<&ModulePath> {
        let (module, n) = self.file_of(path)?;
        let (_, parsed) = &self.files[module];
        let Some(name) = path.get(n) else { return Some(module) };
        if parsed.items.contains(name) {
            return Some(module);
        }
        if depth > 16 {
            return None;
        }
        match parsed.imports.get(name) {
            Some(Import::Crate(target)) => {
                let through: Vec<String> = target.iter().chain(&path[n + 1..]).cloned().collect();
                self.defined_in(&through, depth + 1)
            }
            Some(Import::Other) => Some(module),
            None => parsed.globs.iter().find_map(|glob| {
                let through: Vec<String> = glob.iter().chain(&path[n..]).cloned().collect();
                self.defined_in(&through, depth + 1)
            }),
        }
    }

    /// The file `named` leads to.
    pub fn target(&self, named: &Named) -> Option<&str> {
        let module = self.defined_in(&named.path, 0).or_else(|| self.file_of(&named.path).map(|(m, _)| m))?;
        Some(self.files[module].0.as_str())
    }

    /// Every use of one file by another.
    pub fn edges(&self) -> Vec<Edge> {
        let mut edges = BTreeSet::new();
        for (path, parsed) in self.files.values() {
            for named in parsed.named.iter().filter(|n| !n.reexport) {
                if let Some(to) = self.target(named).filter(|to| to != path) {
                    edges.insert(Edge { from: path.clone(), to: to.to_string(), written: named.written.clone() });
                }
            }
        }
        edges.into_iter().collect()
    }
}

/// The strongly connected components of more than one node in the graph
/// `edges` makes (Tarjan's algorithm), each sorted, in order.
pub fn cycles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut nodes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in edges {
        nodes.entry(&e.from).or_default().push(&e.to);
        nodes.entry(&e.to).or_default();
    }
    let names: Vec<&str> = nodes.keys().copied().collect();
    let index_of: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let next: Vec<Vec<usize>> = names.iter().map(|n| nodes[n].iter().map(|t| index_of[t]).collect()).collect();

    struct Tarjan<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        found: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.counter);
            self.low[v] = self.counter;
            self.counter += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in &self.next[v] {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                self.found.push(component);
            }
        }
    }
    let n = names.len();
    let mut t = Tarjan {
        next: &next,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .found
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut c: Vec<String> = c.into_iter().map(|i| names[i].to_string()).collect();
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(sources: &[(&str, &str)]) -> Files {
        Files::parse(&sources.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()).unwrap()
    }

    fn pairs(f: &Files) -> Vec<(String, String)> {
        let mut out: Vec<_> = f.edges().into_iter().map(|e| (e.from, e.to)).collect();
        out.dedup();
        out
    }

    #[test]
    fn a_re_export_leads_to_the_file_that_defines_the_name() {
        let f = files(&[
            ("runtime/mod.rs", "pub mod events; pub mod error; pub use events::TaskId;"),
            ("runtime/events.rs", "pub struct TaskId;"),
            ("runtime/error.rs", "use super::TaskId;"),
            ("coordinator/mod.rs", "use crate::runtime::{TaskId, error};"),
        ]);
        assert_eq!(
            pairs(&f),
            [
                ("coordinator/mod.rs".into(), "runtime/error.rs".into()),
                ("coordinator/mod.rs".into(), "runtime/events.rs".into()),
                ("runtime/error.rs".into(), "runtime/events.rs".into()),
            ]
        );
        assert!(cycles(&f.edges()).is_empty());
    }

    #[test]
    fn a_glob_re_export_is_followed_to_the_name() {
        let f = files(&[
            ("control/mod.rs", "pub mod api; pub use api::*; pub struct RunFile;"),
            ("control/api.rs", "pub struct Status;"),
            ("wasm/instance.rs", "use crate::control::{Status, RunFile};"),
        ]);
        let to: BTreeSet<String> =
            f.edges().into_iter().filter(|e| e.from == "wasm/instance.rs").map(|e| e.to).collect();
        assert_eq!(to, BTreeSet::from(["control/api.rs".to_string(), "control/mod.rs".to_string()]));
    }

    #[test]
    fn cycles_name_their_files() {
        let f = files(&[
            ("runtime/mod.rs", "pub mod a; pub mod b; pub mod c; pub mod d;"),
            ("runtime/a.rs", "use super::b::X; pub struct Y;"),
            ("runtime/b.rs", "use crate::runtime::{c::Z}; pub struct X;"),
            ("runtime/c.rs", "pub struct Z; fn f() { super::a::Y; }"),
            ("runtime/d.rs", "use super::a::Y;"),
        ]);
        assert_eq!(cycles(&f.edges()), [vec!["runtime/a.rs", "runtime/b.rs", "runtime/c.rs"]]);
    }
}
