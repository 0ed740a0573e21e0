//! Deserializers for fields a client reads leniently, so an older or newer manager still works:
//! a field of an unexpected shape reads as its default instead of failing the whole answer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The field's value, or `T::default()` when it has another shape.
pub fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

/// A phase name, sent as a string (`"executing"`) or, by older managers, as the phase object
/// (`{"type": "executing", ...}`); anything else reads as empty.
pub fn phase_name<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    let value = Value::deserialize(deserializer)?;
    let name = match &value {
        Value::String(s) => Some(s.as_str()),
        Value::Object(map) => map.get("type").and_then(Value::as_str),
        _ => None,
    };
    Ok(name.unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Probe {
        #[serde(default, deserialize_with = "or_default")]
        count: u32,
        #[serde(default, deserialize_with = "phase_name")]
        phase: String,
    }

    #[test]
    fn odd_shapes_read_as_defaults() {
        let cases = [
            (json!({"count": 3, "phase": "executing"}), 3, "executing"),
            (
                json!({"count": "x", "phase": {"type": "auditing", "round": 1}}),
                0,
                "auditing",
            ),
            (json!({"count": null, "phase": 7}), 0, ""),
            (json!({}), 0, ""),
        ];
        for (value, count, phase) in cases {
            let probe: Probe = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(
                (probe.count, probe.phase.as_str()),
                (count, phase),
                "{value}"
            );
        }
    }
}
