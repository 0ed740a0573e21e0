//! The DevTools connection over Chromium's `--remote-debugging-pipe`: messages are JSON
//! texts ended by a NUL byte, read by the browser on its fd 3 and written on its fd 4 (the
//! launch script maps the child's stdin and stdout there). A pipe crosses the sandbox's
//! network namespace, where a DevTools port would not, and nothing else on the host can
//! connect to it.
//!
//! chromiumoxide speaks only WebSocket, so the relay accepts exactly one WebSocket connection
//! on a loopback port, on a path with a random token (anyone else who finds the port gets a
//! 404 and the relay keeps waiting for its own client), and copies messages both ways until
//! either side closes. The launch marks the browser dead when the relay ends.

use std::time::Duration;

use async_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use async_tungstenite::tungstenite::http::StatusCode;
use async_tungstenite::tungstenite::Message;
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::error::BrowserError;

/// The largest message read from the browser (a full-page screenshot is a few MB of base64).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// The probe's id: sent before chromiumoxide connects, so it never meets one of its ids.
const PROBE_ID: u64 = 1;

/// Read one NUL-ended message; `None` at end of stream.
pub(crate) async fn read_message<R: AsyncRead + Unpin>(
    from: &mut BufReader<R>,
) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = from.read_until(0, &mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&0) {
        buf.pop();
    } else {
        // The browser closed its end in the middle of a message.
        return Ok(None);
    }
    if buf.len() > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a DevTools message of {} bytes", buf.len()),
        ));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Write one message and its NUL.
pub(crate) async fn write_message<W: AsyncWrite + Unpin>(
    to: &mut W,
    text: &str,
) -> std::io::Result<()> {
    to.write_all(text.as_bytes()).await?;
    to.write_all(&[0]).await?;
    to.flush().await
}

/// Ask the browser its version and wait for the answer: the browser is up and its pipe works.
pub(crate) async fn probe<R, W>(
    to: &mut W,
    from: &mut BufReader<R>,
    timeout: Duration,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let ask = format!(r#"{{"id":{PROBE_ID},"method":"Browser.getVersion"}}"#);
    let exchange = async {
        write_message(to, &ask)
            .await
            .map_err(|e| format!("writing to the DevTools pipe: {e}"))?;
        loop {
            match read_message(from).await {
                Ok(Some(text)) => {
                    let id = serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64));
                    if id == Some(PROBE_ID) {
                        return Ok(());
                    }
                }
                Ok(None) => return Err("the browser closed its DevTools pipe".to_string()),
                Err(e) => return Err(format!("reading the DevTools pipe: {e}")),
            }
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer on the DevTools pipe within {}s",
            timeout.as_secs()
        )),
    }
}

/// A relay bound and waiting for its one client.
pub(crate) struct Relay {
    listener: TcpListener,
    path: String,
}

impl Relay {
    pub(crate) async fn bind() -> Result<Relay, BrowserError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| BrowserError::io("binding the DevTools relay", e))?;
        Ok(Relay {
            listener,
            path: format!("/devtools/browser/{}", uuid::Uuid::new_v4().simple()),
        })
    }

    /// The WebSocket URL chromiumoxide connects to.
    pub(crate) fn url(&self) -> Result<String, BrowserError> {
        let addr = self
            .listener
            .local_addr()
            .map_err(|e| BrowserError::io("reading the DevTools relay's address", e))?;
        Ok(format!("ws://{addr}{}", self.path))
    }

    /// Accept the client that knows the path (within `accept_timeout`), then copy messages
    /// between it and the pipe until either side ends.
    pub(crate) async fn run<R, W>(self, mut to: W, mut from: BufReader<R>, accept_timeout: Duration)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let Relay { listener, path } = self;
        let accepted = tokio::time::timeout(accept_timeout, async {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                // The callback's shape is tungstenite's (`Callback`), error response and all.
                #[allow(clippy::result_large_err)]
                let check = |request: &Request, response: Response| {
                    if request.uri().path() == path {
                        Ok(response)
                    } else {
                        let mut refused = ErrorResponse::new(None);
                        *refused.status_mut() = StatusCode::NOT_FOUND;
                        Err(refused)
                    }
                };
                if let Ok(ws) = async_tungstenite::tokio::accept_hdr_async(tcp, check).await {
                    return ws;
                }
            }
        })
        .await;
        drop(listener);
        let Ok(ws) = accepted else {
            tracing::debug!("nobody connected to the DevTools relay");
            return;
        };
        let (mut sink, mut stream) = ws.split();
        let to_browser = async {
            while let Some(Ok(message)) = stream.next().await {
                let text = match message {
                    Message::Text(text) => text.to_string(),
                    Message::Binary(bytes) => match String::from_utf8(bytes.to_vec()) {
                        Ok(text) => text,
                        Err(_) => continue,
                    },
                    Message::Close(_) => break,
                    _ => continue,
                };
                if write_message(&mut to, &text).await.is_err() {
                    break;
                }
            }
        };
        let from_browser = async {
            while let Ok(Some(text)) = read_message(&mut from).await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
        };
        // Either direction ending ends the connection. No closing handshake: the client must
        // see a broken connection (chromiumoxide fails its pending commands on that, and
        // would wait out their timeouts after a clean close).
        tokio::select! {
            () = to_browser => {}
            () = from_browser => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn messages_are_split_on_nul_and_a_cut_message_is_the_end() {
        let cases: [(&[u8], Vec<&str>); 4] = [
            (b"", vec![]),
            (b"{\"id\":1}\0", vec!["{\"id\":1}"]),
            (b"a\0b\0", vec!["a", "b"]),
            (b"a\0half", vec!["a"]),
        ];
        for (bytes, want) in cases {
            let mut reader = BufReader::new(bytes);
            let mut got = Vec::new();
            while let Some(m) = read_message(&mut reader).await.unwrap() {
                got.push(m);
            }
            assert_eq!(got, want, "{bytes:?}");
        }
    }

    #[tokio::test]
    async fn the_probe_waits_for_its_own_answer_and_reports_a_closed_pipe() {
        let mut sent = Vec::new();
        let answers: &[u8] = b"{\"method\":\"Target.targetCreated\"}\0{\"id\":1,\"result\":{}}\0";
        let ok = probe(
            &mut sent,
            &mut BufReader::new(answers),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(ok, Ok(()));
        assert!(sent.ends_with(b"\"Browser.getVersion\"}\0"), "{sent:?}");
        let closed = probe(
            &mut Vec::new(),
            &mut BufReader::new(&b""[..]),
            Duration::from_secs(5),
        )
        .await;
        assert!(closed.unwrap_err().contains("closed"));
    }
}
