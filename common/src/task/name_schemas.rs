//! The OpenAPI schemas of the names in a task file: criterion ids and model profile names, as
//! [`super::TaskFile::validate`] accepts them. Only the schemas exist (`loopgate-api`'s tests
//! hold them to the validation).

#![allow(dead_code)]

use utoipa::openapi::schema::{ArrayBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::ToSchema;

/// A criterion id or a model profile name: 1-64 letters, digits, `-`, `_` or `.` (spaces
/// around it are dropped).
#[derive(ToSchema)]
#[schema(
    pattern = r"^[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[A-Za-z0-9._-]{1,64}[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
)]
pub struct Name(String);

/// Executor profiles in the order they are tried: not empty, each once (`min_items` and
/// `unique_items` are not derivable on a newtype, hence the hand-written schema).
pub struct ProfileLadder;

impl utoipa::PartialSchema for ProfileLadder {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(Ref::from_schema_name(Name::name()))
            .min_items(Some(1))
            .unique_items(true)
            .description(Some(
                "Executor profiles in the order they are tried: not empty, each once.",
            ))
            .into()
    }
}

impl ToSchema for ProfileLadder {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((
            Name::name().into_owned(),
            <Name as utoipa::PartialSchema>::schema(),
        ));
    }
}

/// One profile name, or a cost-ordered ladder of them (`executor = ["cheap", "strong"]`).
#[derive(ToSchema)]
#[schema(as = ProfileChoice)]
#[serde(untagged)]
pub enum ProfileChoice {
    One(Name),
    Ladder(ProfileLadder),
}
