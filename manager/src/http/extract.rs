//! Request extractors whose rejections answer in the JSON error format, with the codes
//! `POST /v1/runs` has always used: `payload_too_large` (413) when the body exceeds the limit,
//! `invalid_request` (400) for everything else that is not the body, path or query a route
//! takes (not JSON, no JSON content type, the wrong shape, an unknown key). Bodies are read
//! with [`Strict`]: a struct only from a JSON object, as the document says.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;

use crate::http::error::ApiError;
use crate::http::strict_json::Strict;

/// A JSON body. `Option<ApiJson<T>>` is an optional one: absent when the request has no
/// `Content-Type` (a bare `POST`).
pub(crate) struct ApiJson<T>(pub T);

/// The body as `T`, read strictly.
fn from_json<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, ApiError> {
    T::deserialize(Strict(value)).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!("Failed to deserialize the JSON body into the target type: {e}"),
        )
    })
}

fn json_rejection(e: JsonRejection) -> ApiError {
    match e {
        JsonRejection::BytesRejection(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            e.body_text(),
        ),
        _ => ApiError::bad_request("invalid_request", e.body_text()),
    }
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match <Json<serde_json::Value> as FromRequest<S>>::from_request(req, state).await {
            Ok(Json(value)) => from_json(&value).map(ApiJson),
            Err(e) => Err(json_rejection(e)),
        }
    }
}

impl<S, T> OptionalFromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, ApiError> {
        match <Json<serde_json::Value> as OptionalFromRequest<S>>::from_request(req, state).await {
            Ok(Some(Json(value))) => from_json(&value).map(|body| Some(ApiJson(body))),
            Ok(None) => Ok(None),
            Err(e) => Err(json_rejection(e)),
        }
    }
}

/// Path parameters.
pub(crate) struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(e) => Err(path_rejection(e)),
        }
    }
}

fn path_rejection(e: PathRejection) -> ApiError {
    ApiError::bad_request("invalid_request", e.body_text())
}

/// Query parameters.
pub(crate) struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(e) => Err(query_rejection(e)),
        }
    }
}

fn query_rejection(e: QueryRejection) -> ApiError {
    ApiError::bad_request("invalid_request", e.body_text())
}
