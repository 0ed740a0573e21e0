//! Collecting a local workspace directory into the `POST /v1/runs` upload: every regular file
//! as `{"path","mode","content_b64"}`, refusing anything a snapshot can't hold (naming it). The
//! workspace is read as the freezer reads it (`loopgate_workspace_walk`: the same default
//! ignores, symlink policy and refusals), so what uploads is what a snapshot holds.

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine;
pub use loopgate_api::{UploadedFile, WorkspaceUpload};
use loopgate_workspace_walk::{list_workspace, special_kind, Refusal, WalkError, DEFAULT_IGNORES};

/// Default cap on the total size of the uploaded files.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("workspace {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("workspace file '{path}' is a symlink to '{target}', outside the workspace")]
    SymlinkOutside { path: String, target: String },
    #[error("workspace file '{path}' is a symlink to '{target}', which does not exist")]
    DanglingSymlink { path: String, target: String },
    #[error("workspace entry '{path}' is a symlink to a directory (not supported; copy it or remove the link)")]
    SymlinkToDirectory { path: String },
    #[error("workspace entry '{path}' is a {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    #[error("workspace entry '{path}' has a name that is not valid UTF-8")]
    NonUtf8Name { path: String },
    #[error("workspace entry '{path}' has an unusable path: {problem}")]
    BadPath { path: String, problem: String },
    #[error("workspace is larger than {limit} bytes (reached {total} at '{path}')")]
    TooLarge {
        path: String,
        total: u64,
        limit: u64,
    },
    #[error("cannot read workspace entry {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl WorkspaceError {
    /// The upload's error for what the walk of `root` (canonical) ran into.
    fn of_walk(root: &Path, err: WalkError) -> WorkspaceError {
        let (path, reason) = match err {
            WalkError::Io { path, source } => return WorkspaceError::Io { path, source },
            WalkError::Refused { path, reason } => (path, reason),
        };
        match reason {
            Refusal::SymlinkOutside { target } => WorkspaceError::SymlinkOutside { path, target },
            Refusal::DanglingSymlink { target } => WorkspaceError::DanglingSymlink { path, target },
            Refusal::SymlinkToDirectory => WorkspaceError::SymlinkToDirectory { path },
            Refusal::SpecialFile => {
                // What it is (through a symlink too), for the message.
                let kind = fs::metadata(root.join(&path))
                    .map_or("special file", |meta| special_kind(&meta.file_type()));
                WorkspaceError::NotRegular { path, kind }
            }
            Refusal::NonUtf8Name => WorkspaceError::NonUtf8Name { path },
            Refusal::InvalidPath(problem) => WorkspaceError::BadPath {
                path,
                problem: problem.to_string(),
            },
            // The walk sets no size limit; the upload's own cap is `TooLarge`.
            Refusal::FileTooLarge { size, limit } => WorkspaceError::TooLarge {
                path,
                total: size,
                limit,
            },
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads every file under `root` that a snapshot of it would hold, in path order (the
/// freezer's default ignores; a symlink to a regular file inside `root` is uploaded as that
/// file's content), refusing the first entry a snapshot can't hold.
pub fn collect_workspace(
    root: &Path,
    max_total_bytes: u64,
) -> Result<WorkspaceUpload, WorkspaceError> {
    let root_meta = fs::metadata(root).map_err(io_error(root))?;
    if !root_meta.is_dir() {
        return Err(WorkspaceError::NotADirectory(root.to_path_buf()));
    }
    let ignore: Vec<String> = DEFAULT_IGNORES.iter().map(|s| s.to_string()).collect();
    let mut files = Vec::new();
    let mut total: u64 = 0;
    let listing = list_workspace(root, &ignore).map_err(|e| WorkspaceError::of_walk(root, e))?;
    let canonical = listing.root().to_path_buf();
    for listed in listing {
        let listed = listed.map_err(|e| WorkspaceError::of_walk(&canonical, e))?;
        total = total.saturating_add(listed.metadata.len());
        if total > max_total_bytes {
            return Err(WorkspaceError::TooLarge {
                path: listed.rel,
                total,
                limit: max_total_bytes,
            });
        }
        let content = fs::read(&listed.source).map_err(io_error(&listed.source))?;
        files.push(UploadedFile {
            mode: listed.mode(),
            path: listed.rel,
            content_b64: base64::engine::general_purpose::STANDARD.encode(&content),
        });
    }
    Ok(WorkspaceUpload { files })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn write(root: &Path, rel: &str, content: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn decoded(upload: &WorkspaceUpload, path: &str) -> String {
        let file = upload.files.iter().find(|f| f.path == path).unwrap();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(&file.content_b64)
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn collects_files_skips_ignored_dirs_and_normalizes_modes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "hello.py", "print('hi')\n");
        write(root, "src/lib/a.txt", "a");
        write(root, "run.sh", "#!/bin/sh\n");
        fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o700)).unwrap();
        for skipped in [
            ".git/HEAD",
            "target/x",
            "sub/node_modules/m.js",
            ".loopgate/manager.toml",
            "pkg/__pycache__/c.pyc",
        ] {
            write(root, skipped, "skip");
        }
        write(root, "targets/kept.txt", "kept");
        symlink("hello.py", root.join("alias.py")).unwrap();
        let upload = collect_workspace(root, DEFAULT_MAX_TOTAL_BYTES).unwrap();
        let paths: Vec<&str> = upload.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "alias.py",
                "hello.py",
                "run.sh",
                "src/lib/a.txt",
                "targets/kept.txt"
            ]
        );
        assert_eq!(decoded(&upload, "alias.py"), "print('hi')\n");
        let mode = |p: &str| upload.files.iter().find(|f| f.path == p).unwrap().mode;
        assert_eq!(mode("run.sh"), 0o755);
        assert_eq!(mode("hello.py"), 0o644);
    }

    #[test]
    fn hostile_entries_are_refused_by_name() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s3cret").unwrap();
        type Setup = Box<dyn Fn(&Path, &Path)>;
        type Expect = fn(&WorkspaceError) -> bool;
        let cases: Vec<(&str, Setup, Expect)> = vec![
            (
                "absolute symlink out",
                Box::new(|root, out| symlink(out.join("secret"), root.join("leak")).unwrap()),
                |e| matches!(e, WorkspaceError::SymlinkOutside { path, .. } if path == "leak"),
            ),
            (
                "relative symlink climbing out",
                Box::new(|root, _| {
                    fs::create_dir(root.join("d")).unwrap();
                    symlink("../../../../../../etc/passwd", root.join("d/up")).unwrap();
                }),
                |e| matches!(e, WorkspaceError::SymlinkOutside { path, .. } if path == "d/up"),
            ),
            (
                "symlink into a directory outside",
                Box::new(|root, out| symlink(out, root.join("outdir")).unwrap()),
                |e| matches!(e, WorkspaceError::SymlinkOutside { path, .. } if path == "outdir"),
            ),
            (
                "dangling symlink",
                Box::new(|root, _| symlink("nowhere", root.join("dangling")).unwrap()),
                |e| matches!(e, WorkspaceError::DanglingSymlink { path, .. } if path == "dangling"),
            ),
            (
                "symlink to an inside directory",
                Box::new(|root, _| {
                    fs::create_dir(root.join("real")).unwrap();
                    symlink("real", root.join("linkdir")).unwrap();
                }),
                |e| matches!(e, WorkspaceError::SymlinkToDirectory { path } if path == "linkdir"),
            ),
            (
                "fifo",
                Box::new(|root, _| {
                    let status = std::process::Command::new("mkfifo")
                        .arg(root.join("pipe"))
                        .status()
                        .unwrap();
                    assert!(status.success());
                }),
                |e| matches!(e, WorkspaceError::NotRegular { path, kind: "fifo" } if path == "pipe"),
            ),
            (
                "backslash in a name",
                Box::new(|root, _| fs::write(root.join("a\\b"), "x").unwrap()),
                |e| matches!(e, WorkspaceError::BadPath { path, .. } if path == "a\\b"),
            ),
        ];
        for (name, setup, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("ok.txt"), "ok").unwrap();
            setup(dir.path(), outside.path());
            let err = collect_workspace(dir.path(), DEFAULT_MAX_TOTAL_BYTES).unwrap_err();
            assert!(expected(&err), "{name}: got {err:?}");
        }
    }

    #[test]
    fn total_size_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", "12345");
        write(dir.path(), "b", "67890");
        assert!(collect_workspace(dir.path(), 10).is_ok());
        let err = collect_workspace(dir.path(), 9).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::TooLarge { ref path, limit: 9, .. } if path == "b"),
            "{err:?}"
        );
    }

    #[test]
    fn a_file_is_not_a_workspace() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "f", "x");
        assert!(matches!(
            collect_workspace(&dir.path().join("f"), 10),
            Err(WorkspaceError::NotADirectory(_))
        ));
        assert!(matches!(
            collect_workspace(&dir.path().join("missing"), 10),
            Err(WorkspaceError::Io { .. })
        ));
    }
}
