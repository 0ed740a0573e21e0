//! The task's `[gui] serve` command: started in the workspace, waited on until its URL takes
//! connections, stopped (the whole process group) when dropped.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::error::BrowserError;

/// A running `serve` command.
pub struct Served {
    child: Child,
    url: String,
}

impl Served {
    /// Start `command` with `sh -c` in `dir` and wait until `url`'s host:port accepts a TCP
    /// connection, at most `timeout`.
    pub async fn start(
        command: &str,
        dir: &Path,
        url: &str,
        envs: &[(String, String)],
        timeout: Duration,
    ) -> Result<Served, BrowserError> {
        let addr = host_port(url).ok_or_else(|| {
            BrowserError::Serve(format!("url {url:?} is not an http URL with a host"))
        })?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(dir)
            .envs(envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BrowserError::Serve(format!("cannot start {command:?}: {e}")))?;
        let mut served = Served {
            child,
            url: url.to_string(),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if tokio::net::TcpStream::connect(addr.as_str()).await.is_ok() {
                return Ok(served);
            }
            if let Ok(Some(status)) = served.child.try_wait() {
                return Err(BrowserError::Serve(format!(
                    "{command:?} exited ({status}) before {url} answered"
                )));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BrowserError::Serve(format!(
                    "{url} did not answer within {}s of starting {command:?}",
                    timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The URL it serves.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.start_kill();
    }
}

/// `host:port` of an http(s) URL (port defaulted by scheme).
pub fn host_port(url: &str) -> Option<String> {
    let (rest, default_port) = if let Some(r) = url.strip_prefix("http://") {
        (r, 80)
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, 443)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() {
        return None;
    }
    if authority.starts_with('[') {
        return Some(if authority.contains("]:") {
            authority.to_string()
        } else {
            format!("{authority}:{default_port}")
        });
    }
    Some(if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:{default_port}")
    })
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn host_ports() {
        let cases = [
            ("http://127.0.0.1:8000/", Some("127.0.0.1:8000")),
            ("http://localhost/x", Some("localhost:80")),
            ("https://localhost", Some("localhost:443")),
            ("http://[::1]:9/", Some("[::1]:9")),
            ("ftp://x/", None),
            ("http:///", None),
        ];
        for (url, want) in cases {
            assert_eq!(host_port(url).as_deref(), want, "{url}");
        }
    }
}
