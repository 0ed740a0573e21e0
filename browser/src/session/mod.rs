//! One browser with one page: navigate, snapshot, act on refs, wait, screenshot. The agent's
//! tools and `loopgate browse` both drive this.

mod accessibility;
mod click;
pub(crate) mod text_wait;

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, FocusParams};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, NavigateParams, StopLoadingParams,
};
use chromiumoxide::error::CdpError;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;

use crate::error::BrowserError;
use crate::launch::Beside;
use crate::launch::{launch, LaunchSettings, Running};
use crate::page_errors::PageErrors;
use crate::serve::host_port;
use crate::snapshot::{frame_snapshot, render, AxItem, RefTable, Rendered, DEFAULT_SNAPSHOT_CAP};
use crate::target::{resolve_target, TargetPolicy};

use self::accessibility::ax_item;
use self::text_wait::{TextWait, TextWaitStep};

/// Runs on a field: empties it (and says so to the page) before text is inserted.
const CLEAR_FIELD: &str = "function(){ if ('value' in this) { this.value=''; this.dispatchEvent(new Event('input',{bubbles:true})); } else if (this.isContentEditable) { this.textContent=''; } }";

/// How long a navigation may take by default.
pub const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(15);

/// A browser session: started lazily, restarted after a crash.
pub struct Session {
    launch: LaunchSettings,
    policy: TargetPolicy,
    load_timeout: Duration,
    snapshot_cap: usize,
    running: Option<(Running, Page)>,
    refs: RefTable,
    last_snapshot: Option<String>,
    restarted: bool,
    errors: PageErrors,
    /// Why the `beside` (serve) command did not answer after the last launch.
    serve_down: Option<String>,
}

impl Session {
    /// A session that starts Chromium on first use.
    pub fn new(launch: LaunchSettings, policy: TargetPolicy) -> Self {
        Session {
            launch,
            policy,
            load_timeout: DEFAULT_LOAD_TIMEOUT,
            snapshot_cap: DEFAULT_SNAPSHOT_CAP,
            running: None,
            refs: RefTable::default(),
            last_snapshot: None,
            restarted: false,
            errors: PageErrors::default(),
            serve_down: None,
        }
    }

    /// Change the navigation time limit.
    pub fn with_load_timeout(mut self, timeout: Duration) -> Self {
        self.load_timeout = timeout;
        self
    }

    /// Change the snapshot size cap (bytes).
    pub fn with_snapshot_cap(mut self, cap: usize) -> Self {
        self.snapshot_cap = cap.max(256);
        self
    }

    /// The browser's process id, when one runs.
    pub fn browser_pid(&self) -> Option<u32> {
        self.running.as_ref().and_then(|(r, _)| r.pid())
    }

    /// Stop the browser (the whole process group) now.
    pub fn close(&mut self) {
        self.running = None;
        self.refs.clear();
        self.last_snapshot = None;
    }

    /// Whether the last call had to start a new browser after the old one died; cleared by
    /// reading it.
    pub fn take_restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted)
    }

    async fn page(&mut self) -> Result<Page, BrowserError> {
        if let Some((running, page)) = &self.running {
            if running.is_alive() {
                return Ok(page.clone());
            }
            self.running = None;
            self.refs.clear();
            self.last_snapshot = None;
            self.restarted = true;
        }
        let running = launch(&self.launch).await?;
        let page = running
            .browser
            .new_page("about:blank")
            .await
            .map_err(|e| protocol("Target.createTarget", e))?;
        self.errors.watch(&page).await;
        self.serve_down = match &self.launch.beside {
            Some(beside) => wait_served(&page, beside).await.err(),
            None => None,
        };
        self.running = Some((running, page.clone()));
        Ok(page)
    }

    /// Why the task's `serve` command is not answering (after the latest browser start), if
    /// it is not.
    pub fn serve_down(&self) -> Option<&str> {
        self.serve_down.as_deref()
    }

    /// Is `url` on the `serve` command's origin?
    fn is_served(&self, url: &str) -> bool {
        self.launch
            .beside
            .as_ref()
            .is_some_and(|b| host_port(&b.url).is_some() && host_port(&b.url) == host_port(url))
    }

    /// The running page, or `Crashed` if the browser died since the last call.
    async fn live_page(&mut self) -> Result<Page, BrowserError> {
        match &self.running {
            Some((running, page)) if running.is_alive() => Ok(page.clone()),
            Some(_) => {
                self.running = None;
                self.refs.clear();
                self.last_snapshot = None;
                Err(BrowserError::Crashed)
            }
            None => self.page().await,
        }
    }

    fn check_crash(&mut self, e: CdpError, command: &'static str) -> BrowserError {
        let dead = self.running.as_ref().is_some_and(|(r, _)| !r.is_alive());
        if dead || matches!(e, CdpError::Ws(_) | CdpError::ChannelSendError(_)) {
            self.running = None;
            self.refs.clear();
            self.last_snapshot = None;
            return BrowserError::Crashed;
        }
        protocol(command, e)
    }

    /// Open a URL (after the navigation policy); refs from the previous page are dropped.
    pub async fn navigate(&mut self, raw: &str) -> Result<String, BrowserError> {
        let url = resolve_target(&self.policy, raw)?;
        let mut page = self.page().await?;
        if self.is_served(&url) && self.serve_down.is_some() {
            // The serve command (and the app it runs) may have been fixed since: start both
            // again, once per navigation.
            self.close();
            page = self.page().await?;
            if let Some(down) = &self.serve_down {
                return Err(BrowserError::Serve(down.clone()));
            }
        }
        self.refs.clear();
        self.last_snapshot = None;
        match tokio::time::timeout(self.load_timeout, page.goto(url.as_str())).await {
            Ok(Ok(_)) => Ok(url),
            Ok(Err(e)) => Err(self.check_crash(e, "Page.navigate")),
            Err(_) => {
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    page.execute(StopLoadingParams::default()),
                )
                .await;
                // A navigation left hanging confuses the page's frame tracking: start the
                // next call on a fresh tab.
                self.replace_page(page).await;
                Err(BrowserError::LoadTimeout {
                    url,
                    timeout: self.load_timeout,
                })
            }
        }
    }

    async fn replace_page(&mut self, old: Page) {
        let Some((running, _)) = &self.running else {
            return;
        };
        match tokio::time::timeout(
            self.launch.command_timeout,
            running.browser.new_page("about:blank"),
        )
        .await
        {
            Ok(Ok(fresh)) => {
                if let Some((_, page)) = self.running.as_mut() {
                    *page = fresh;
                }
                let _ = tokio::time::timeout(Duration::from_secs(2), old.close()).await;
            }
            _ => self.close(),
        }
    }

    /// The page's URL and title.
    pub async fn location(&mut self) -> Result<(String, String), BrowserError> {
        let page = self.live_page().await?;
        let url = page
            .url()
            .await
            .map_err(|e| self.check_crash(e, "Target.getTargetInfo"))?;
        let title = page
            .get_title()
            .await
            .map_err(|e| self.check_crash(e, "Runtime.evaluate"))?;
        Ok((url.unwrap_or_default(), title.unwrap_or_default()))
    }

    /// The accessibility tree, rendered (refs allocated), without framing.
    pub async fn snapshot_raw(&mut self) -> Result<Rendered, BrowserError> {
        let page = self.live_page().await?;
        let tree = page
            .execute(GetFullAxTreeParams::default())
            .await
            .map_err(|e| self.check_crash(e, "Accessibility.getFullAXTree"))?;
        let items: Vec<AxItem> = tree.result.nodes.iter().map(ax_item).collect();
        Ok(render(&items, &mut self.refs))
    }

    /// What `browser_snapshot` returns: page line, then the tree (or a delta against the
    /// previous snapshot of this document when that is smaller), capped.
    pub async fn snapshot(&mut self) -> Result<String, BrowserError> {
        let rendered = self.snapshot_raw().await?;
        let (url, title) = self.location().await?;
        let body = frame_snapshot(
            self.last_snapshot.as_deref(),
            &rendered.text,
            self.snapshot_cap,
        );
        self.last_snapshot = Some(rendered.text);
        Ok(format!("Page URL: {url}\nPage title: {title}\n{body}"))
    }

    fn backend_for(&self, reference: &str) -> Result<BackendNodeId, BrowserError> {
        self.refs
            .lookup(reference)
            .map(BackendNodeId::new)
            .ok_or_else(|| BrowserError::UnknownRef(reference.to_string()))
    }

    /// Replace a field's text (focus, clear, insert), then press Enter if `submit`.
    pub async fn type_text(
        &mut self,
        reference: &str,
        text: &str,
        submit: bool,
    ) -> Result<(), BrowserError> {
        let backend = self.backend_for(reference)?;
        let page = self.live_page().await?;
        let stale = |reason: String| BrowserError::StaleRef {
            reference: reference.to_string(),
            reason,
        };
        page.execute(FocusParams::builder().backend_node_id(backend).build())
            .await
            .map_err(|e| stale(format!("it cannot take focus ({e})")))?;
        if let Some(object_id) = self.object_of(&page, reference, backend).await? {
            self.call_on(&page, object_id, CLEAR_FIELD, &[], false)
                .await?;
        }
        let insert = InsertTextParams::builder()
            .text(text)
            .build()
            .map_err(|e| BrowserError::Protocol {
                command: "Input.insertText",
                reason: e,
            })?;
        page.execute(insert)
            .await
            .map_err(|e| self.check_crash(e, "Input.insertText"))?;
        if submit {
            self.press_key("Enter").await?;
        }
        Ok(())
    }

    /// Press one key (`Enter`, `Tab`, `Escape`, `ArrowDown`, `a`, ...) on the focused element.
    pub async fn press_key(&mut self, key: &str) -> Result<(), BrowserError> {
        let def = chromiumoxide::keys::get_key_definition(key.trim())
            .ok_or_else(|| BrowserError::UnknownKey(key.to_string()))?;
        let page = self.live_page().await?;
        let mut builder = DispatchKeyEventParams::builder()
            .key(def.key)
            .code(def.code)
            .windows_virtual_key_code(def.key_code)
            .native_virtual_key_code(def.key_code);
        let text = def
            .text
            .or_else(|| (def.key.chars().count() == 1).then_some(def.key));
        let down_type = if let Some(t) = text {
            builder = builder.text(t);
            DispatchKeyEventType::KeyDown
        } else {
            DispatchKeyEventType::RawKeyDown
        };
        for kind in [down_type, DispatchKeyEventType::KeyUp] {
            let event =
                builder
                    .clone()
                    .r#type(kind)
                    .build()
                    .map_err(|e| BrowserError::Protocol {
                        command: "Input.dispatchKeyEvent",
                        reason: e,
                    })?;
            page.execute(event)
                .await
                .map_err(|e| self.check_crash(e, "Input.dispatchKeyEvent"))?;
        }
        Ok(())
    }

    /// The page's visible text (`document.body.innerText`).
    pub async fn page_text(&mut self) -> Result<String, BrowserError> {
        let page = self.live_page().await?;
        let result = page
            .evaluate("document.body ? document.body.innerText : ''")
            .await
            .map_err(|e| self.check_crash(e, "Runtime.evaluate"))?;
        Ok(result.into_value::<String>().unwrap_or_default())
    }

    /// Wait until `text` is in the page's visible text (polled every 100 ms).
    pub async fn wait_for_text(
        &mut self,
        text: &str,
        timeout: Duration,
    ) -> Result<(), BrowserError> {
        self.wait_for_text_settled(text, timeout, None).await
    }

    /// [`Session::wait_for_text`], giving up early (`TextNotSettled`) once the page's visible
    /// text has not changed for `settle` (None or zero: wait all of `timeout`).
    pub async fn wait_for_text_settled(
        &mut self,
        text: &str,
        timeout: Duration,
        settle: Option<Duration>,
    ) -> Result<(), BrowserError> {
        let mut wait = TextWait::new(tokio::time::Instant::now(), timeout, settle);
        loop {
            let page = self.page_text().await?;
            match wait.observe(&page, text, tokio::time::Instant::now()) {
                TextWaitStep::Found => return Ok(()),
                TextWaitStep::Poll => tokio::time::sleep(Duration::from_millis(100)).await,
                TextWaitStep::TimedOut => {
                    return Err(BrowserError::TextNotFound {
                        text: text.to_string(),
                        timeout,
                    })
                }
                TextWaitStep::Settled => {
                    return Err(BrowserError::TextNotSettled {
                        text: text.to_string(),
                        settle: settle.unwrap_or_default(),
                    })
                }
            }
        }
    }

    /// Evaluate a JavaScript expression on the page (a promise is awaited) and return its
    /// value as JSON (`null` for `undefined` and values JSON cannot hold).
    pub async fn evaluate(&mut self, expression: &str) -> Result<serde_json::Value, BrowserError> {
        let page = self.live_page().await?;
        let result = page
            .evaluate(expression)
            .await
            .map_err(|e| self.check_crash(e, "Runtime.evaluate"))?;
        Ok(result.value().cloned().unwrap_or(serde_json::Value::Null))
    }

    /// Every uncaught exception, `console.error` call and error log entry the pages of this
    /// session reported so far, oldest first.
    pub fn page_errors(&self) -> Vec<String> {
        self.errors.snapshot()
    }

    /// Change the viewport (CSS pixels), e.g. to a phone's width.
    pub async fn set_viewport(
        &mut self,
        width: u32,
        height: u32,
        mobile: bool,
    ) -> Result<(), BrowserError> {
        use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
        let page = self.live_page().await?;
        let params = SetDeviceMetricsOverrideParams::builder()
            .width(i64::from(width))
            .height(i64::from(height))
            .device_scale_factor(1.0)
            .mobile(mobile)
            .build()
            .map_err(|e| BrowserError::Protocol {
                command: "Emulation.setDeviceMetricsOverride",
                reason: e,
            })?;
        page.execute(params)
            .await
            .map_err(|e| self.check_crash(e, "Emulation.setDeviceMetricsOverride"))?;
        Ok(())
    }

    /// A PNG of the whole page (beyond the viewport).
    pub async fn screenshot_full_png(&mut self) -> Result<Vec<u8>, BrowserError> {
        let page = self.live_page().await?;
        page.screenshot(
            ScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Png)
                .full_page(true)
                .build(),
        )
        .await
        .map_err(|e| self.check_crash(e, "Page.captureScreenshot"))
    }

    /// A PNG of the viewport.
    pub async fn screenshot_png(&mut self) -> Result<Vec<u8>, BrowserError> {
        let page = self.live_page().await?;
        page.screenshot(
            ScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Png)
                .build(),
        )
        .await
        .map_err(|e| self.check_crash(e, "Page.captureScreenshot"))
    }
}

fn protocol(command: &'static str, e: CdpError) -> BrowserError {
    BrowserError::Protocol {
        command,
        reason: e.to_string(),
    }
}

/// Navigate to the serve command's URL until it loads (no network error), at most
/// `start_timeout`.
async fn wait_served(page: &Page, beside: &Beside) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + beside.start_timeout;
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            page.execute(NavigateParams::new(beside.url.clone())),
        )
        .await;
        let last = match attempt {
            Ok(Ok(reply)) => match &reply.result.error_text {
                None => return Ok(()),
                Some(error) => error.clone(),
            },
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the navigation hung".to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{} did not answer within {}s of starting {:?} ({last}); fix the app or the command, then navigate to it again",
                beside.url,
                beside.start_timeout.as_secs(),
                beside.command
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
