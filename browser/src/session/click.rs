//! A click that lands where it was aimed: the element's centre measured, the point checked to
//! hit the element, and pointer events that would reach something else swallowed.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, GetBoxModelParams, ResolveNodeParams, ScrollIntoViewIfNeededParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, RemoteObject, RemoteObjectId,
};
use chromiumoxide::layout::Point;
use chromiumoxide::Page;

use super::Session;
use crate::error::BrowserError;

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

/// Where a click's point lands.
enum Hit {
    Target,
    Other(String),
}

impl Session {
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
    pub(super) async fn object_of(
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
    pub(super) async fn call_on(
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
}
