//! The JSON schema of the manager's reply, for servers that constrain a reply to a schema.

use super::parse::{ROUTE_KEYS, STATE_KEYS, TASK_KEYS};
use super::step::Route;

/// The keys of a structured reply: each is the first of the names the JSON layer reads for it.
const SCHEMA_STATE_KEY: &str = STATE_KEYS[0];
const SCHEMA_ROUTE_KEY: &str = ROUTE_KEYS[0];
const SCHEMA_TASK_KEY: &str = TASK_KEYS[0];

/// The name [`next_step_schema`] is sent under (OpenAI's `response_format.json_schema.name`).
pub const NEXT_STEP_SCHEMA_NAME: &str = "next_step";

/// The JSON schema of the manager's reply as [`parse_next_step`] reads it first:
/// `{"current_task_state": string, "next": route, "task": string}`, every key required, no
/// other key (OpenAI's strict mode wants both). The route enum holds the routes the manager may
/// choose ([`Route::offered`]): no `invalid`, and `gui` only when `gui_offered`. The schema
/// cannot say that `cli`, `gui` and `ask` need a non-empty task; the parser still refuses an
/// empty one, and a reply that is malformed anyway goes through the defensive layers as usual.
pub fn next_step_schema(gui_offered: bool) -> serde_json::Value {
    let routes: Vec<&str> = Route::ALL
        .into_iter()
        .filter(|route| route.offered(gui_offered))
        .map(Route::as_str)
        .collect();
    let mut properties = serde_json::Map::new();
    properties.insert(
        SCHEMA_STATE_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "description": "One sentence on what is true now, from the audit evidence."
        }),
    );
    properties.insert(
        SCHEMA_ROUTE_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "enum": routes,
            "description": "The next step."
        }),
    );
    properties.insert(
        SCHEMA_TASK_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "description": "cli/gui: one concrete instruction for the executor, naming files \
                            and exact content; ask: the question; done/blocked: the reason."
        }),
    );
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": [SCHEMA_STATE_KEY, SCHEMA_ROUTE_KEY, SCHEMA_TASK_KEY],
        "additionalProperties": false
    })
}
