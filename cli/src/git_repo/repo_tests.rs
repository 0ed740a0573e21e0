//! `read_start` and `write_result` against real repositories made here with the `git` binary
//! (which also checks what was written: `git cat-file`, `git am`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write(dir: &Path, rel: &str, content: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A repository with a tracked file, an executable, a symlink, `.gitignore`d output, an
/// untracked secret and a `.gitattributes` marking `*.txt` text.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(root, "src/app.py", "print('hi')\n");
    write(root, "run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("src/app.py", root.join("app.py")).unwrap();
    write(root, ".gitignore", "build/\n");
    write(root, ".gitattributes", "*.txt text\n");
    write(root, "notes.txt", "one\ntwo\n");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "start"]);
    write(root, ".env", "SECRET=1\n");
    write(root, "build/out.bin", "built\n");
    dir
}

fn paths(start: &StartTree) -> Vec<&str> {
    start.files.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn the_start_is_the_commit_tree_only() {
    let dir = fixture();
    let root = dir.path();
    write(root, "src/app.py", "print('edited')\n");
    let start = read_start(root, None, false, 1 << 20).unwrap();
    assert_eq!(
        paths(&start),
        [
            ".gitattributes",
            ".gitignore",
            "app.py",
            "notes.txt",
            "run.sh",
            "src/app.py"
        ]
    );
    let file = |p: &str| start.files.iter().find(|f| f.path == p).unwrap();
    assert_eq!(file("src/app.py").content, b"print('hi')\n");
    assert_eq!(file("app.py").content, b"print('hi')\n");
    assert_eq!(
        (file("run.sh").mode, file("notes.txt").mode),
        (0o755, 0o644)
    );
    let head = git(root, &["rev-parse", "HEAD"]);
    let tree = git(root, &["rev-parse", "HEAD^{tree}"]);
    assert_eq!(start.origin.commit, head.trim());
    assert_eq!(start.origin.tree, tree.trim());
    assert_eq!(start.origin.ref_name.as_deref(), Some("refs/heads/main"));
    assert!(!start.origin.dirty && start.dirty.is_empty());

    // --include-dirty: the tracked change, through the clean filter; nothing untracked;
    // nothing written to the repository.
    write(root, "notes.txt", "one\r\nthree\r\n");
    let objects_before = git(root, &["count-objects"]);
    let start = read_start(root, None, true, 1 << 20).unwrap();
    assert_eq!(start.dirty, ["notes.txt", "src/app.py"]);
    assert!(start.origin.dirty);
    let file = |p: &str| start.files.iter().find(|f| f.path == p).unwrap();
    assert_eq!(file("src/app.py").content, b"print('edited')\n");
    assert_eq!(file("notes.txt").content, b"one\nthree\n");
    assert!(!paths(&start).contains(&".env"));
    assert_eq!(git(root, &["count-objects"]), objects_before);

    // --ref names another commit; with --include-dirty only HEAD is allowed.
    git(root, &["tag", "v1"]);
    git(root, &["commit", "-q", "-am", "second"]);
    let start = read_start(root, Some("v1"), false, 1 << 20).unwrap();
    assert_eq!(start.origin.ref_name.as_deref(), Some("v1"));
    assert!(matches!(
        read_start(root, Some("v1"), true, 1 << 20),
        Err(RepoError::DirtyNeedsHead { .. })
    ));
    assert!(matches!(
        read_start(root, Some("nope"), false, 1 << 20),
        Err(RepoError::NoSuchRevision { .. })
    ));
    let elsewhere = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_start(elsewhere.path(), None, false, 1 << 20),
        Err(RepoError::NotARepository { .. })
    ));
}

#[test]
fn submodules_are_refused() {
    let dir = fixture();
    let root = dir.path();
    let head = git(root, &["rev-parse", "HEAD"]);
    let cacheinfo = format!("160000,{},vendor/lib", head.trim());
    git(root, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
    git(root, &["commit", "-q", "-m", "submodule"]);
    let err = read_start(root, None, false, 1 << 20).unwrap_err();
    assert!(
        matches!(err, RepoError::Submodule { ref path } if path == "vendor/lib"),
        "{err}"
    );
    assert!(
        err.to_string().contains("submodules are not supported"),
        "{err}"
    );
}

fn status_snapshot(root: &Path) -> (String, String, String, Vec<u8>) {
    (
        git(root, &["rev-parse", "HEAD"]),
        git(root, &["symbolic-ref", "HEAD"]),
        git(
            root,
            &["--no-optional-locks", "status", "--porcelain", "--ignored"],
        ),
        std::fs::read(root.join(".git/index")).unwrap(),
    )
}

#[test]
fn the_result_is_one_commit_on_a_new_branch_or_a_patch() {
    let dir = fixture();
    let root = dir.path();
    let start = read_start(root, None, false, 1 << 20).unwrap();
    let mut files: Vec<(String, u32, Vec<u8>)> = start
        .files
        .iter()
        .filter(|f| f.path != "run.sh")
        .map(|f| (f.path.clone(), f.mode, f.content.clone()))
        .collect();
    files.push((
        "new/tool.sh".into(),
        0o755,
        b"#!/bin/sh\necho new\n".to_vec(),
    ));
    for f in files.iter_mut() {
        if f.0 == "notes.txt" {
            f.2 = b"one\r\ntwo\r\nthree\r\n".to_vec();
        }
    }
    let finals: Vec<FinalFile<'_>> = files
        .iter()
        .map(|(path, mode, content)| FinalFile {
            path,
            mode: *mode,
            content,
        })
        .collect();
    let before = status_snapshot(root);
    let branch = ResultTarget::Branch("loopgate/r1".into());
    let message = "loopgate: test\n\nLoopgate-Certificate: abc\n";
    let written = write_result(root, &start.origin, &finals, message, &branch).unwrap();
    assert_eq!(
        status_snapshot(root),
        before,
        "HEAD, index and working tree unchanged"
    );
    assert_eq!(
        git(root, &["rev-parse", "loopgate/r1"]).trim(),
        written.commit
    );
    assert_eq!(
        git(root, &["rev-parse", "loopgate/r1^"]).trim(),
        start.origin.commit
    );
    let listing = git(root, &["ls-tree", "-r", "loopgate/r1"]);
    let modes: Vec<(String, String)> = listing
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            (
                path.to_string(),
                meta.split(' ').next().unwrap().to_string(),
            )
        })
        .collect();
    let mode = |p: &str| modes.iter().find(|(q, _)| q == p).map(|(_, m)| m.as_str());
    assert_eq!(mode("app.py"), Some("120000"), "the symlink stays one");
    assert_eq!(mode("new/tool.sh"), Some("100755"));
    assert_eq!(mode("run.sh"), None, "removed");
    assert_eq!(
        git(root, &["show", "loopgate/r1:notes.txt"]),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        git(
            root,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Loopgate-Certificate,valueonly)",
                "loopgate/r1"
            ]
        )
        .trim(),
        "abc"
    );
    // The branch exists now: refused, nothing moved, no object written.
    let objects = git(root, &["count-objects", "-v"]);
    let again = write_result(root, &start.origin, &finals, message, &branch);
    assert!(
        matches!(again, Err(RepoError::BranchExists(_))),
        "{again:?}"
    );
    assert!(matches!(
        write_result(
            root,
            &start.origin,
            &finals,
            message,
            &ResultTarget::Branch("a..b".into())
        ),
        Err(RepoError::BadBranchName(_))
    ));
    assert_eq!(git(root, &["count-objects", "-v"]), objects);

    // The patch: nothing written to the repository, `git am` applies it on the start.
    let work = tempfile::tempdir().unwrap();
    let patch = work.path().join("run.patch");
    let objects = git(root, &["count-objects"]);
    let target = ResultTarget::Patch(patch.clone());
    write_result(root, &start.origin, &finals, message, &target).unwrap();
    assert_eq!(git(root, &["count-objects"]), objects);
    assert!(matches!(
        write_result(root, &start.origin, &finals, message, &target),
        Err(RepoError::PatchExists(_))
    ));
    git(
        root,
        &["switch", "-q", "-c", "am-check", &start.origin.commit],
    );
    git(root, &["am", "-q", patch.to_str().unwrap()]);
    assert_eq!(
        git(root, &["rev-parse", "HEAD^{tree}"]),
        git(root, &["rev-parse", "loopgate/r1^{tree}"])
    );

    // The same files as the start: nothing to apply. A start commit the repo lacks: named.
    let same: Vec<FinalFile<'_>> = start
        .files
        .iter()
        .map(|f| FinalFile {
            path: &f.path,
            mode: f.mode,
            content: &f.content,
        })
        .collect();
    let other = ResultTarget::Branch("other".into());
    let (objects, refs) = (
        git(root, &["count-objects", "-v"]),
        git(root, &["for-each-ref"]),
    );
    assert!(matches!(
        write_result(root, &start.origin, &same, message, &other),
        Err(RepoError::NothingToApply)
    ));
    let mut gone = start.origin.clone();
    gone.commit = "0123456789abcdef0123456789abcdef01234567".into();
    let err = write_result(root, &gone, &finals, message, &other).unwrap_err();
    assert!(matches!(err, RepoError::StartCommitGone { .. }), "{err}");
    assert!(git(root, &["branch", "--list", "other"]).is_empty());
    // Refused: no object and no ref written.
    assert_eq!(git(root, &["count-objects", "-v"]), objects);
    assert_eq!(git(root, &["for-each-ref"]), refs);
}
