//! loopgate-browser against real headless Chromium on pages in a temp dir.

use std::time::Duration;

use anyhow::Result;
use loopgate_browser::{
    run_script, BrowseScript, BrowserError, LaunchSettings, Session, TargetPolicy,
};

const GREETER: &str = r#"<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Hello page</h1>
<label>Name <input id="name"></label>
<button id="greet" onclick="document.getElementById('out').textContent='Hello, '+(document.getElementById('name').value||'world')+'!'">Greet</button>
<p id="out"></p>
</body></html>"#;

fn session(dir: &std::path::Path) -> Result<Session> {
    let launch = LaunchSettings::detect()?;
    Ok(Session::new(
        launch,
        TargetPolicy {
            workspace: Some(dir.to_path_buf()),
            base_url: None,
            allow_network: false,
        },
    )
    .with_load_timeout(Duration::from_secs(3)))
}

fn ref_of(snapshot: &str, needle: &str) -> Option<String> {
    let line = snapshot.lines().find(|l| l.contains(needle))?;
    let start = line.find("[ref=")? + 5;
    let end = line[start..].find(']')? + start;
    Some(line[start..end].to_string())
}

#[tokio::test]
async fn snapshot_click_type_screenshot() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), GREETER)?;
    let mut s = session(dir.path())?;
    let url = s.navigate("index.html").await?;
    assert!(url.starts_with("file://"));
    let snap = s.snapshot().await?;
    assert!(snap.contains("Page title: Greeter"), "{snap}");
    let button = ref_of(&snap, "button \"Greet\"").ok_or_else(|| anyhow::anyhow!("{snap}"))?;
    let field = ref_of(&snap, "textbox \"Name\"").ok_or_else(|| anyhow::anyhow!("{snap}"))?;
    s.type_text(&field, "Ada", false).await?;
    s.click(&button).await?;
    s.wait_for_text("Hello, Ada!", Duration::from_secs(5))
        .await?;
    let second = s.snapshot().await?;
    assert!(second.contains("Delta against the previous"), "{second}");
    assert!(second.contains("Hello, Ada!"), "{second}");
    // Refs stay valid across snapshots of one document.
    s.click(&button).await?;
    let png = s.screenshot_png().await?;
    assert!(png.starts_with(b"\x89PNG"));
    s.press_key("Tab").await?;
    assert!(matches!(
        s.press_key("NoSuchKey").await,
        Err(BrowserError::UnknownKey(_))
    ));
    Ok(())
}

#[tokio::test]
async fn bad_ref_refused_url_and_navigation_reset_refs() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), GREETER)?;
    let mut s = session(dir.path())?;
    s.navigate("index.html").await?;
    let snap = s.snapshot().await?;
    let button = ref_of(&snap, "button \"Greet\"").ok_or_else(|| anyhow::anyhow!("{snap}"))?;
    assert!(matches!(
        s.click("e999").await,
        Err(BrowserError::UnknownRef(_))
    ));
    assert!(matches!(
        s.navigate("http://example.com/").await,
        Err(BrowserError::Refused { .. })
    ));
    assert!(matches!(
        s.navigate("../../etc/passwd").await,
        Err(BrowserError::Refused { .. })
    ));
    s.navigate("index.html").await?;
    assert!(matches!(
        s.click(&button).await,
        Err(BrowserError::UnknownRef(_))
    ));
    // Still usable.
    let again = s.snapshot().await?;
    assert!(again.contains("button \"Greet\""));
    Ok(())
}

#[tokio::test]
async fn page_that_never_loads_times_out_and_session_recovers() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), GREETER)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let mut s = session(dir.path())?;
    let err = s.navigate(&format!("http://127.0.0.1:{port}/")).await;
    assert!(
        matches!(err, Err(BrowserError::LoadTimeout { .. })),
        "{err:?}"
    );
    s.navigate("index.html").await?;
    assert!(s.snapshot().await?.contains("button \"Greet\""));
    hold.abort();
    Ok(())
}

#[tokio::test]
async fn crashed_browser_is_reported_then_restarted() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), GREETER)?;
    let mut s = session(dir.path())?;
    s.navigate("index.html").await?;
    let pid = s.browser_pid().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    let pid = rustix_pid(pid)?;
    kill(pid)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let err = loop {
        match s.snapshot().await {
            Err(e) => break e,
            Ok(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Ok(_) => anyhow::bail!("browser kept answering after SIGKILL"),
        }
    };
    assert!(matches!(err, BrowserError::Crashed), "{err:?}");
    s.navigate("index.html").await?;
    assert!(s.snapshot().await?.contains("button \"Greet\""));
    Ok(())
}

fn rustix_pid(pid: u32) -> Result<i32> {
    Ok(i32::try_from(pid)?)
}

fn kill(pid: i32) -> Result<()> {
    let status = std::process::Command::new("kill")
        .arg("-KILL")
        .arg(pid.to_string())
        .status()?;
    anyhow::ensure!(status.success(), "kill failed");
    Ok(())
}

#[tokio::test]
async fn browse_script_passes_only_after_the_click() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), GREETER)?;
    let shot = dir.path().join("shots/greet.png");
    let mut s = session(dir.path())?;
    let with_click = BrowseScript {
        url: "index.html".into(),
        fills: vec![("Name".into(), "Ada".into())],
        clicks: vec!["Greet".into()],
        expect_texts: vec!["Hello, Ada!".into()],
        screenshot: Some(shot.clone()),
        wait: Duration::from_secs(5),
        settle: None,
    };
    let report = run_script(&mut s, &with_click).await;
    assert!(report.passed, "{:?}", report.steps);
    assert!(std::fs::read(&shot)?.starts_with(b"\x89PNG"));

    let without_click = BrowseScript {
        clicks: vec![],
        wait: Duration::from_millis(300),
        ..with_click.clone()
    };
    let report = run_script(&mut s, &without_click).await;
    assert!(!report.passed);
    assert!(matches!(
        report.error,
        Some(BrowserError::TextNotFound { .. })
    ));
    assert!(report
        .failure_snapshot
        .is_some_and(|t| t.contains("button \"Greet\"")));

    // A page that has stopped changing fails on the settle time, not the whole limit.
    let settled = BrowseScript {
        clicks: vec![],
        wait: Duration::from_secs(60),
        settle: Some(Duration::from_millis(300)),
        ..with_click.clone()
    };
    let report = run_script(&mut s, &settled).await;
    assert!(!report.passed);
    assert!(
        matches!(report.error, Some(BrowserError::TextNotSettled { .. })),
        "{:?}",
        report.error
    );

    // So does a field or control the page does not have.
    let no_label_settled = BrowseScript {
        clicks: vec!["Nope".into()],
        wait: Duration::from_secs(60),
        settle: Some(Duration::from_millis(300)),
        ..with_click.clone()
    };
    let report = run_script(&mut s, &no_label_settled).await;
    assert!(
        matches!(
            report.error,
            Some(BrowserError::LabelNotSettled {
                what: "control",
                ..
            })
        ),
        "{:?}",
        report.error
    );

    let no_label = BrowseScript {
        clicks: vec!["Nope".into()],
        wait: Duration::from_millis(300),
        ..with_click
    };
    let report = run_script(&mut s, &no_label).await;
    assert!(matches!(
        report.error,
        Some(BrowserError::NoSuchLabel { .. })
    ));
    let why = report
        .steps
        .iter()
        .find(|st| st.step.starts_with("click"))
        .map(|st| st.outcome.clone());
    assert!(
        matches!(&why, Some(Err(e)) if e.contains("appeared on the page within 0.3s")),
        "{why:?}"
    );
    Ok(())
}

/// A page whose field and button a script adds after load (a framework rendering): `--fill`
/// and `--click` wait for them, as `--expect-text` waits for its text.
const LATE_GREETER: &str = r#"<!doctype html><html><body><main id="app">loading…</main>
<script>
setTimeout(() => {
  document.getElementById('app').innerHTML =
    '<label for="n">Name</label><input id="n"><button id="b">Greet</button><p id="out"></p>';
  document.getElementById('b').onclick = () => {
    document.getElementById('out').textContent = 'Hello, ' + document.getElementById('n').value + '!';
  };
}, 400);
</script></body></html>"#;

#[tokio::test]
async fn fills_and_clicks_wait_for_controls_rendered_after_load() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("late.html"), LATE_GREETER)?;
    let mut s = session(dir.path())?;
    let script = BrowseScript {
        url: "late.html".into(),
        fills: vec![("Name".into(), "Ada".into())],
        clicks: vec!["Greet".into()],
        expect_texts: vec!["Hello, Ada!".into()],
        screenshot: None,
        wait: Duration::from_secs(10),
        settle: None,
    };
    let report = run_script(&mut s, &script).await;
    assert!(report.passed, "{:?}", report.steps);
    Ok(())
}

/// A page whose layout shifts on the pointer's first move: a banner is inserted above the
/// button, so the button's measured centre is the banner's by the time the mouse is pressed.
const SHIFTING: &str = r#"<!doctype html><html><head><title>Shifting</title></head><body>
<div id="top"></div>
<button id="go" onclick="document.getElementById('out').textContent='go '+(++window.goes)">Go</button>
<p id="out"></p>
<script>
window.goes = 0; window.banners = 0;
document.addEventListener('mousemove', () => {
  const b = document.createElement('button');
  b.textContent = 'Banner';
  b.style.cssText = 'display:block;width:100%;height:300px';
  b.onclick = () => { window.banners++; };
  document.getElementById('top').append(b);
}, { once: true });
</script>
</body></html>"#;

#[tokio::test]
async fn a_click_on_a_page_that_shifts_under_the_pointer_reaches_its_element_once() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), SHIFTING)?;
    let mut s = session(dir.path())?;
    s.navigate("index.html").await?;
    let snap = s.snapshot().await?;
    let go = ref_of(&snap, "button \"Go\"").ok_or_else(|| anyhow::anyhow!("{snap}"))?;
    s.click(&go).await?;
    s.wait_for_text("go 1", Duration::from_secs(5)).await?;
    let banners = s.evaluate("window.banners").await?;
    assert_eq!(banners, serde_json::json!(0), "the banner took the click");
    let goes = s.evaluate("window.goes").await?;
    assert_eq!(goes, serde_json::json!(1));
    Ok(())
}

/// A button under a transparent overlay that takes every pointer event.
const COVERED: &str = r#"<!doctype html><html><head><title>Covered</title></head><body>
<button id="go" onclick="window.goes++">Go</button>
<div id="veil" style="position:fixed;inset:0;z-index:10">veil</div>
<script>window.goes = 0;</script>
</body></html>"#;

#[tokio::test]
async fn a_click_on_a_covered_element_is_refused_with_what_covers_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("index.html"), COVERED)?;
    let mut s = session(dir.path())?;
    s.navigate("index.html").await?;
    let snap = s.snapshot().await?;
    let go = ref_of(&snap, "button \"Go\"").ok_or_else(|| anyhow::anyhow!("{snap}"))?;
    match s.click(&go).await {
        Err(BrowserError::StaleRef { reason, .. }) => {
            assert!(reason.contains("div"), "{reason}");
        }
        other => anyhow::bail!("expected a refused click, got {other:?}"),
    }
    assert_eq!(s.evaluate("window.goes").await?, serde_json::json!(0));
    Ok(())
}
