//! One browser with one page: navigate, snapshot, act on refs, wait, screenshot. The agent's
//! tools and `loopgate browse` both drive this.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::accessibility::{AxNode, GetFullAxTreeParams};
use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, FocusParams, GetBoxModelParams, ResolveNodeParams, ScrollIntoViewIfNeededParams,
};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, NavigateParams, StopLoadingParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, RemoteObject, RemoteObjectId,
};
use chromiumoxide::error::CdpError;
use chromiumoxide::layout::Point;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;

use crate::error::BrowserError;
use crate::launch::Beside;
use crate::launch::{launch, LaunchSettings, Running};
use crate::page_errors::PageErrors;
use crate::serve::host_port;
use crate::snapshot::{frame_snapshot, render, AxItem, RefTable, Rendered, DEFAULT_SNAPSHOT_CAP};
use crate::target::{resolve_target, TargetPolicy};

/// How many times a click measures its element again when something else is at its centre.
const CLICK_HIT_TRIES: usize = 5;
/// How long a click lets a re-rendering page settle before it measures again.
const CLICK_SETTLE: Duration = Duration::from_millis(60);
/// Runs on the element: "" when the topmost element at (x, y) is it or inside it, else a short
/// description of what is there.
const HIT_PROBE: &str = r#"function(x, y) {
  if (window !== window.top) return '';
  const root = this.getRootNode && this.getRootNode().elementFromPoint ? this.getRootNode() : document;
  const e = root.elementFromPoint(x, y);
  if (e && (e === this || this.contains(e) || e.control === this)) return '';
  if (!e) return 'nothing';
  const t = (e.textContent || '').trim().slice(0, 40);
  return e.tagName.toLowerCase() + (t ? ' "' + t + '"' : '');
}"#;

/// Runs on the element: installs capture-phase listeners that let through the pointer events
/// whose path holds the element (or a label for it) and swallow the others; returns the function
/// that removes them and says what was swallowed ("" when nothing).
const CLICK_GUARD: &str = r#"function() {
  const el = this;
  let missed = '';
  const types = ['pointerdown', 'mousedown', 'pointerup', 'mouseup', 'click', 'dblclick'];
  const guard = (ev) => {
    const path = ev.composedPath();
    if (path.some((n) => n === el || n.control === el)) return;
    const t = path[0];
    missed = missed || (t && t.tagName ? t.tagName.toLowerCase() : 'the page');
    ev.preventDefault();
    ev.stopImmediatePropagation();
  };
  for (const t of types) window.addEventListener(t, guard, true);
  return () => {
    for (const t of types) window.removeEventListener(t, guard, true);
    return missed;
  };
}"#;

/// Runs on a field: empties it (and says so to the page) before text is inserted.
const CLEAR_FIELD: &str = "function(){ if ('value' in this) { this.value=''; this.dispatchEvent(new Event('input',{bubbles:true})); } else if (this.isContentEditable) { this.textContent=''; } }";

/// Where a click's point lands.
enum Hit {
    Target,
    Other(String),
}

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

    /// Click the element a ref names (real mouse events at its centre). The point is checked to
    /// land on the element (or inside it) right before the click, as Playwright's "receives
    /// pointer events" rule does: a page that re-renders and shifts its layout between the box
    /// measurement and the click is measured again instead of clicked at the old place.
    pub async fn click(&mut self, reference: &str) -> Result<(), BrowserError> {
        let backend = self.backend_for(reference)?;
        let page = self.live_page().await?;
        let mut covered = String::new();
        for attempt in 0..CLICK_HIT_TRIES {
            if attempt > 0 {
                tokio::time::sleep(CLICK_SETTLE).await;
            }
            let point = self.centre_of(&page, reference, backend).await?;
            match self.hits(&page, reference, backend, point).await? {
                Hit::Target => match self.guarded_click(&page, reference, backend, point).await? {
                    Hit::Target => return Ok(()),
                    Hit::Other(what) => covered = what,
                },
                Hit::Other(what) => covered = what,
            }
        }
        Err(BrowserError::StaleRef {
            reference: reference.to_string(),
            reason: format!("another element ({covered}) is where it was measured"),
        })
    }

    /// Scroll the element into view and return the centre of its content box.
    async fn centre_of(
        &self,
        page: &Page,
        reference: &str,
        backend: BackendNodeId,
    ) -> Result<Point, BrowserError> {
        let stale = |reason: String| BrowserError::StaleRef {
            reference: reference.to_string(),
            reason,
        };
        page.execute(
            ScrollIntoViewIfNeededParams::builder()
                .backend_node_id(backend)
                .build(),
        )
        .await
        .map_err(|e| stale(format!("cannot scroll to it ({e})")))?;
        let model = page
            .execute(
                GetBoxModelParams::builder()
                    .backend_node_id(backend)
                    .build(),
            )
            .await
            .map_err(|e| stale(format!("it has no box on the page ({e})")))?;
        let quad = model.result.model.content.inner().clone();
        if quad.len() < 8 {
            return Err(stale("it has no box on the page".into()));
        }
        Ok(Point {
            x: (quad[0] + quad[2] + quad[4] + quad[6]) / 4.0,
            y: (quad[1] + quad[3] + quad[5] + quad[7]) / 4.0,
        })
    }

    /// Click at `point` with a capture-phase guard on the page: a pointer event that lands on
    /// anything but the element (the layout moved after it was measured) is swallowed before the
    /// page sees it, and reported as a miss to be measured again.
    async fn guarded_click(
        &mut self,
        page: &Page,
        reference: &str,
        backend: BackendNodeId,
        point: Point,
    ) -> Result<Hit, BrowserError> {
        let Some(element) = self.object_of(page, reference, backend).await? else {
            page.click(point)
                .await
                .map_err(|e| self.check_crash(e, "Input.dispatchMouseEvent"))?;
            return Ok(Hit::Target);
        };
        let installed = self.call_on(page, element, CLICK_GUARD, &[], false).await?;
        let clicked = page.click(point).await;
        // Take the guard down whatever the click did; a page that navigated took it along.
        let verdict = match installed.object_id {
            Some(teardown) => self
                .call_on(page, teardown, "function() { return this(); }", &[], true)
                .await
                .ok()
                .and_then(|r| r.value),
            None => None,
        };
        clicked.map_err(|e| self.check_crash(e, "Input.dispatchMouseEvent"))?;
        Ok(match verdict {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Hit::Other(s),
            _ => Hit::Target,
        })
    }

    /// The page's handle on the element, or `None` when it has none to give.
    async fn object_of(
        &self,
        page: &Page,
        reference: &str,
        backend: BackendNodeId,
    ) -> Result<Option<RemoteObjectId>, BrowserError> {
        let object = page
            .execute(
                ResolveNodeParams::builder()
                    .backend_node_id(backend)
                    .build(),
            )
            .await
            .map_err(|e| BrowserError::StaleRef {
                reference: reference.to_string(),
                reason: format!("it is gone ({e})"),
            })?;
        Ok(object.result.object.object_id.clone())
    }

    /// Run `function` on page object `object` (as `this`) with number `args`; its result by value
    /// when `by_value`, else as a handle.
    async fn call_on(
        &mut self,
        page: &Page,
        object: RemoteObjectId,
        function: &str,
        args: &[f64],
        by_value: bool,
    ) -> Result<RemoteObject, BrowserError> {
        let mut call = CallFunctionOnParams::builder()
            .object_id(object)
            .function_declaration(function)
            .return_by_value(by_value);
        for arg in args {
            call = call.argument(CallArgument::builder().value(*arg).build());
        }
        let call = call.build().map_err(|e| BrowserError::Protocol {
            command: "Runtime.callFunctionOn",
            reason: e,
        })?;
        let reply = page
            .execute(call)
            .await
            .map_err(|e| self.check_crash(e, "Runtime.callFunctionOn"))?;
        Ok(reply.result.result.clone())
    }

    /// Whether the topmost element at `point` is the element or inside it. An element in a
    /// nested frame is taken as hit (its document measures from another origin).
    async fn hits(
        &mut self,
        page: &Page,
        reference: &str,
        backend: BackendNodeId,
        point: Point,
    ) -> Result<Hit, BrowserError> {
        let Some(object_id) = self.object_of(page, reference, backend).await? else {
            return Ok(Hit::Target);
        };
        let reply = self
            .call_on(page, object_id, HIT_PROBE, &[point.x, point.y], true)
            .await?;
        Ok(match reply.value {
            Some(serde_json::Value::String(s)) if s.is_empty() => Hit::Target,
            Some(serde_json::Value::String(s)) => Hit::Other(s),
            _ => Hit::Target,
        })
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
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.page_text().await?.contains(text) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BrowserError::TextNotFound {
                    text: text.to_string(),
                    timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
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

fn ax_text(v: &Option<chromiumoxide::cdp::browser_protocol::accessibility::AxValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

const SHOWN_FLAGS: &[&str] = &[
    "checked", "disabled", "expanded", "selected", "pressed", "required", "invalid", "level",
];

fn ax_item(node: &AxNode) -> AxItem {
    let mut flags = Vec::new();
    for prop in node.properties.iter().flatten() {
        let name = prop.name.as_ref();
        if !SHOWN_FLAGS.contains(&name) {
            continue;
        }
        match prop.value.value.as_ref() {
            Some(serde_json::Value::Bool(true)) => flags.push(name.to_string()),
            Some(serde_json::Value::String(s)) if s == "true" || s == "mixed" => {
                flags.push(if s == "true" {
                    name.to_string()
                } else {
                    format!("{name}=mixed")
                })
            }
            Some(serde_json::Value::Number(n)) => flags.push(format!("{name}={n}")),
            _ => {}
        }
    }
    let role = ax_text(&node.role);
    let value = ax_text(&node.value);
    AxItem {
        id: node.node_id.inner().clone(),
        children: node
            .child_ids
            .iter()
            .flatten()
            .map(|c| c.inner().clone())
            .collect(),
        ignored: node.ignored,
        value: (!value.is_empty()
            && matches!(
                role.as_str(),
                "textbox" | "searchbox" | "combobox" | "spinbutton" | "slider"
            ))
        .then_some(value),
        role,
        name: ax_text(&node.name),
        flags,
        backend_id: node.backend_dom_node_id.map(|b| *b.inner()),
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
