//! `GET /openapi.json`: the API described as OpenAPI 3.1.

use axum::Json;
use serde_json::{json, Value};

fn run_id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}})
}

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn errors() -> Value {
    let err = json!({"$ref": "#/components/responses/Error"});
    json!({"400": err, "401": err, "404": err, "409": err, "503": err})
}

fn with_errors(mut responses: Value) -> Value {
    if let (Some(map), Some(errs)) = (responses.as_object_mut(), errors().as_object()) {
        for (k, v) in errs {
            map.entry(k.clone()).or_insert(v.clone());
        }
    }
    responses
}

pub fn document() -> Value {
    let run = json!({"$ref": "#/components/schemas/Run"});
    let id = run_id_param();
    json!({
        "openapi": "3.1.0",
        "info": {"title": "loopgate manager API", "version": env!("CARGO_PKG_VERSION")},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": ok("error with a stable code", json!({
                "type": "object", "required": ["error"],
                "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                    "code": {"type": "string", "examples": ["invalid_task", "not_found", "unauthorized", "not_resumable", "invalid_contract", "contract_frozen", "not_awaiting_approval"]},
                    "message": {"type": "string"}}}}}))},
            "schemas": {
                "Run": {"type": "object", "required": ["id", "state", "round", "snapshot"], "properties": {
                    "id": {"type": "string"}, "name": {"type": ["string", "null"]},
                    "state": {"enum": ["queued", "running", "waiting_for_input", "completed", "blocked", "budget_exhausted", "cancelled", "failed"]},
                    "phase": {"enum": ["deciding", "executing", "auditing", "waiting_for_answer", "finished"]},
                    "generation": {"type": "integer"}, "round": {"type": "integer"}, "max_rounds": {"type": "integer"}, "counted_rounds": {"type": "integer", "description": "rounds counted against max_rounds (this generation, after planning)"},
                    "snapshot": {"type": "string"}, "base_snapshot": {"type": "string"}, "spec_hash": {"type": "string"},
                    "goal": {"type": "string"},
                    "progress": {"type": "string", "description": "progress as evidence, e.g. `acceptance 3/5 passing on snapshot abc123, rubric 7.9/8.5`"},
                    "planning": {"enum": ["spec", "contract", "approval", null]},
                    "rubric": {"type": ["object", "null"]},
                    "checks": {"type": "object", "properties": {"passing": {"type": "integer"}, "total": {"type": "integer"}}},
                    "gate": {"type": ["object", "null"]}, "verdicts": {"type": ["object", "null"]},
                    "evidence": {"type": "array", "items": {"$ref": "#/components/schemas/Evidence"}},
                    "terminal_reason": {"type": ["string", "null"]}, "question": {"type": ["string", "null"]},
                    "task_state": {"type": ["string", "null"]}, "usage": {"type": "object"}, "total_tokens": {"type": "integer"},
                    "created_at": {"type": "integer"}, "updated_at": {"type": "integer"}}},
                "Evidence": {"type": "object", "properties": {
                    "artifact_version": {"type": "string"}, "check_id": {"type": "string"},
                    "verdict": {"enum": ["pass", "fail", "inconclusive"]}, "produced_at": {"type": "integer"},
                    "log_digest": {"type": ["string", "null"]}, "exit_code": {"type": ["integer", "null"]},
                    "duration_ms": {"type": "integer"}, "output_excerpt": {"type": "string"}}},
                "Submit": {"type": "object", "required": ["task"], "properties": {
                    "task": {"type": "object", "description": "the task file (TOML) as JSON: goal, acceptance[], roles, budget, protected_paths, complete_on_gate"},
                    "workspace": {"type": "object", "properties": {"files": {"type": "array", "items": {"type": "object",
                        "required": ["path", "content_b64"], "properties": {"path": {"type": "string"}, "mode": {"type": "integer"},
                        "content_b64": {"type": "string"}}}}}}}},
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/healthz": {"get": {"summary": "liveness", "security": [], "responses": {"200": {"description": "ok"}}}},
            "/readyz": {"get": {"summary": "readiness: Redis and NATS reachable", "security": [],
                "responses": {"200": {"description": "ready"}, "503": {"$ref": "#/components/responses/Error"}}}},
            "/openapi.json": {"get": {"summary": "this document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}},
            "/v1/runs": {
                "post": {"summary": "submit a task", "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Submit"}}}},
                    "responses": with_errors(json!({"201": ok("the new run", run.clone()), "413": {"$ref": "#/components/responses/Error"}}))},
                "get": {"summary": "list runs, newest first", "parameters": [
                        {"name": "state", "in": "query", "schema": {"type": "string"}},
                        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 500}}],
                    "responses": with_errors(json!({"200": ok("runs", json!({"type": "object", "properties": {"runs": {"type": "array", "items": run.clone()}}}))}))}
            },
            "/v1/runs/{id}": {"get": {"summary": "one run", "parameters": [id.clone()], "responses": with_errors(json!({"200": ok("the run", run.clone())}))}},
            "/v1/runs/{id}/log": {"get": {"summary": "the append-only run log", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": ok("log entries", json!({"type": "object", "properties": {"entries": {"type": "array", "items": {"type": "object"}}}}))}))}},
            "/v1/runs/{id}/evidence": {"get": {"summary": "all evidence records, each bound to a snapshot", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": ok("evidence", json!({"type": "object", "properties": {"evidence": {"type": "array", "items": {"$ref": "#/components/schemas/Evidence"}}}}))}))}},
            "/v1/runs/{id}/rounds": {"get": {"summary": "per-round base and candidate snapshots with verdicts", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": ok("rounds", json!({"type": "object"}))}))}},
            "/v1/runs/{id}/events": {"get": {"summary": "Server-Sent Events: `log` per entry, then `end` with the run; honours Last-Event-ID", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": {"description": "text/event-stream"}}))}},
            "/v1/runs/{id}/cancel": {"post": {"summary": "cancel (terminal `cancelled`; in-flight episodes are told to stop)", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": ok("the run", run.clone())}))}},
            "/v1/runs/{id}/answer": {"post": {"summary": "answer the manager's question", "parameters": [id.clone()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}}},
                "responses": with_errors(json!({"200": ok("the run", run.clone())}))}},
            "/v1/runs/{id}/contract": {"get": {"summary": "the run's contract: `planning`, `proposed` (waiting for approval) or `frozen`, with its spec hash and as a TOML file", "parameters": [id.clone()],
                "responses": with_errors(json!({"200": ok("the contract", json!({"type": "object", "required": ["status", "spec_hash", "contract", "toml"]}))}))}},
            "/v1/runs/{id}/approve": {"post": {"summary": "approve the proposed contract, or replace it with an edited one (`contract`: TOML text); refused (409) once the contract is frozen", "parameters": [id.clone()],
                "requestBody": {"required": false, "content": {"application/json": {"schema": {"type": "object", "properties": {"contract": {"type": "string"}}}}}},
                "responses": with_errors(json!({"200": ok("the run", run.clone())}))}},
            "/v1/runs/{id}/resume": {"post": {"summary": "resume an ended run as a new generation, optionally with budget changes", "parameters": [id.clone()],
                "requestBody": {"required": false, "content": {"application/json": {"schema": {"type": "object", "properties": {"budget": {"type": "object"}}}}}},
                "responses": with_errors(json!({"200": ok("the run", run.clone())}))}},
            "/v1/snapshots/{id}": {"get": {"summary": "a snapshot manifest", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": with_errors(json!({"200": ok("manifest", json!({"type": "object"}))}))}},
            "/v1/blobs/{sha256}": {"get": {"summary": "a blob's bytes", "parameters": [{"name": "sha256", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": with_errors(json!({"200": {"description": "application/octet-stream"}}))}}
        }
    })
}

pub async fn openapi_json() -> Json<Value> {
    Json(document())
}
