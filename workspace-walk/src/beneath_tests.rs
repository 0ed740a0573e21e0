#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

fn tree() -> (tempfile::TempDir, tempfile::TempDir, RootDir) {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), b"outside").unwrap();
    let root = RootDir::open(ws.path()).unwrap();
    (ws, outside, root)
}

#[test]
fn honest_paths_read_write_and_list() {
    let (ws, _outside, root) = tree();
    root.create_dir_all("a/b").unwrap();
    root.create_dir_all("./a/b/c").unwrap();
    root.write("a/b/f.txt", b"one").unwrap();
    root.write("a/b/f.txt", b"two").unwrap();
    assert_eq!(root.read("a/b/f.txt").unwrap(), b"two");
    assert_eq!(fs::read(ws.path().join("a/b/f.txt")).unwrap(), b"two");
    root.replace("a/b/f.txt", b"three").unwrap();
    assert_eq!(root.read("a/b/f.txt").unwrap(), b"three");
    let names: Vec<String> = root
        .read_dir("a/b")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(root.symlink_metadata("a/b").unwrap().is_dir());
    assert!(root.symlink_metadata("").unwrap().is_dir());
    root.remove_file("a/b/f.txt").unwrap();
    assert!(!ws.path().join("a/b/f.txt").exists());
    root.remove_dir_all("a").unwrap();
    assert!(!ws.path().join("a").exists());
    let err = root.read("missing").unwrap_err();
    assert_eq!(err.io_kind(), Some(io::ErrorKind::NotFound), "{err}");
}

#[test]
fn paths_leaving_the_root_are_refused() {
    let (_ws, _outside, root) = tree();
    for bad in ["../x", "/etc/passwd", "a/../../x"] {
        let err = root.write(bad, b"x").unwrap_err();
        assert!(
            matches!(err, BeneathError::NotRelative { .. }),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_planted_symlink_is_never_followed() {
    let (ws, outside, root) = tree();
    symlink(outside.path(), ws.path().join("dir")).unwrap();
    symlink(outside.path().join("secret"), ws.path().join("file")).unwrap();
    symlink(outside.path().join("new"), ws.path().join("dangling")).unwrap();
    fs::write(ws.path().join("inside"), b"in").unwrap();
    symlink("inside", ws.path().join("in_link")).unwrap();
    type Op = fn(&RootDir) -> Result<(), BeneathError>;
    let ops: Vec<(&str, Op)> = vec![
        ("write through a dir link", |r| {
            r.write("dir/secret", b"pwned")
        }),
        ("write a new file through a dir link", |r| {
            r.write("dir/new", b"pwned")
        }),
        ("write a file link", |r| r.write("file", b"pwned")),
        ("write a dangling link", |r| r.write("dangling", b"pwned")),
        ("read a file link", |r| r.read("file").map(drop)),
        ("read through a dir link", |r| {
            r.read("dir/secret").map(drop)
        }),
        ("read an in-root link", |r| r.read("in_link").map(drop)),
        ("mkdir through a dir link", |r| r.create_dir_all("dir/sub")),
        ("list a dir link", |r| r.read_dir("dir").map(drop)),
        ("replace through a dir link", |r| {
            r.replace("dir/secret", b"pwned")
        }),
        ("chown through a dir link", |r| {
            r.chown("dir/secret", (u32::MAX, u32::MAX))
        }),
    ];
    for (what, op) in ops {
        let err = op(&root).unwrap_err();
        assert!(matches!(err, BeneathError::Symlink { .. }), "{what}: {err}");
        assert!(err.is_refusal() && !err.is_retryable(), "{what}");
    }
    assert_eq!(fs::read(outside.path().join("secret")).unwrap(), b"outside");
    assert!(!outside.path().join("new").exists());
    assert!(!outside.path().join("sub").exists());
}

/// A fifo the agent left where a worker reads or writes: an error, not a hung thread.
#[test]
fn a_planted_fifo_does_not_hang_a_read_or_a_write() {
    let (ws, _outside, root) = tree();
    let status = std::process::Command::new("mkfifo")
        .arg(ws.path().join("fifo"))
        .status()
        .unwrap();
    assert!(status.success());
    let (done, waiter) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let read = root.read("fifo").map(|bytes| bytes.len());
        let write = root.write("fifo", b"x").is_err();
        let _ = done.send((read.ok(), write));
    });
    let (read, write_failed) = waiter
        .recv_timeout(Duration::from_secs(5))
        .expect("a fifo hung the worker's thread");
    assert_eq!(read, Some(0), "no writer: nothing to read");
    assert!(write_failed, "no reader: the write is refused (ENXIO)");
}

#[test]
fn replace_swaps_a_symlink_out_instead_of_writing_through_it() {
    let (ws, outside, root) = tree();
    symlink(outside.path().join("secret"), ws.path().join("progress.md")).unwrap();
    root.replace("progress.md", b"restored").unwrap();
    let meta = fs::symlink_metadata(ws.path().join("progress.md")).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        fs::read(ws.path().join("progress.md")).unwrap(),
        b"restored"
    );
    assert_eq!(fs::read(outside.path().join("secret")).unwrap(), b"outside");
    assert_eq!(
        fs::read_dir(ws.path()).unwrap().count(),
        1,
        "no temp file left"
    );
}

#[test]
fn open_no_symlinks_reads_canonical_paths_and_refuses_links() {
    let (ws, outside, _root) = tree();
    let canonical = ws.path().canonicalize().unwrap();
    fs::create_dir(canonical.join("d")).unwrap();
    fs::write(canonical.join("d/f"), b"ok").unwrap();
    let mut text = String::new();
    open_no_symlinks(&canonical.join("d/f"))
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "ok");
    fs::remove_dir_all(canonical.join("d")).unwrap();
    symlink(outside.path(), canonical.join("d")).unwrap();
    fs::write(outside.path().join("f"), b"outside").unwrap();
    let err = open_no_symlinks(&canonical.join("d/f")).unwrap_err();
    assert!(matches!(err, BeneathError::Symlink { .. }), "{err}");
    assert!(matches!(
        open_no_symlinks(Path::new("relative")).unwrap_err(),
        BeneathError::NotRelative { .. }
    ));
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn chown_tree_gives_the_tree_away_and_never_follows_a_link() {
    if !is_root() {
        eprintln!("SKIP chown_tree_gives_the_tree_away_and_never_follows_a_link: needs root to chown to another user; the race test below runs as root too");
        return;
    }
    let (ws, outside, _root) = tree();
    fs::create_dir_all(ws.path().join("a/b")).unwrap();
    fs::write(ws.path().join("a/b/f"), b"x").unwrap();
    symlink(outside.path().join("secret"), ws.path().join("a/link")).unwrap();
    symlink(outside.path(), ws.path().join("dirlink")).unwrap();
    chown_tree(ws.path(), (65534, 65534)).unwrap();
    for owned in ["", "a", "a/b", "a/b/f"] {
        let meta = fs::symlink_metadata(ws.path().join(owned)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{owned}");
    }
    for kept in [outside.path().to_path_buf(), outside.path().join("secret")] {
        let meta = fs::metadata(&kept).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{}", kept.display());
    }
}

/// A directory of the tree flips between a real directory and a symlink to an outside
/// directory while `chown_tree` runs over and over: no outside file may change owner.
#[test]
fn chown_tree_loses_no_race_against_a_directory_swapped_for_a_symlink() {
    if !is_root() {
        eprintln!("SKIP chown_tree_loses_no_race_against_a_directory_swapped_for_a_symlink: needs root to chown to another user");
        return;
    }
    let (ws, outside, _root) = tree();
    for i in 0..20 {
        fs::write(outside.path().join(format!("f{i}")), b"x").unwrap();
    }
    let (flip, stop) = (ws.path().join("d"), Arc::new(AtomicBool::new(false)));
    let (parked, target) = (ws.path().join("real"), outside.path().to_path_buf());
    fs::create_dir(&flip).unwrap();
    for i in 0..20 {
        fs::write(flip.join(format!("f{i}")), b"x").unwrap();
    }
    let flipper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::rename(&flip, &parked);
                let _ = symlink(&target, &flip);
                std::thread::yield_now();
                let _ = fs::remove_file(&flip);
                let _ = fs::rename(&parked, &flip);
            }
        })
    };
    let started = Instant::now();
    let mut runs = 0;
    while started.elapsed() < Duration::from_secs(2) && runs < 3000 {
        let _ = chown_tree(ws.path(), (65534 - (runs % 2), 65534));
        runs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    for entry in fs::read_dir(outside.path()).unwrap() {
        let meta = entry.unwrap().metadata().unwrap();
        assert_eq!(meta.uid(), 0, "an outside file changed owner ({runs} runs)");
    }
    assert_eq!(fs::metadata(outside.path()).unwrap().uid(), 0);
}
