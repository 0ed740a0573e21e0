//! What a page reports as going wrong: uncaught exceptions, `console.error` calls and the
//! browser's own error log entries (failed loads, CSP refusals). Collected from the moment a
//! page opens, for tests and checks that assert a page runs clean.

use std::sync::{Arc, Mutex};

use chromiumoxide::cdp::browser_protocol::log::{EnableParams, EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::js_protocol::runtime::{
    ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown,
};
use chromiumoxide::Page;
use futures::StreamExt;

/// The errors one browser's pages reported, shared with the listener tasks.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageErrors(Arc<Mutex<Vec<String>>>);

impl PageErrors {
    fn push(&self, line: String) {
        if let Ok(mut v) = self.0.lock() {
            v.push(line);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Start collecting from `page` (the listeners end with the page).
    pub(crate) async fn watch(&self, page: &Page) {
        let _ = page.execute(EnableParams::default()).await;
        if let Ok(mut stream) = page.event_listener::<EventExceptionThrown>().await {
            let sink = self.clone();
            tokio::spawn(async move {
                while let Some(ev) = stream.next().await {
                    let d = &ev.exception_details;
                    let what = d
                        .exception
                        .as_ref()
                        .and_then(|e| e.description.clone())
                        .unwrap_or_else(|| d.text.clone());
                    sink.push(format!(
                        "exception: {what} ({}:{})",
                        d.url.clone().unwrap_or_default(),
                        d.line_number
                    ));
                }
            });
        }
        if let Ok(mut stream) = page.event_listener::<EventConsoleApiCalled>().await {
            let sink = self.clone();
            tokio::spawn(async move {
                while let Some(ev) = stream.next().await {
                    if ev.r#type == ConsoleApiCalledType::Error {
                        let args: Vec<String> = ev
                            .args
                            .iter()
                            .map(|a| {
                                a.value
                                    .as_ref()
                                    .map(|v| v.to_string())
                                    .or_else(|| a.description.clone())
                                    .unwrap_or_default()
                            })
                            .collect();
                        sink.push(format!("console.error: {}", args.join(" ")));
                    }
                }
            });
        }
        if let Ok(mut stream) = page.event_listener::<EventEntryAdded>().await {
            let sink = self.clone();
            tokio::spawn(async move {
                while let Some(ev) = stream.next().await {
                    if ev.entry.level == LogEntryLevel::Error {
                        sink.push(format!(
                            "log: {} ({})",
                            ev.entry.text,
                            ev.entry.url.clone().unwrap_or_default()
                        ));
                    }
                }
            });
        }
    }
}
