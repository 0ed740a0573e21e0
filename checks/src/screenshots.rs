//! A check's own screenshots: `loopgate browse` appends the path of each PNG it wrote to the
//! record file named by `LOOPGATE_BROWSE_RECORD` (in the check's HOME); after the check, the
//! listed files that are PNGs inside the check's copy are read, bounded, before the copy is
//! removed. A path outside the copy, a symlink (the record's too), a file that is not a PNG or
//! is too large is skipped (the check is hostile code's neighbour: the candidate's serve command
//! runs in it): everything is opened beneath its directory following no symlink.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use loopgate_workspace_walk::RootDir;

/// At most this many screenshots are kept per check.
pub const MAX_SCREENSHOTS: usize = 8;
/// A screenshot larger than this is skipped.
pub const MAX_SCREENSHOT_BYTES: u64 = 8 * 1024 * 1024;
/// Only this much of the record file is read.
const MAX_RECORD_BYTES: u64 = 64 * 1024;
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// The record's name in the check's HOME.
pub(crate) const RECORD_FILE: &str = ".loopgate-browse-record";

/// One screenshot a check took.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckScreenshot {
    /// Relative to the check's copy of the workspace.
    pub path: String,
    pub png: Vec<u8>,
}

impl std::fmt::Debug for CheckScreenshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckScreenshot")
            .field("path", &self.path)
            .field("bytes", &self.png.len())
            .finish()
    }
}

/// The screenshots `record` lists that are PNGs inside `workspace`, in order, each once, read
/// from `files_in`: the workspace itself, or for a layered copy (whose mount is gone once the
/// check ended) its upper layer, which holds every file the check wrote.
pub(crate) fn collect(record: &Path, workspace: &Path, files_in: &Path) -> Vec<CheckScreenshot> {
    let Some(text) = read_record(record) else {
        return Vec::new();
    };
    let (Ok(shown), Ok(root)) = (workspace.canonicalize(), RootDir::open(files_in)) else {
        return Vec::new();
    };
    let mut shots: Vec<CheckScreenshot> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if shots.len() >= MAX_SCREENSHOTS {
            break;
        }
        // An absolute path names a file of the copy as the check saw it.
        let relative = match Path::new(line).strip_prefix(&shown) {
            Ok(rest) => rest,
            Err(_) if line.starts_with('/') => Path::new(line)
                .strip_prefix(workspace)
                .unwrap_or(Path::new(line)),
            Err(_) => Path::new(line),
        };
        let Some(shot) = one(&root, relative) else {
            tracing::debug!(path = line, "a recorded screenshot was skipped");
            continue;
        };
        if !shots.iter().any(|s| s.path == shot.path) {
            shots.push(shot);
        }
    }
    shots
}

/// The record's text (bounded), unless it is not a plain file in its directory.
fn read_record(record: &Path) -> Option<String> {
    let (dir, name) = (record.parent()?, record.file_name()?);
    let mut text = String::new();
    RootDir::open(dir)
        .ok()?
        .open_file(name)
        .ok()?
        .take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// `path` as a clean relative one (`/`-separated), or None when it leaves the copy.
fn clean_relative(path: &Path) -> Option<String> {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    clean.to_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn one(root: &RootDir, path: &Path) -> Option<CheckScreenshot> {
    let relative = clean_relative(path)?;
    let file = root.open_file(&relative).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_SCREENSHOT_BYTES {
        return None;
    }
    let mut png = Vec::new();
    file.take(MAX_SCREENSHOT_BYTES + 1)
        .read_to_end(&mut png)
        .ok()?;
    png.starts_with(PNG_MAGIC).then_some(CheckScreenshot {
        path: relative,
        png,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_pngs_inside_the_copy_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("shots")).unwrap();
        let png = [PNG_MAGIC, b"rest"].concat();
        std::fs::write(ws.join("shots/a.png"), &png).unwrap();
        std::fs::write(ws.join("notpng.png"), b"<html>").unwrap();
        std::fs::write(dir.path().join("outside.png"), &png).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.png"), ws.join("link.png")).unwrap();
        let record = dir.path().join("record");
        let abs = ws.join("shots/a.png");
        std::fs::write(
            &record,
            format!(
                "shots/a.png\n{}\nnotpng.png\n../outside.png\nlink.png\nmissing.png\n\n",
                abs.display()
            ),
        )
        .unwrap();
        let shots = collect(&record, &ws, &ws);
        assert_eq!(shots.len(), 1, "{shots:?}");
        assert_eq!(shots[0].path, "shots/a.png");
        assert_eq!(shots[0].png, png);
        // No record: nothing.
        assert!(collect(&dir.path().join("none"), &ws, &ws).is_empty());
        // A layered copy: the files are read from the upper layer.
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("shots")).unwrap();
        std::fs::write(upper.join("shots/b.png"), &png).unwrap();
        let abs_b = ws.join("shots/b.png");
        std::fs::write(&record, format!("{}\nshots/a.png\n", abs_b.display())).unwrap();
        let shots = collect(&record, &ws, &upper);
        assert_eq!(shots.len(), 1, "{shots:?}");
        assert_eq!(shots[0].path, "shots/b.png");
    }

    /// The check replaced its record with a symlink to a record outside, and recorded a PNG
    /// path that is a symlink: neither is followed.
    #[test]
    fn a_symlinked_record_or_screenshot_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("shots")).unwrap();
        let png = [PNG_MAGIC, b"rest"].concat();
        std::fs::write(ws.join("shots/a.png"), &png).unwrap();
        std::os::unix::fs::symlink("a.png", ws.join("shots/link.png")).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "shots/a.png\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.join("record")).unwrap();
        assert!(collect(&home.join("record"), &ws, &ws).is_empty());
        std::fs::remove_file(home.join("record")).unwrap();
        std::fs::write(home.join("record"), "shots/link.png\n").unwrap();
        assert!(collect(&home.join("record"), &ws, &ws).is_empty());
    }
}
