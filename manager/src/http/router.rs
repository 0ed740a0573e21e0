//! The router and the OpenAPI document, built from one list of handlers (`routes!`), so every
//! route is documented and every documented operation is routed. Unknown paths (404) and
//! methods (405) answer in the JSON error format too.

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri};
use axum::{Extension, Router};
use utoipa::openapi::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::auth;
use crate::http::catalog;
use crate::http::certificate;
use crate::http::console;
use crate::http::contract;
use crate::http::error::ApiError;
use crate::http::openapi::{self, OpenApiJson};
use crate::http::probes;
use crate::http::rounds;
use crate::http::run_log;
use crate::http::run_patch;
use crate::http::runs;
use crate::http::screenshots;
use crate::http::snapshot_diff;
use crate::http::snapshots;
use crate::http::state::Shared;
use crate::http::steering;
use crate::http::transcript;

/// The public routes (never behind the token) and the `/v1` API.
fn routes() -> (OpenApiRouter<Shared>, OpenApiRouter<Shared>) {
    let public = OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(probes::healthz))
        .routes(routes!(probes::readyz))
        .routes(routes!(openapi::openapi_json))
        .routes(routes!(probes::metrics))
        .routes(routes!(console::index))
        .routes(routes!(console::asset));
    let v1 = OpenApiRouter::new()
        .routes(routes!(runs::submit, runs::list_runs))
        .routes(routes!(catalog::run_counts))
        .routes(routes!(runs::get_run))
        .routes(routes!(run_log::get_log))
        .routes(routes!(run_log::get_evidence))
        .routes(routes!(screenshots::get_screenshot))
        .routes(routes!(run_log::events))
        .routes(routes!(runs::cancel))
        .routes(routes!(runs::answer))
        .routes(routes!(contract::get_contract))
        .routes(routes!(contract::approve))
        .routes(routes!(certificate::get_certificate))
        .routes(routes!(run_patch::get_patch))
        .routes(routes!(snapshots::get_manifest))
        .routes(routes!(snapshots::get_blob))
        .routes(routes!(rounds::list_rounds))
        .routes(routes!(rounds::resume))
        .routes(routes!(transcript::get_transcript))
        .routes(routes!(steering::instruct))
        .routes(routes!(steering::pause))
        .routes(routes!(steering::unpause))
        .routes(routes!(steering::continue_run))
        .routes(routes!(catalog::get_budget))
        .routes(routes!(catalog::list_models))
        .routes(routes!(catalog::parse_task))
        .routes(routes!(snapshot_diff::diff))
        .routes(routes!(snapshot_diff::integrity));
    (public, v1)
}

/// The OpenAPI document of a manager with (`token_configured`) or without a bearer token.
pub fn openapi_document(token_configured: bool) -> OpenApi {
    let (public, v1) = routes();
    finish_document(
        public.into_openapi().merge_from(v1.into_openapi()),
        token_configured,
    )
}

fn finish_document(mut doc: OpenApi, token_configured: bool) -> OpenApi {
    openapi::drop_null_from_optional_bodies(&mut doc);
    if token_configured {
        openapi::require_bearer(&mut doc);
    }
    doc
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_route",
        format!("no route {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

pub fn router(state: Shared, max_body_bytes: usize) -> Router {
    let (public, v1) = routes();
    let (public, public_doc) = public.split_for_parts();
    let (v1, v1_doc) = v1.split_for_parts();
    let doc = finish_document(public_doc.merge_from(v1_doc), state.token.is_some());
    let v1 = v1.route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::require_token,
    ));
    public
        .merge(v1)
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(unknown_route)
        .layer(Extension(OpenApiJson::new(&doc)))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        // Outermost: a request for another host is refused before any route sees it.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_allowed_host,
        ))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;

    /// Every route the router serves, as `METHOD path`.
    const ROUTES: &[&str] = &[
        "GET /healthz",
        "GET /readyz",
        "GET /openapi.json",
        "GET /metrics",
        "GET /",
        "GET /ui/{file}",
        "POST /v1/runs",
        "GET /v1/runs",
        "GET /v1/runs/{id}",
        "GET /v1/runs/{id}/log",
        "GET /v1/runs/{id}/evidence",
        "GET /v1/runs/{id}/screenshots/{sha256}",
        "GET /v1/runs/{id}/events",
        "POST /v1/runs/{id}/cancel",
        "POST /v1/runs/{id}/answer",
        "GET /v1/runs/{id}/contract",
        "POST /v1/runs/{id}/approve",
        "GET /v1/runs/{id}/certificate",
        "GET /v1/runs/{id}/patch",
        "GET /v1/snapshots/{id}",
        "GET /v1/blobs/{sha256}",
        "GET /v1/runs/{id}/rounds",
        "POST /v1/runs/{id}/resume",
        "GET /v1/runs/{id}/rounds/{n}/transcript",
        "POST /v1/runs/{id}/instructions",
        "POST /v1/runs/{id}/pause",
        "POST /v1/runs/{id}/unpause",
        "POST /v1/runs/{id}/continue",
        "GET /v1/runs/counts",
        "GET /v1/runs/{id}/budget",
        "GET /v1/models",
        "POST /v1/tasks/parse",
        "GET /v1/snapshots/{from}/diff/{to}",
        "GET /v1/snapshots/{id}/integrity",
    ];

    fn operations(doc: &Value) -> Vec<(String, &Value)> {
        let mut ops = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((format!("{} {path}", method.to_uppercase()), op));
            }
        }
        ops
    }

    #[test]
    fn every_route_is_documented_once() {
        for token in [false, true] {
            let doc = serde_json::to_value(openapi_document(token)).unwrap();
            let documented: BTreeSet<String> =
                operations(&doc).into_iter().map(|(name, _)| name).collect();
            let routed: BTreeSet<String> = ROUTES.iter().map(|r| r.to_string()).collect();
            assert_eq!(documented, routed, "token: {token}");
            assert_eq!(doc["openapi"], "3.1.0");
        }
    }

    /// The bearer scheme (and its 401) is declared only with a token, and never on the public
    /// routes; every operation documents its JSON error answers.
    #[test]
    fn security_follows_the_token() {
        for token in [false, true] {
            let doc = serde_json::to_value(openapi_document(token)).unwrap();
            assert_eq!(
                doc["components"]["securitySchemes"]["bearer"]["scheme"].as_str(),
                token.then_some("bearer"),
            );
            assert!(doc.get("security").is_none());
            for (name, op) in operations(&doc) {
                let protected = token && name.contains(" /v1/");
                assert_eq!(op.get("security").is_some(), protected, "{name}");
                assert_eq!(op["responses"].get("401").is_some(), protected, "{name}");
                let responses = op["responses"].as_object().unwrap();
                for (status, response) in responses {
                    if status.starts_with('4') || status.starts_with('5') {
                        assert_eq!(
                            response["content"]["application/json"]["schema"]["$ref"],
                            "#/components/schemas/ErrorBody",
                            "{name} {status}"
                        );
                    }
                }
            }
        }
    }

    fn refs<'a>(value: &'a Value, out: &mut BTreeSet<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.insert(r);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    /// Every `$ref` (from the routes, and from the schemas of `loopgate-api` and the
    /// `loopgate-common` types they carry) names a schema the document holds.
    #[test]
    fn every_schema_reference_resolves() {
        for token in [false, true] {
            let doc = serde_json::to_value(openapi_document(token)).unwrap();
            let mut found = BTreeSet::new();
            refs(&doc, &mut found);
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            for r in &found {
                let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
                assert!(schemas.contains_key(name), "dangling {r} (token: {token})");
            }
            for name in ["RunView", "TaskFile", "BudgetFile", "Contract", "Manifest"] {
                let r = format!("#/components/schemas/{name}");
                assert!(found.contains(r.as_str()), "{name} is never referenced");
            }
        }
    }

    /// An optional body is documented as not required, and never as `null`.
    #[test]
    fn optional_bodies_are_not_required_and_not_null() {
        let doc = serde_json::to_value(openapi_document(false)).unwrap();
        let cases = [
            ("/v1/runs/{id}/approve", false, "ApproveRequest"),
            ("/v1/runs/{id}/resume", false, "ResumeRequest"),
            ("/v1/runs/{id}/answer", true, "AnswerRequest"),
            ("/v1/runs/{id}/instructions", true, "InstructRequest"),
            ("/v1/runs/{id}/continue", true, "ContinueRequest"),
            ("/v1/runs", true, "SubmitRequest"),
        ];
        for (path, required, schema) in cases {
            let body = &doc["paths"][path]["post"]["requestBody"];
            assert_eq!(
                body["required"].as_bool().unwrap_or(false),
                required,
                "{path}"
            );
            assert_eq!(
                body["content"]["application/json"]["schema"]["$ref"],
                format!("#/components/schemas/{schema}"),
                "{path}"
            );
        }
    }
}
