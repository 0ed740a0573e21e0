//! Where the browser may go: a workspace-relative file, or an http URL on loopback. Pure.

use std::path::{Component, Path};

use crate::error::BrowserError;

/// The navigation policy for one browser.
#[derive(Debug, Clone)]
pub struct TargetPolicy {
    /// Files open from here (the materialized workspace). `None`: no file URLs.
    pub workspace: Option<std::path::PathBuf>,
    /// Base for paths starting with `/` (the task's `[gui] url`), when a server runs.
    pub base_url: Option<String>,
    /// Allow any http(s) host, not just loopback (the worker allows agent network).
    pub allow_network: bool,
}

/// Resolve what the model or check author wrote into a URL the browser may open.
pub fn resolve_target(policy: &TargetPolicy, raw: &str) -> Result<String, BrowserError> {
    let raw = raw.trim();
    let refuse = |reason: &str| BrowserError::Refused {
        url: raw.to_string(),
        reason: reason.to_string(),
    };
    if raw.is_empty() {
        return Err(refuse("empty URL"));
    }
    if raw == "about:blank" {
        return Ok(raw.to_string());
    }
    if let Some(rest) = raw
        .strip_prefix("http://")
        .or_else(|| raw.strip_prefix("https://"))
    {
        let host = host_of(rest);
        if policy.allow_network || is_loopback(&host) {
            return Ok(raw.to_string());
        }
        return Err(refuse(
            "only loopback http URLs (the task's [gui] serve command) or workspace paths",
        ));
    }
    if raw.contains("://") || raw.starts_with("file:") || raw.starts_with("javascript:") {
        return Err(refuse(
            "only http URLs on loopback or workspace-relative paths",
        ));
    }
    if raw.starts_with('/') {
        if let Some(base) = &policy.base_url {
            return Ok(format!("{}{}", base.trim_end_matches('/'), raw));
        }
    }
    let Some(workspace) = &policy.workspace else {
        return Err(refuse("no workspace to open files from"));
    };
    let (path_part, suffix) = split_suffix(raw);
    let relative = Path::new(path_part.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(refuse("path leaves the workspace"));
    }
    let full = workspace.join(relative);
    Ok(format!("file://{}{}", full.display(), suffix))
}

fn split_suffix(raw: &str) -> (&str, &str) {
    match raw.find(['?', '#']) {
        Some(i) => (&raw[..i], &raw[i..]),
        None => (raw, ""),
    }
}

fn host_of(after_scheme: &str) -> String {
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or_default().to_string();
    }
    authority
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> TargetPolicy {
        TargetPolicy {
            workspace: Some("/ws".into()),
            base_url: None,
            allow_network: false,
        }
    }

    #[test]
    fn targets() {
        let served = TargetPolicy {
            base_url: Some("http://127.0.0.1:8000/".into()),
            ..policy()
        };
        let cases: &[(&TargetPolicy, &str, Option<&str>)] = &[
            (&policy(), "index.html", Some("file:///ws/index.html")),
            (&policy(), "./a/b.html#x", Some("file:///ws/./a/b.html#x")),
            (&policy(), "/index.html", Some("file:///ws/index.html")),
            (&served, "/", Some("http://127.0.0.1:8000/")),
            (&served, "/a?q=1", Some("http://127.0.0.1:8000/a?q=1")),
            (
                &policy(),
                "http://127.0.0.1:8000/x",
                Some("http://127.0.0.1:8000/x"),
            ),
            (&policy(), "http://localhost/", Some("http://localhost/")),
            (&policy(), "http://[::1]:9/", Some("http://[::1]:9/")),
            (&policy(), "about:blank", Some("about:blank")),
            (&policy(), "http://example.com/", None),
            (&policy(), "http://127.0.0.1.evil.com/", None),
            (&policy(), "http://user@10.0.0.1/", None),
            (&policy(), "file:///etc/passwd", None),
            (&policy(), "javascript:alert(1)", None),
            (&policy(), "../secret.html", None),
            (&policy(), "a/../../x", None),
            (&policy(), "", None),
            (&policy(), "ftp://127.0.0.1/", None),
        ];
        for (p, raw, want) in cases {
            let got = resolve_target(p, raw).ok();
            assert_eq!(got.as_deref(), *want, "{raw}");
        }
        let open = TargetPolicy {
            allow_network: true,
            ..policy()
        };
        assert!(resolve_target(&open, "https://example.com/").is_ok());
    }

    #[test]
    fn no_workspace_refuses_paths() {
        let p = TargetPolicy {
            workspace: None,
            base_url: None,
            allow_network: false,
        };
        assert!(matches!(
            resolve_target(&p, "index.html"),
            Err(BrowserError::Refused { .. })
        ));
    }
}
