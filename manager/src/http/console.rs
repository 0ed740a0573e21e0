//! The operator console: a static page and its assets (plain HTML, CSS and ES modules under
//! `manager/console/`), compiled into the binary. They hold no data, so they are served
//! without the token; the page asks for the token (when the API wants one), keeps it in the
//! tab's `sessionStorage` and sends it on every `/v1` call, which is where the data is.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::http::extract::ApiPath;

/// `(name, content type, bytes)` of every asset under `/ui/`.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../console/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/dom.js"),
    ),
    (
        "runs.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/runs.js"),
    ),
    (
        "run.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/run.js"),
    ),
    (
        "files.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/files.js"),
    ),
    (
        "submit.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/submit.js"),
    ),
    (
        "archive.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/archive.js"),
    ),
    (
        "transcript.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/transcript.js"),
    ),
];

const INDEX: &str = include_str!("../../console/index.html");

/// Only this origin's scripts, styles and API; images also from `blob:` (screenshots and
/// image files are fetched with the token, then shown from an object URL).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn page(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

/// The console's page (no data in it: every run is read through `/v1` with the token).
#[utoipa::path(
    get,
    path = "/",
    tag = "console",
    responses((status = 200, description = "the console's HTML page", body = String, content_type = "text/html"))
)]
pub(crate) async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

/// One of the console's assets (`app.js`, `style.css`, ...), compiled into the binary.
#[utoipa::path(
    get,
    path = "/ui/{file}",
    tag = "console",
    params(("file" = String, Path, description = "the asset's file name")),
    responses(
        (status = 200, description = "the asset", body = String, content_type = "text/javascript"),
        (status = 404, description = "`not_found`: no such asset", body = loopgate_api::ErrorBody),
    )
)]
pub(crate) async fn asset(ApiPath(file): ApiPath<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(name, _, _)| *name == file)
        .map(|(_, kind, body)| page(kind, body))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no console asset {file}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the page or another module imports is served (a missing one would only
    /// show as a console error in the browser).
    #[test]
    fn every_imported_module_is_served() {
        let served: Vec<&str> = ASSETS.iter().map(|(n, _, _)| *n).collect();
        let mut texts: Vec<&str> = ASSETS.iter().map(|(_, _, b)| *b).collect();
        texts.push(INDEX);
        for text in texts {
            for part in text.split("/ui/").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
                    .collect();
                assert!(served.contains(&name.as_str()), "/ui/{name} is not served");
            }
            for part in text.split("from './").skip(1) {
                let name: String = part.chars().take_while(|c| *c != '\'').collect();
                assert!(served.contains(&name.as_str()), "./{name} is not served");
            }
        }
    }
}
