//! `loopgate browse` against real headless Chromium: a check that passes only after its click,
//! the screenshot as evidence, `[gui] serve` started and stopped around it.

use std::process::Command;

const PAGE: &str = r#"<!doctype html><title>Todo</title>
<label>New item <input id="item"></label>
<button onclick="var li=document.createElement('li');li.textContent=document.getElementById('item').value;document.getElementById('list').appendChild(li)">Add</button>
<ul id="list"></ul>"#;

fn browse(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .arg("browse")
        .args(args)
        .current_dir(dir)
        .env_remove("LOOPGATE_GUI_URL")
        .env_remove("LOOPGATE_GUI_SERVE")
        .output();
    match out {
        Ok(out) => out,
        Err(e) => panic!("cannot run loopgate browse: {e}"),
    }
}

#[test]
fn browse_check_passes_after_click_and_fails_without() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), PAGE)?;
    let ok = browse(
        dir.path(),
        &[
            "--url",
            "index.html",
            "--fill",
            "New item=milk",
            "--click",
            "Add",
            "--expect-text",
            "milk",
            "--screenshot",
            "shots/adds-item.png",
        ],
    );
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("browse: passed"), "{stdout}");
    assert!(std::fs::read(dir.path().join("shots/adds-item.png"))?.starts_with(b"\x89PNG"));

    let no_click = browse(
        dir.path(),
        &[
            "--url",
            "index.html",
            "--fill",
            "New item=milk",
            "--expect-text",
            "milk",
            "--timeout-secs",
            "1",
        ],
    );
    let stdout = String::from_utf8_lossy(&no_click.stdout);
    assert_eq!(no_click.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  expect text"), "{stdout}");
    assert!(
        stdout.contains("button \"Add\""),
        "the failure shows the page: {stdout}"
    );

    let bad = browse(dir.path(), &["--url", "index.html", "--fill", "novalue"]);
    assert_eq!(bad.status.code(), Some(2));
    Ok(())
}

#[test]
fn browse_starts_the_serve_command_and_stops_it() -> anyhow::Result<()> {
    if Command::new("python3").arg("--version").output().is_err() {
        anyhow::bail!("python3 is needed for the serve test");
    }
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), PAGE)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let serve = format!("exec python3 -m http.server {port} --bind 127.0.0.1");
    let out = browse(
        dir.path(),
        &[
            "--base-url",
            &base,
            "--serve",
            &serve,
            "--url",
            "/index.html",
            "--fill",
            "New item=eggs",
            "--click",
            "Add",
            "--expect-text",
            "eggs",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("navigate /index.html: {base}/index.html")),
        "{stdout}"
    );
    // Stopped after: the port is free again (the killed server's exit may take a moment).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the serve command still holds port {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}
