//! One host source file, parsed with `syn`: the module it is, the names it
//! defines, what its `use` items bring in (groups, nested groups, renames,
//! globs, `self`, `super`, `pub use`), and every path into the crate it
//! names, in `use` items and in code (`crate::x::y(...)`, types, patterns,
//! and `crate::`/`super::`/`self::` paths inside macro calls). Test code
//! (`#[cfg(test)]` items) is left out: tests may reach across layers.
//!
//! A re-export (`pub use`) is marked as such: between files it is an alias
//! that paths through it are followed along, not a use of its own.
//!
//! Paths come out absolute, as segments below the crate root; resolving
//! them to the file that defines what they name is [`crate::graph`]'s.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;
use syn::{Attribute, ImplItem, Item, UseTree};

/// A module path below the crate root: `runtime/shadow/compare.rs` is
/// `["runtime", "shadow", "compare"]`, `runtime/mod.rs` `["runtime"]`.
pub type ModulePath = Vec<String>;

/// What a `use` brings a name in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Import {
    /// Something of this crate, by its absolute path.
    Crate(Vec<String>),
    /// Something of another crate (or a local item such as an enum's
    /// variants).
    Other,
}

/// A path into the crate that a file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Absolute, below the crate root.
    pub path: Vec<String>,
    /// As written, for messages.
    pub written: String,
    /// Named by a re-export (`pub use`): a module's face rather than a
    /// use. It still ties the module to the one it names, but files are
    /// linked through it only by the paths that pass along it.
    pub reexport: bool,
}

/// One parsed source file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Its module.
    pub module: ModulePath,
    /// Names of the items it defines at its top level and in its inline
    /// modules (functions, types, traits, constants, macros, modules).
    pub items: BTreeSet<String>,
    /// Names its `use` items bring in, at its top level and in its inline
    /// modules: the name (or its rename) and what it stands for.
    pub imports: BTreeMap<String, Import>,
    /// Modules whose every public name it brings in (`use x::*`).
    pub globs: Vec<Vec<String>>,
    /// Every path into the crate it names, in `use` items and in code.
    pub named: Vec<Named>,
    /// Paths that climb two modules (`super::super::`), as written.
    pub climbs: Vec<String>,
}

/// The module of the file at `relative` (a path below the crate's `src`,
/// with `/` separators).
pub fn module_of(relative: &str) -> ModulePath {
    let stem = relative.strip_suffix(".rs").unwrap_or(relative);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Parses `text`, the file at `relative` below the crate's `src`.
pub fn parse(relative: &str, text: &str) -> Result<Parsed, syn::Error> {
    let file = syn::parse_file(text)?;
    let mut parsed = Parsed { module: module_of(relative), ..Parsed::default() };
    // First what the file defines and imports, wherever in it, so that a
    // path in code can be read through a `use` that comes after it.
    let module = parsed.module.clone();
    declarations(&file.items, &module, &mut parsed);
    let mut visitor = Paths { scope: module, parsed: &mut parsed };
    for item in &file.items {
        visitor.visit_item(item);
    }
    Ok(parsed)
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The names `items` (in module `scope` of the file) define and import:
/// first every name defined, so that a `use` of a module declared after it
/// is read as this crate's.
fn declarations(items: &[Item], scope: &[String], parsed: &mut Parsed) {
    defined(items, parsed);
    imported(items, scope, parsed);
}

fn defined(items: &[Item], parsed: &mut Parsed) {
    for item in items.iter().filter(|i| !is_test(item_attrs(i))) {
        let name = match item {
            Item::Const(i) => Some(&i.ident),
            Item::Enum(i) => Some(&i.ident),
            Item::Fn(i) => Some(&i.sig.ident),
            Item::Macro(i) => i.ident.as_ref(),
            Item::Mod(i) => Some(&i.ident),
            Item::Static(i) => Some(&i.ident),
            Item::Struct(i) => Some(&i.ident),
            Item::Trait(i) => Some(&i.ident),
            Item::TraitAlias(i) => Some(&i.ident),
            Item::Type(i) => Some(&i.ident),
            Item::Union(i) => Some(&i.ident),
            _ => None,
        };
        if let Some(name) = name {
            parsed.items.insert(name.to_string());
        }
        if let Item::Mod(syn::ItemMod { content: Some((_, inner)), .. }) = item {
            defined(inner, parsed);
        }
    }
}

fn imported(items: &[Item], scope: &[String], parsed: &mut Parsed) {
    for item in items.iter().filter(|i| !is_test(item_attrs(i))) {
        match item {
            Item::Use(u) => {
                let mut found = Vec::new();
                use_tree(&u.tree, &mut Vec::new(), &mut found);
                for (written, alias) in found {
                    let absolute = absolute(&written, scope, parsed);
                    match alias {
                        Alias::Name(name) => {
                            let import = absolute.map_or(Import::Other, Import::Crate);
                            parsed.imports.insert(name, import);
                        }
                        Alias::Glob => parsed.globs.extend(absolute),
                        Alias::None => {}
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    let mut inner_scope = scope.to_vec();
                    inner_scope.push(m.ident.to_string());
                    imported(inner, &inner_scope, parsed);
                }
            }
            _ => {}
        }
    }
}

/// What one leaf of a `use` tree binds.
enum Alias {
    /// A name (`x`, `x as y`, or the module itself for `x::{self}`).
    Name(String),
    /// Every public name of the module (`x::*`).
    Glob,
    /// Nothing (`_` renames).
    None,
}

/// The leaves of `tree` under `prefix`: each as the path written and what
/// it binds.
fn use_tree(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Alias)>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_tree(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.clone(), prefix.last().map_or(Alias::None, |l| Alias::Name(l.clone()))));
        }
        UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, Alias::Name(n.ident.to_string())));
        }
        UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            let alias = if r.rename == "_" { Alias::None } else { Alias::Name(r.rename.to_string()) };
            out.push((path, alias));
        }
        UseTree::Glob(_) => out.push((prefix.clone(), Alias::Glob)),
        UseTree::Group(g) => {
            for t in &g.items {
                use_tree(t, prefix, out);
            }
        }
    }
}

/// `written`, named in module `scope` of the file, as an absolute path
/// into the crate; `None` when it names another crate or a local item.
/// A path is the crate's when it starts with `crate`, `super` or `self`,
/// with a module the file declares, or with a name a `use` of the file
/// brings in from the crate.
fn absolute(written: &[String], scope: &[String], parsed: &Parsed) -> Option<Vec<String>> {
    let first = written.first()?;
    match first.as_str() {
        "crate" => Some(written[1..].to_vec()),
        "self" => Some(scope.iter().chain(&written[1..]).cloned().collect()),
        "super" => {
            let climbs = written.iter().take_while(|s| *s == "super").count();
            let base = scope.len().checked_sub(climbs)?;
            Some(scope[..base].iter().chain(&written[climbs..]).cloned().collect())
        }
        _ if parsed.items.contains(first) && scope == parsed.module.as_slice() => {
            // A module of this one (`mod x;` or inline), or a type's
            // associated item; either way this file or one below it.
            Some(scope.iter().chain(written).cloned().collect())
        }
        _ => match parsed.imports.get(first) {
            Some(Import::Crate(target)) => Some(target.iter().chain(&written[1..]).cloned().collect()),
            _ => None,
        },
    }
}

/// Collects the paths into the crate that code names.
struct Paths<'a> {
    /// The module being read (the file's, or an inline one inside it).
    scope: Vec<String>,
    parsed: &'a mut Parsed,
}

impl Paths<'_> {
    fn name(&mut self, written: Vec<String>, reexport: bool) {
        if written.len() >= 2 && written[0] == "super" && written[1] == "super" {
            self.parsed.climbs.push(written.join("::"));
        }
        if let Some(path) = absolute(&written, &self.scope, self.parsed) {
            self.parsed.named.push(Named { path, written: written.join("::"), reexport });
        }
    }

    /// `crate::`, `super::` and `self::` paths in a macro call's tokens,
    /// which `syn` leaves unparsed.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&id.to_string().as_str()) => {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                        (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    if path.len() > 1 {
                        self.name(path, false);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs = match item {
            ImplItem::Const(i) => &i.attrs,
            ImplItem::Fn(i) => &i.attrs,
            ImplItem::Type(i) => &i.attrs,
            ImplItem::Macro(i) => &i.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !is_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.scope.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.scope.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let reexport = !matches!(u.vis, syn::Visibility::Inherited);
        let mut found = Vec::new();
        use_tree(&u.tree, &mut Vec::new(), &mut found);
        for (written, _) in found {
            self.name(written, reexport);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.name(path.segments.iter().map(|s| s.ident.to_string()).collect(), false);
        }
        // Generic arguments name paths of their own.
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    // `pub(super)` and `pub(in crate::x)` say who may look, not what is used.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    // Doc links, derives and `cfg`s are not uses.
    fn visit_attribute(&mut self, _: &'ast Attribute) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(relative: &str, text: &str) -> Vec<String> {
        let mut out: Vec<String> = parse(relative, text).unwrap().named.iter().map(|n| n.path.join("::")).collect();
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn files_are_modules() {
        assert_eq!(module_of("runtime/shadow/compare.rs"), ["runtime", "shadow", "compare"]);
        assert_eq!(module_of("runtime/mod.rs"), ["runtime"]);
        assert!(module_of("lib.rs").is_empty());
    }

    #[test]
    fn every_form_of_use_is_read() {
        let text = "
            use crate::{a::x, b::{y, z as w}, c::{self, d::*}};
            pub use super::e::{f, g::{h}};
            use self::inner::i;
            use std::collections::BTreeMap;
            mod inner { use super::super::k::l; }
        ";
        assert_eq!(
            named("runtime/operator.rs", text),
            [
                "a::x",
                "b::y",
                "b::z",
                "c",
                "c::d",
                "runtime::e::f",
                "runtime::e::g::h",
                "runtime::k::l",
                "runtime::operator::inner::i"
            ]
        );
        let parsed = parse("runtime/operator.rs", text).unwrap();
        assert_eq!(parsed.imports["w"], Import::Crate(vec!["b".into(), "z".into()]));
        assert_eq!(parsed.imports["BTreeMap"], Import::Other);
        assert_eq!(parsed.globs, [vec!["c".to_string(), "d".into()]]);
        assert_eq!(parsed.climbs, ["super::super::k::l"]);
    }

    #[test]
    fn paths_in_code_and_macros_are_read() {
        let text = "
            use super::events;
            fn f() -> crate::a::T<crate::b::U> {
                let _ = crate::c::g(events::TaskId::new());
                format!(\"{}\", crate::d::h());
                child::j();
            }
            mod child;
        ";
        assert_eq!(
            named("runtime/mod.rs", text),
            ["a::T", "b::U", "c::g", "d::h", "events", "events::TaskId::new", "runtime::child::j"]
        );
    }

    #[test]
    fn test_code_and_visibility_are_not_uses() {
        let text = "
            pub(in crate::x) fn f() {}
            /// [`crate::y::Z`]
            fn g() {}
            #[cfg(test)]
            mod tests { use crate::z::W; }
        ";
        assert!(named("runtime/operator.rs", text).is_empty());
    }
}
