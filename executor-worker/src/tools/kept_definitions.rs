//! What `write_file` keeps when it overwrites a Python file with only part of it. Small models
//! write a file's whole content as just the function they were asked for (`def load(path): ...`
//! over a skeleton with its imports, `COMMANDS` and `main`, or one function of a library over
//! the nine earlier ones), and the round loses every other definition the file held. A write
//! that drops top-level definitions, imports or the `if __name__` block the file had keeps them:
//! the new text stays as written, each dropped block goes back beside its old neighbours, and
//! the tool's result names what was kept (`edit_file` removes a definition on purpose).
//!
//! The file is cut into top-level blocks by a line scanner (strings, brackets, backslash
//! continuations, decorators, `else`/`except` clauses); a file it cannot cut is written as
//! given.

/// What a top-level block is, as far as keeping it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Import,
    /// `def`, `async def` or `class` (with its decorators).
    Definition,
    Assignment,
    /// `if __name__ == "__main__":`.
    Main,
    /// The module docstring, and any other statement: never kept.
    Other,
}

#[derive(Debug, Clone)]
struct Block {
    kind: Kind,
    /// Names the block binds at module level.
    names: Vec<String>,
    /// Its first line (comments and blank lines before it belong to it).
    start: usize,
    /// Its first code line.
    code: usize,
    /// One past its last line.
    end: usize,
    /// Whether decorators come before it.
    decorated: bool,
}

/// The new text with the blocks it dropped put back, and how to name them to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) text: String,
    /// `import csv`, `COMMANDS`, `main`, `the if __name__ block`, in the old file's order.
    pub(crate) kept: Vec<String>,
}

/// `new` (a whole-file write of a Python file) with the top-level imports, definitions,
/// assignments and `if __name__` block of `old` that it no longer has put back; None when it
/// drops none of them, when either text cannot be cut into blocks, or when `new` neither
/// defines a function or class nor imports one the old file defined (a file rewritten as data
/// or emptied is written as given; `from salesdata import load` over a module that defined
/// `load` moves it and keeps the rest).
pub(crate) fn keep_dropped_definitions(old: &str, new: &str) -> Option<Kept> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let old_blocks = blocks(&old_lines)?;
    let new_blocks = blocks(&new_lines)?;
    let old_definitions: Vec<&str> = old_blocks
        .iter()
        .filter(|b| b.kind == Kind::Definition)
        .flat_map(|b| b.names.iter().map(String::as_str))
        .collect();
    let moves_one_out = new_blocks.iter().any(|b| {
        b.kind == Kind::Import
            && b.names
                .iter()
                .any(|n| old_definitions.contains(&n.as_str()))
    });
    if old_definitions.is_empty()
        || !(moves_one_out || new_blocks.iter().any(|b| b.kind == Kind::Definition))
    {
        return None;
    }
    let bound: Vec<&str> = new_blocks
        .iter()
        .flat_map(|b| b.names.iter().map(String::as_str))
        .collect();
    let new_has_main = new_blocks.iter().any(|b| b.kind == Kind::Main);
    let dropped = |b: &Block| match b.kind {
        Kind::Other => false,
        Kind::Main => !new_has_main,
        _ => !b.names.is_empty() && b.names.iter().all(|n| !bound.contains(&n.as_str())),
    };
    if !old_blocks.iter().any(dropped) {
        return None;
    }
    // Where each kept block goes: imports after the new text's imports; the rest before the
    // new block that replaced the next old block still in the new text, else before the new
    // `if __name__` block, else at the end; a kept `if __name__` block last.
    let last_import = new_blocks.iter().rfind(|b| b.kind == Kind::Import);
    let first_code = new_blocks.iter().find(|b| !is_docstring(&new_lines, b));
    let import_at = match (last_import, first_code) {
        (Some(b), _) => b.end,
        (None, Some(b)) => b.code,
        (None, None) => new_lines.len(),
    };
    let main_at = new_blocks
        .iter()
        .find(|b| b.kind == Kind::Main)
        .map_or(new_lines.len(), |b| b.start);
    // (line, kept `if __name__` block last at its line, is an import, text)
    let mut inserts: Vec<(usize, bool, bool, String)> = Vec::new();
    let mut kept = Vec::new();
    for (i, block) in old_blocks.iter().enumerate() {
        if !dropped(block) {
            continue;
        }
        let text: String = old_lines[block.start..block.end].concat();
        let at = match block.kind {
            Kind::Import => import_at,
            Kind::Main => new_lines.len(),
            _ => old_blocks[i + 1..]
                .iter()
                .filter(|later| !dropped(later) && later.kind != Kind::Other)
                .find_map(|later| {
                    new_blocks
                        .iter()
                        .find(|nb| nb.kind == later.kind && shares_name(nb, later))
                        .map(|nb| nb.start)
                })
                .unwrap_or(main_at),
        };
        inserts.push((
            at,
            block.kind == Kind::Main,
            block.kind == Kind::Import,
            text,
        ));
        kept.push(describe(block));
    }
    inserts.sort_by_key(|(at, main, _, _)| (*at, *main));
    let mut text = String::with_capacity(old.len() + new.len());
    let mut next = inserts.iter().peekable();
    for (line_no, line) in new_lines.iter().enumerate() {
        while let Some((_, _, import, block)) = next.next_if(|(at, ..)| *at == line_no) {
            push_block(&mut text, block, *import, true);
        }
        text.push_str(line);
    }
    while let Some((_, _, import, block)) = next.next() {
        push_block(&mut text, block, *import, next.peek().is_some());
    }
    Some(Kept { text, kept })
}

/// Appends a kept block on lines of its own (its blank lines around trimmed); a code block
/// gets one blank line before it, and one after it when more text follows.
fn push_block(text: &mut String, block: &str, is_import: bool, more: bool) {
    let block = block.trim_start_matches(['\n', '\r']).trim_end();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !is_import && !text.is_empty() && !text.ends_with("\n\n") {
        text.push('\n');
    }
    text.push_str(block);
    text.push('\n');
    if !is_import && more {
        text.push('\n');
    }
}

fn shares_name(a: &Block, b: &Block) -> bool {
    a.kind == Kind::Main && b.kind == Kind::Main || a.names.iter().any(|n| b.names.contains(n))
}

/// The top-level functions and classes `text` defines, by name; None when it cannot be cut
/// into blocks.
pub(crate) fn definition_names(text: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    Some(
        blocks(&lines)?
            .into_iter()
            .filter(|b| b.kind == Kind::Definition)
            .flat_map(|b| b.names)
            .collect(),
    )
}

/// Every name `text` binds at module level (its functions, classes, assignments and
/// imports); None when it cannot be cut into blocks.
pub(crate) fn bound_names(text: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    Some(blocks(&lines)?.into_iter().flat_map(|b| b.names).collect())
}

/// Where imports go in `text`: the first line of its first statement that is neither the
/// module docstring nor a `from __future__` import (its first decorator, for a decorated
/// definition), and whether that statement is an import; the line count when there is none.
/// None when it cannot be cut into blocks.
pub(crate) fn import_line(text: &str) -> Option<(usize, bool)> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let blocks = blocks(&lines)?;
    let first = blocks.iter().enumerate().find(|(i, b)| {
        let leading_docstring = *i == 0 && is_docstring(&lines, b);
        !(leading_docstring || lines[b.code].starts_with("from __future__"))
    });
    Some(first.map_or((lines.len(), true), |(_, b)| {
        let at = (b.start..=b.code)
            .find(|&l| lines[l].starts_with('@'))
            .unwrap_or(b.code);
        (at, b.kind == Kind::Import)
    }))
}

/// A top-level `from MODULE import ...` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FromImport {
    /// The module as written (`textkit`, `pkg.mod`, `.mod`).
    pub(crate) module: String,
    /// The names it binds.
    pub(crate) names: Vec<String>,
    /// Its first line (0-based).
    pub(crate) first: usize,
    /// One past its last line (a parenthesized or continued import spans several).
    pub(crate) end: usize,
}

/// The top-level `from ... import ...` statements of `text`; None when it cannot be cut into
/// blocks.
pub(crate) fn from_imports(text: &str) -> Option<Vec<FromImport>> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let imports = blocks(&lines)?
        .into_iter()
        .filter(|b| b.kind == Kind::Import)
        .filter_map(|b| {
            let rest = lines[b.code].strip_prefix("from ")?;
            let (module, _) = rest.split_once(" import")?;
            let mut scan = LineScan::default();
            let mut end = b.code;
            for line in &lines[b.code..] {
                scan.feed(line);
                end += 1;
                if !scan.open() {
                    break;
                }
            }
            Some(FromImport {
                module: module.trim().to_string(),
                names: b.names,
                first: b.code,
                end,
            })
        })
        .collect();
    Some(imports)
}

/// A top-level function or class defined a second time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redefinition {
    pub(crate) name: String,
    /// 1-based lines of its first and its later `def` or `class`.
    pub(crate) first: usize,
    pub(crate) again: usize,
}

/// The first top-level function or class `text` defines twice with no decorator on either
/// (`@overload`, `@f.register` and `@x.setter` redefine a name on purpose): Python keeps only
/// the later one. None when there is none, or when `text` cannot be cut into blocks.
pub(crate) fn defined_twice(text: &str) -> Option<Redefinition> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let blocks = blocks(&lines)?;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for block in blocks
        .iter()
        .filter(|b| b.kind == Kind::Definition && !b.decorated)
    {
        for name in &block.names {
            if let Some((_, first)) = seen.iter().find(|(n, _)| n == name) {
                return Some(Redefinition {
                    name: name.clone(),
                    first: first + 1,
                    again: block.code + 1,
                });
            }
            seen.push((name, block.code));
        }
    }
    None
}

fn is_docstring(lines: &[&str], b: &Block) -> bool {
    let first = lines[b.code].trim_start();
    b.kind == Kind::Other && (first.starts_with('"') || first.starts_with('\''))
}

fn describe(block: &Block) -> String {
    match block.kind {
        Kind::Main => "the `if __name__ == \"__main__\":` block".to_string(),
        Kind::Import => format!("`{}`", block.names.join(", ")),
        _ => block
            .names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The top-level blocks of a Python text; None when a string or bracket is left open.
fn blocks(lines: &[&str]) -> Option<Vec<Block>> {
    let mut out: Vec<Block> = Vec::new();
    let mut scan = LineScan::default();
    let mut pending: Option<usize> = None;
    let mut decorated: Option<usize> = None;
    for (no, line) in lines.iter().enumerate() {
        let continues = scan.open();
        scan.feed(line);
        if continues {
            continue;
        }
        let trimmed = line.trim_end();
        if trimmed.trim_start().is_empty() || trimmed.starts_with('#') {
            pending.get_or_insert(no);
            continue;
        }
        if line.starts_with([' ', '\t']) || CLAUSES.iter().any(|c| starts_with_word(trimmed, c)) {
            // Part of the block above (its body, or an `else`/`except` clause).
            pending = None;
            continue;
        }
        if trimmed.starts_with('@') {
            decorated.get_or_insert(pending.unwrap_or(no));
            pending = None;
            continue;
        }
        let has_decorators = decorated.is_some();
        let start = decorated.take().or(pending.take()).unwrap_or(no);
        let (kind, names) = classify(trimmed);
        out.push(Block {
            kind,
            names,
            start,
            code: no,
            end: no + 1,
            decorated: has_decorators,
        });
    }
    if scan.open() || decorated.is_some() {
        return None;
    }
    // Stretch each block to the next one's start, so trailing lines of a body are its own.
    let len = lines.len();
    let starts: Vec<usize> = out.iter().skip(1).map(|b| b.start).collect();
    for (block, next) in out.iter_mut().zip(starts.into_iter().chain([len])) {
        block.end = next;
    }
    Some(out)
}

/// Keywords that continue the compound statement above at the top level.
const CLAUSES: [&str; 4] = ["else", "elif", "except", "finally"];

fn starts_with_word(line: &str, word: &str) -> bool {
    line.strip_prefix(word)
        .is_some_and(|rest| rest.starts_with([':', ' ', '(']))
}

fn classify(line: &str) -> (Kind, Vec<String>) {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for prefix in ["def ", "async def ", "class "] {
        if let Some(rest) = line.strip_prefix(prefix) {
            let name = word(rest.trim_start());
            return (Kind::Definition, vec![name]);
        }
    }
    if let Some(rest) = line.strip_prefix("import ") {
        let names = rest
            .split('#')
            .next()
            .unwrap_or_default()
            .split(',')
            .filter_map(|part| {
                let part = part.trim();
                let bound = part.split(" as ").nth(1).unwrap_or(part);
                let first = bound.split('.').next().unwrap_or_default().trim();
                (!first.is_empty()).then(|| first.to_string())
            })
            .collect();
        return (Kind::Import, names);
    }
    if let Some(rest) = line.strip_prefix("from ") {
        if let Some((module, names)) = rest.split_once(" import ") {
            let names: Vec<String> = names
                .split('#')
                .next()
                .unwrap_or_default()
                .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
                .split(',')
                .filter_map(|part| {
                    let part = part.trim().trim_matches(|c| c == '(' || c == ')').trim();
                    let bound = part.split(" as ").nth(1).unwrap_or(part).trim();
                    (!bound.is_empty()).then(|| bound.to_string())
                })
                .map(|n| {
                    if n == "*" {
                        format!("{} *", module.trim())
                    } else {
                        n
                    }
                })
                .collect();
            return (Kind::Import, names);
        }
    }
    if line.starts_with("if __name__") {
        return (Kind::Main, Vec::new());
    }
    let names = assigned_names(line);
    if names.is_empty() {
        (Kind::Other, names)
    } else {
        (Kind::Assignment, names)
    }
}

/// `A = ...`, `A: int = ...`, `A = B = ...` bind A (and B); augmented assignments, calls and
/// attribute or subscript targets bind nothing here.
fn assigned_names(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    loop {
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return names;
        }
        let after = rest[name.len()..].trim_start();
        let value = if let Some(annotated) = after.strip_prefix(':') {
            match annotated.split_once('=') {
                Some((_, value)) if !value.starts_with('=') => value,
                _ => return names,
            }
        } else if let Some(value) = after.strip_prefix('=') {
            if value.starts_with('=') {
                return names;
            }
            value
        } else {
            return names;
        };
        names.push(name);
        rest = value.trim_start();
    }
}

/// Whether a line ends inside a string, brackets or a backslash continuation.
#[derive(Default)]
struct LineScan {
    depth: usize,
    /// Inside a triple-quoted string opened with this quote.
    triple: Option<char>,
    backslash: bool,
}

impl LineScan {
    fn open(&self) -> bool {
        self.depth > 0 || self.triple.is_some() || self.backslash
    }

    fn feed(&mut self, line: &str) {
        let chars: Vec<char> = line.chars().collect();
        self.backslash = false;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some(q) = self.triple {
                if c == '\\' {
                    i += 2;
                    continue;
                }
                if c == q && chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                    self.triple = None;
                    i += 3;
                    continue;
                }
                i += 1;
                continue;
            }
            match c {
                '#' => return,
                '\'' | '"' => {
                    if chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c) {
                        self.triple = Some(c);
                        i += 3;
                        continue;
                    }
                    i += 1;
                    while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                        if chars[i] == '\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                '\\' if chars[i + 1..].iter().all(|c| *c == '\n' || *c == '\r') => {
                    self.backslash = true;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

#[cfg(test)]
#[path = "kept_definitions_tests.rs"]
mod tests;
