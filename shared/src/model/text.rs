//! Text a client sends that PostgreSQL cannot store: a NUL character (`\u0000`) in a text column
//! or anywhere in a JSON document (key or string). Found here, it is a 4xx naming the field, not
//! a database error.

/// A NUL character in `field`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} contains a NUL character (\\u0000), which cannot be stored")]
pub struct NulInText {
    /// Where it was found (`data.k`, `spec.command[1]`, `description`).
    pub field: String,
}

/// Checks one text field.
pub fn check_text(field: &str, value: &str) -> Result<(), NulInText> {
    if value.contains('\0') {
        return Err(NulInText {
            field: field.to_string(),
        });
    }
    Ok(())
}

/// Checks an optional text field.
pub fn check_opt_text(field: &str, value: Option<&str>) -> Result<(), NulInText> {
    value.map_or(Ok(()), |v| check_text(field, v))
}

/// Checks every key and string of a JSON document.
pub fn check_json(field: &str, value: &serde_json::Value) -> Result<(), NulInText> {
    use serde_json::Value;
    match value {
        Value::String(s) => check_text(field, s),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check_json(&format!("{field}[{i}]"), item)),
        Value::Object(map) => map.iter().try_for_each(|(key, item)| {
            let path = format!("{field}.{}", key.replace('\0', "\\u0000"));
            check_text(&path, key)?;
            check_json(&path, item)
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_field_holding_a_nul() {
        assert!(check_json("data", &json!({"k": ["a", 1, {"x": "ok"}]})).is_ok());
        let found = check_json("data", &json!({"k": ["a", {"x": "b\u{0}c"}]})).unwrap_err();
        assert_eq!(found.field, "data.k[1].x");
        assert_eq!(
            check_json("spec", &json!({"a\u{0}": 1})).unwrap_err().field,
            "spec.a\\u0000"
        );
        assert!(check_text("name", "a\0").is_err());
    }
}
