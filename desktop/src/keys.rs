//! Key names as the browser tools take them (`Enter`, `ArrowDown`, `Control+s`) to X keysym
//! names for xdotool (pure).

use crate::error::DesktopError;

/// Browser-style names that differ from their X keysym.
const RENAMED: &[(&str, &str)] = &[
    ("enter", "Return"),
    ("return", "Return"),
    ("escape", "Escape"),
    ("esc", "Escape"),
    ("backspace", "BackSpace"),
    ("delete", "Delete"),
    ("tab", "Tab"),
    ("space", "space"),
    (" ", "space"),
    ("arrowup", "Up"),
    ("arrowdown", "Down"),
    ("arrowleft", "Left"),
    ("arrowright", "Right"),
    ("up", "Up"),
    ("down", "Down"),
    ("left", "Left"),
    ("right", "Right"),
    ("home", "Home"),
    ("end", "End"),
    ("pageup", "Prior"),
    ("pagedown", "Next"),
    ("insert", "Insert"),
    ("control", "ctrl"),
    ("ctrl", "ctrl"),
    ("shift", "shift"),
    ("alt", "alt"),
    ("meta", "super"),
    ("super", "super"),
];

/// One key or chord (`Control+Shift+s`) as xdotool's `key` names it.
pub(crate) fn xdotool_key(name: &str) -> Result<String, DesktopError> {
    let unknown = || DesktopError::UnknownKey(name.to_string());
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(unknown());
    }
    // A lone "+" is the plus key, not a chord.
    if trimmed == "+" {
        return Ok("plus".into());
    }
    let parts: Vec<&str> = trimmed.split('+').map(str::trim).collect();
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        out.push(one_key(part).ok_or_else(unknown)?);
    }
    Ok(out.join("+"))
}

fn one_key(part: &str) -> Option<String> {
    let lower = part.to_ascii_lowercase();
    if let Some((_, sym)) = RENAMED.iter().find(|(from, _)| *from == lower) {
        return Some((*sym).to_string());
    }
    let mut chars = part.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphanumeric() => Some(c.to_string()),
        (Some(c), None) if c.is_ascii_punctuation() => Some(punctuation(c)?.to_string()),
        _ => function_key(part),
    }
}

fn function_key(part: &str) -> Option<String> {
    let n: u8 = part.strip_prefix(['F', 'f'])?.parse().ok()?;
    (1..=24).contains(&n).then(|| format!("F{n}"))
}

fn punctuation(c: char) -> Option<&'static str> {
    Some(match c {
        '.' => "period",
        ',' => "comma",
        '-' => "minus",
        '=' => "equal",
        '/' => "slash",
        ';' => "semicolon",
        '\'' => "apostrophe",
        '[' => "bracketleft",
        ']' => "bracketright",
        '\\' => "backslash",
        '`' => "grave",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_table() {
        let cases: &[(&str, Option<&str>)] = &[
            ("Enter", Some("Return")),
            ("ArrowDown", Some("Down")),
            ("Backspace", Some("BackSpace")),
            ("Escape", Some("Escape")),
            ("Tab", Some("Tab")),
            ("a", Some("a")),
            ("Z", Some("Z")),
            ("7", Some("7")),
            ("Control+s", Some("ctrl+s")),
            ("Control+Shift+Tab", Some("ctrl+shift+Tab")),
            ("F5", Some("F5")),
            ("F25", None),
            ("+", Some("plus")),
            (".", Some("period")),
            ("", None),
            ("Hyper", None),
            ("Control+", None),
            ("a; rm -rf /", None),
        ];
        for (name, want) in cases {
            let got = xdotool_key(name).ok();
            assert_eq!(got.as_deref(), *want, "{name:?}");
        }
    }
}
