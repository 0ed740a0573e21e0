//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the routes (each handler's
//! `#[utoipa::path]`) and the `loopgate-api` types, and fitted to this manager's config: the
//! bearer scheme is declared, and required by every `/v1` operation, only when the manager has
//! a token (`[http] token_env`).

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};

/// The security scheme's name in the document.
pub(crate) const BEARER: &str = "bearer";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "loopgate manager API",
        description = "Submit tasks, follow and steer runs, read their evidence and snapshots. \
            Every error answers `{\"error\": {\"code\", \"message\"}}` with a stable `code`."
    ),
    tags(
        (name = "runs", description = "runs: submit, read, steer"),
        (name = "snapshots", description = "frozen workspaces and check outputs"),
        (name = "console", description = "the operator console's page and assets (no data; never need a token)"),
        (name = "service", description = "probes, metrics and this document (never need a token)"),
    ),
    components(schemas(loopgate_api::ErrorBody))
)]
struct ApiDoc;

/// The document's info, tags and shared schemas, before the routes add their paths.
pub(crate) fn base() -> OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// The document as served, serialized once when the router is built.
#[derive(Clone)]
pub(crate) struct OpenApiJson(pub Arc<str>);

impl OpenApiJson {
    pub(crate) fn new(doc: &OpenApi) -> Self {
        OpenApiJson(Arc::from(doc.to_json().unwrap_or_default()))
    }
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    responses((status = 200, description = "the OpenAPI 3.1 document", body = serde_json::Value))
)]
pub(crate) async fn openapi_json(Extension(doc): Extension<OpenApiJson>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
        .into_response()
}

fn operations_mut(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// utoipa marks an optional body (`request_body = Option<T>`) by leaving it not required and
/// also allowing `null` in its schema; the server takes no body or a `T`, never `null`.
pub(crate) fn drop_null_from_optional_bodies(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for operation in operations_mut(item) {
            let Some(body) = operation.request_body.as_mut() else {
                continue;
            };
            for content in body.content.values_mut() {
                if let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema {
                    let mut rest = one_of.items.iter().filter(|s| !is_null_schema(s));
                    if let (Some(only), None) = (rest.next(), rest.next()) {
                        content.schema = Some(only.clone());
                    }
                }
            }
        }
    }
}

fn is_null_schema(schema: &RefOr<Schema>) -> bool {
    matches!(schema, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null))
}

/// Declare the bearer scheme and require it, with its 401 answer, on every `/v1` operation.
pub(crate) fn require_bearer(doc: &mut OpenApi) {
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            BEARER,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    let unauthorized = ResponseBuilder::new()
        .description("`unauthorized`: no `Authorization: Bearer <token>`, or the wrong token")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody"))))
                .build(),
        )
        .build();
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for operation in operations_mut(item) {
            operation.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
            operation
                .responses
                .responses
                .insert("401".into(), RefOr::T(unauthorized.clone()));
        }
    }
}
