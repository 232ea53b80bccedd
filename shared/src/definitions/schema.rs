//! The JSON Schema of the definitions format (`chime schema`), for editors that complete and
//! check YAML against one (a `# yaml-language-server: $schema=…` line, or the editor's setting).
//!
//! It is made from the same type descriptions as the API's OpenAPI document (utoipa's), so it
//! cannot drift from what `chime apply` reads: the component schemas become `$defs`, and their
//! references follow.

use utoipa::{PartialSchema, ToSchema};

use super::format::Definitions;

/// The JSON Schema (draft 2020-12) of a definitions document.
pub fn json_schema() -> serde_json::Value {
    let mut components = Vec::new();
    <Definitions as ToSchema>::schemas(&mut components);
    let mut defs = serde_json::Map::new();
    for (name, schema) in components {
        defs.insert(name, serde_json::to_value(schema).unwrap_or_default());
    }
    let mut root =
        serde_json::to_value(<Definitions as PartialSchema>::schema()).unwrap_or_default();
    if let Some(object) = root.as_object_mut() {
        object.insert(
            "$schema".into(),
            "https://json-schema.org/draft/2020-12/schema".into(),
        );
        object.insert("title".into(), "chime definitions".into());
        object.insert("$defs".into(), serde_json::Value::Object(defs));
    }
    rewrite_refs(&mut root);
    root
}

/// OpenAPI's `#/components/schemas/X` references as JSON Schema's `#/$defs/X`.
fn rewrite_refs(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "$ref"
                    && let serde_json::Value::String(target) = child
                    && let Some(name) = target.strip_prefix("#/components/schemas/")
                {
                    *target = format!("#/$defs/{name}");
                } else {
                    rewrite_refs(child);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reference points at a definition the schema holds.
    #[test]
    fn every_reference_resolves() {
        let schema = json_schema();
        let text = schema.to_string();
        let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
        assert!(defs.contains_key("JobDefinition"), "{text}");
        for (i, _) in text.match_indices("\"$ref\":\"") {
            let rest = &text[i + 8..];
            let target = &rest[..rest.find('"').unwrap_or(0)];
            let name = target.strip_prefix("#/$defs/").unwrap_or(target);
            assert!(defs.contains_key(name), "unresolved {target}");
        }
    }
}
