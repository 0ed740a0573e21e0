//! The task's optional `[gui]` table: which backend its gui episodes need (headless Chromium
//! or a desktop on a private X display), a command that serves the artifact (started in the
//! workspace for browser episodes and for browser checks) and the URL it serves. Pure.

use serde::{Deserialize, Serialize};

/// Set by the auditor for every check: the file `loopgate browse` appends the path of each
/// screenshot it wrote to (one a line), so the check's own screenshots become its evidence.
pub const BROWSE_RECORD_ENV: &str = "LOOPGATE_BROWSE_RECORD";

/// Set for a `[gui]` task's checks (the audit's and the executor's self-checks): the URL
/// `loopgate browse --url /path` joins paths to.
pub const GUI_URL_ENV: &str = "LOOPGATE_GUI_URL";

/// Set for a `[gui]` task's checks: the command `loopgate browse` starts in the check's copy
/// (inside the check's sandbox) and stops when the check ends.
pub const GUI_SERVE_ENV: &str = "LOOPGATE_GUI_SERVE";

/// Longest `serve` command accepted.
pub const MAX_SERVE_CHARS: usize = 2_000;

/// What a gui episode drives: a headless browser (the default) or a desktop program on a
/// private X display.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum GuiBackend {
    #[default]
    Browser,
    Desktop,
}

impl GuiBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            GuiBackend::Browser => "browser",
            GuiBackend::Desktop => "desktop",
        }
    }

    /// The default (serialized records leave it out).
    pub fn is_browser(&self) -> bool {
        *self == GuiBackend::Browser
    }
}

/// `[gui]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GuiFile {
    /// `browser` (default: headless Chromium, the `browser_*` tools) or `desktop` (a private X
    /// display, the `desktop_*` tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<GuiBackend>,
    /// Command started with `sh -c` in the workspace (e.g. `python3 -m http.server 8000`): one
    /// line of at most 2000 characters, no NUL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 2000, pattern = r"^[^\u0000]*$")
    )]
    pub serve: Option<String>,
    /// The URL the command serves (`http://127.0.0.1:8000/`); paths starting with `/` in the
    /// browser tools and `loopgate browse --url` are joined to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A validated `[gui]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuiSpec {
    /// The backend its gui episodes need.
    #[serde(default, skip_serializing_if = "GuiBackend::is_browser")]
    pub backend: GuiBackend,
    /// The serve command, if the artifact needs one (a static page opens as a file without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<String>,
    /// The served URL (required with `serve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl GuiFile {
    /// Validate: `url` is an http URL on loopback; `serve` needs `url`. Errors name the field
    /// (`gui.url`) and the problem.
    pub fn validate(&self) -> Result<GuiSpec, (String, String)> {
        let field = |name: &str, problem: &str| (format!("gui.{name}"), problem.to_string());
        let serve = self
            .serve
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        if serve.is_some_and(|s| s.chars().count() > MAX_SERVE_CHARS || s.contains('\0')) {
            return Err(field(
                "serve",
                "must be one shell command line under 2000 characters",
            ));
        }
        let url = self.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
        if let Some(url) = url {
            if !is_loopback_http(url) {
                return Err(field(
                    "url",
                    "must be an http URL on loopback (http://127.0.0.1:PORT/ or http://localhost:PORT/)",
                ));
            }
        }
        let backend = self.backend.unwrap_or_default();
        if backend == GuiBackend::Desktop && (serve.is_some() || url.is_some()) {
            return Err(field(
                if serve.is_some() { "serve" } else { "url" },
                "is for the browser backend; a desktop episode launches its program with desktop_launch",
            ));
        }
        if serve.is_some() && url.is_none() {
            return Err(field(
                "url",
                "is required with gui.serve: the URL the command serves",
            ));
        }
        Ok(GuiSpec {
            backend,
            serve: serve.map(str::to_string),
            url: url.map(str::to_string),
        })
    }
}

impl GuiSpec {
    /// The environment a check of this task runs with: [`GUI_URL_ENV`] and [`GUI_SERVE_ENV`]
    /// where `[gui]` sets them. The auditor's checks and the executor's self-checks get the
    /// same, so a browser check means the same thing in both.
    pub fn check_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(url) = &self.url {
            env.push((GUI_URL_ENV.to_string(), url.clone()));
        }
        if let Some(serve) = &self.serve {
            env.push((GUI_SERVE_ENV.to_string(), serve.clone()));
        }
        env
    }
}

/// An `http://` URL whose host is `localhost`, `127.x.x.x` or `[::1]`.
pub fn is_loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gui_tables() {
        use GuiBackend::{Browser, Desktop};
        let cases: &[(Option<&str>, Option<&str>, Result<(), &str>)] = &[
            (None, None, Ok(())),
            (None, Some("http://127.0.0.1:8000/"), Ok(())),
            (
                Some("python3 -m http.server 8000"),
                Some("http://localhost:8000/"),
                Ok(()),
            ),
            (Some("python3 -m http.server 8000"), None, Err("gui.url")),
            (None, Some("https://127.0.0.1/"), Err("gui.url")),
            (None, Some("http://example.com/"), Err("gui.url")),
            (None, Some("http://u@127.0.0.1/"), Err("gui.url")),
            (None, Some("http://[::1]:9/"), Ok(())),
            (Some("   "), None, Ok(())),
        ];
        for (serve, url, want) in cases {
            let file = GuiFile {
                backend: None,
                serve: serve.map(str::to_string),
                url: url.map(str::to_string),
            };
            let got = file.validate();
            match want {
                Ok(()) => assert!(got.is_ok(), "{file:?}: {got:?}"),
                Err(f) => assert_eq!(
                    got.err().map(|(field, _)| field).as_deref(),
                    Some(*f),
                    "{file:?}"
                ),
            }
        }
        // (backend, serve, url, the backend kept or the field refused)
        let backends: &[(
            Option<GuiBackend>,
            Option<&str>,
            Option<&str>,
            Result<GuiBackend, &str>,
        )] = &[
            (None, None, None, Ok(Browser)),
            (Some(Browser), None, None, Ok(Browser)),
            (Some(Desktop), None, None, Ok(Desktop)),
            (
                Some(Desktop),
                Some("python3 -m http.server 8000"),
                Some("http://127.0.0.1:8000/"),
                Err("gui.serve"),
            ),
            (
                Some(Desktop),
                None,
                Some("http://127.0.0.1:8000/"),
                Err("gui.url"),
            ),
        ];
        for (backend, serve, url, want) in backends {
            let file = GuiFile {
                backend: *backend,
                serve: serve.map(str::to_string),
                url: url.map(str::to_string),
            };
            let got = file.validate().map(|spec| spec.backend).map_err(|(f, _)| f);
            assert_eq!(got, want.map_err(str::to_string), "{file:?}");
        }
    }

    #[test]
    fn backend_on_the_wire() {
        let desktop: GuiFile = serde_json::from_str(r#"{"backend":"desktop"}"#).unwrap_or_default();
        assert_eq!(desktop.backend, Some(GuiBackend::Desktop));
        assert!(serde_json::from_str::<GuiFile>(r#"{"backend":"x11"}"#).is_err());
        // A browser spec serializes as before (records and messages from older versions).
        let spec = GuiSpec::default();
        assert_eq!(serde_json::to_string(&spec).unwrap_or_default(), "{}");
        let old: GuiSpec = serde_json::from_str("{}").unwrap_or_default();
        assert_eq!(old.backend, GuiBackend::Browser);
    }
}
