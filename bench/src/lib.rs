//! loopgate-bench: benchmarks that print tables (they are not tests). Shared pieces: a
//! deterministic generated source tree, a plain-text table, the HumanEval tasks (`humaneval`),
//! the long-task suite and its arms (`long`), the budget keys added only where the daemons know
//! them (`task_toml`), commands run in scratch copies (`scratch_check`), waiting for a run's end
//! (`run_wait`) and tokens by role (`role_tokens`), the manager's memory soak (`soak`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

pub mod humaneval;
pub mod long;
pub mod role_tokens;
pub mod round_scenario;
pub mod run_wait;
pub mod scratch_check;
pub mod soak;
pub mod task_toml;

/// A deterministic pseudo-random generator (xorshift64*), so every run builds the same tree.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const WORDS: &[&str] = &[
    "let", "fn", "match", "return", "value", "index", "buffer", "snapshot", "manifest", "round",
    "audit", "result", "error", "config", "worker", "stream", "digest", "path", "entry", "state",
];

/// Source-like text of about `bytes` bytes: lines of identifiers and numbers (compresses
/// roughly like code, so git's zlib and tar compare fairly).
pub fn source_text(rng: &mut Rng, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 80);
    while out.len() < bytes {
        let words = 3 + rng.below(8);
        for i in 0..words {
            if i > 0 {
                out.push(b' ');
            }
            let word = WORDS[rng.below(WORDS.len() as u64) as usize];
            out.extend_from_slice(word.as_bytes());
            if rng.below(3) == 0 {
                out.extend_from_slice(format!("_{}", rng.below(100_000)).as_bytes());
            }
        }
        out.push(b'\n');
    }
    out
}

/// Write `files` files totalling about `total_bytes` under `root` (`dNN/dNN/fNNNNN.rs`, sizes
/// spread from a fifth to 1.8x the mean). Returns the relative paths.
pub fn generate_tree(
    root: &Path,
    files: usize,
    total_bytes: u64,
    seed: u64,
) -> std::io::Result<Vec<String>> {
    let mut rng = Rng::new(seed);
    let mean = (total_bytes / files.max(1) as u64).max(1);
    let mut paths = Vec::with_capacity(files);
    for i in 0..files {
        let rel = format!("d{:02}/d{:02}/f{i:05}.rs", i % 37, (i / 37) % 29);
        let size = mean / 5 + rng.below(mean * 8 / 5 + 1);
        let path = root.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, source_text(&mut rng, size as usize))?;
        paths.push(rel);
    }
    Ok(paths)
}

/// Total bytes of regular files under `dir` (recursively).
pub fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                total += entry.metadata()?.len();
            }
        }
    }
    Ok(total)
}

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

pub fn millis(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}

/// A plain-text (Markdown) table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Markdown with columns padded to their widest cell.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for (i, width) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let _ = write!(out, " {cell:<width$} |");
            }
            out.push('\n');
            out
        };
        let mut out = line(&self.header);
        out.push('|');
        for width in &widths {
            let _ = write!(out, "{}|", "-".repeat(width + 2));
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tree_is_deterministic_and_about_the_asked_size() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let paths = generate_tree(a.path(), 200, 200 * 1024, 7).unwrap();
        generate_tree(b.path(), 200, 200 * 1024, 7).unwrap();
        assert_eq!(paths.len(), 200);
        for path in &paths {
            assert_eq!(
                std::fs::read(a.path().join(path)).unwrap(),
                std::fs::read(b.path().join(path)).unwrap()
            );
        }
        let total = dir_bytes(a.path()).unwrap();
        assert!((150 * 1024..260 * 1024).contains(&total), "{total}");
    }

    #[test]
    fn table_and_units() {
        let mut table = Table::new(&["what", "n"]);
        table.row(vec!["a".into(), "10".into()]);
        table.row(vec!["longer".into(), "2".into()]);
        assert_eq!(
            table.render(),
            "| what   | n  |\n|--------|----|\n| a      | 10 |\n| longer | 2  |\n"
        );
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(millis(Duration::from_micros(12_400)), "12 ms");
    }
}
