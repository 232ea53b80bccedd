//! Partial updates: a JSON merge patch (RFC 7386) laid over a stored object's settings, and the
//! list of settings it changed, which the API answers with and the audit trail keeps.
//!
//! Written by hand rather than taken from a crate: the merge is RFC 7386's ten-line algorithm,
//! and the list of changes is chime's own shape (top-level settings, before and after).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::StoreError;

/// One setting an update changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Change {
    /// The setting, as the API names it.
    pub field: String,
    /// Its value before (null: unset).
    #[schema(value_type = Object)]
    pub before: Value,
    /// Its value after (null: unset).
    #[schema(value_type = Object)]
    pub after: Value,
}

/// Checks that `patch` is an object that leaves the `fixed` settings (an object's identity) as
/// they are, naming the first offending field.
pub fn check(patch: &Value, fixed: &[&str], current: &Value) -> Result<(), StoreError> {
    let Value::Object(fields) = patch else {
        return Err(StoreError::Invalid(
            "the body must be a JSON object of the settings to change".into(),
        ));
    };
    for field in fixed {
        if let Some(value) = fields.get(*field)
            && Some(value) != current.get(*field)
        {
            return Err(StoreError::Invalid(format!(
                "{field} cannot be changed by an update"
            )));
        }
    }
    Ok(())
}

/// The settings `current` has with `patch` laid over them ([`check`] for the `fixed` ones,
/// [`merge_settings`] with the `whole` ones), as JSON: `(before, after)`, for the caller to
/// adjust and read back with [`settings`]. `what` names the object in errors.
pub fn apply(
    current: &impl Serialize,
    patch: &Value,
    fixed: &[&str],
    whole: &[&str],
    what: &str,
) -> Result<(Value, Value), StoreError> {
    let before = serde_json::to_value(current)
        .map_err(|e| StoreError::Invalid(format!("reading the {what}: {e}")))?;
    check(patch, fixed, &before)?;
    let mut after = before.clone();
    merge_settings(&mut after, patch, whole);
    Ok((before, after))
}

/// Reads patched settings back as the type the object is created from, so they are validated as
/// a new object's would be.
pub fn settings<T: serde::de::DeserializeOwned>(after: Value, what: &str) -> Result<T, StoreError> {
    serde_json::from_value(after)
        .map_err(|e| StoreError::Invalid(format!("the {what}'s settings: {e}")))
}

/// Lays `patch` over `target` as RFC 7386 says: an object merges key by key, `null` removes
/// the key, anything else replaces the value.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Lays `patch` over `target` as [`merge`] does, except that the `whole` settings (an executor's
/// input, a schedule: objects whose keys belong together) are replaced, never merged key by key:
/// a new URL must not keep the old one's headers.
pub fn merge_settings(target: &mut Value, patch: &Value, whole: &[&str]) {
    if let (Value::Object(target), Value::Object(patch)) = (&mut *target, patch) {
        for field in whole {
            if patch.get(*field).is_some_and(|v| !v.is_null()) {
                target.remove(*field);
            }
        }
    }
    merge(target, patch);
}

/// `changes` as the audit trail keeps them: the values of an executor input's `headers` and
/// `env` (where credentials live) are masked, their names kept.
pub fn redacted(changes: &[Change]) -> Vec<Change> {
    let mask = |value: &Value| {
        let mut value = value.clone();
        if let Some(spec) = value.as_object_mut() {
            for secret in ["headers", "env"] {
                if let Some(Value::Object(entries)) = spec.get_mut(secret) {
                    for entry in entries.values_mut() {
                        *entry = Value::String("(redacted)".into());
                    }
                }
            }
        }
        value
    };
    changes
        .iter()
        .map(|c| match c.field.as_str() {
            "spec" => Change {
                field: c.field.clone(),
                before: mask(&c.before),
                after: mask(&c.after),
            },
            _ => c.clone(),
        })
        .collect()
}

/// The top-level settings that differ between `before` and `after` (both objects), in the
/// order of `after`'s keys, then those only `before` has.
pub fn changes(before: &Value, after: &Value) -> Vec<Change> {
    let empty = Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut changed: Vec<Change> = after
        .iter()
        .filter(|(key, value)| before.get(*key).unwrap_or(&Value::Null) != *value)
        .map(|(key, value)| Change {
            field: key.clone(),
            before: before.get(key).cloned().unwrap_or(Value::Null),
            after: value.clone(),
        })
        .collect();
    changed.extend(
        before
            .iter()
            .filter(|(key, value)| !after.contains_key(*key) && !value.is_null())
            .map(|(key, value)| Change {
                field: key.clone(),
                before: value.clone(),
                after: Value::Null,
            }),
    );
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_patch_changes_only_what_it_names() {
        let mut job = json!({"kind": "shell", "timeout_ms": 1000, "data": {"a": 1, "b": 2}});
        merge(
            &mut job,
            &json!({"timeout_ms": 5000, "data": {"b": null, "c": 3}}),
        );
        assert_eq!(
            job,
            json!({"kind": "shell", "timeout_ms": 5000, "data": {"a": 1, "c": 3}})
        );
    }

    #[test]
    fn a_whole_setting_is_replaced_not_merged() {
        let mut job = json!({"spec": {"url": "https://old", "headers": {"Authorization": "x"}}});
        merge_settings(
            &mut job,
            &json!({"spec": {"url": "https://new"}}),
            &["spec"],
        );
        assert_eq!(job, json!({"spec": {"url": "https://new"}}));
    }

    #[test]
    fn changes_list_each_setting_before_and_after() {
        let before = json!({"kind": "shell", "timeout_ms": 1000, "description": "x"});
        let after = json!({"kind": "shell", "timeout_ms": 5000});
        assert_eq!(
            changes(&before, &after),
            vec![
                Change {
                    field: "timeout_ms".into(),
                    before: json!(1000),
                    after: json!(5000)
                },
                Change {
                    field: "description".into(),
                    before: json!("x"),
                    after: Value::Null
                },
            ]
        );
    }

    #[test]
    fn a_patch_may_not_rename() {
        let current = json!({"name": "a"});
        assert!(check(&json!({"name": "a", "kind": "noop"}), &["name"], &current).is_ok());
        let error = check(&json!({"name": "b"}), &["name"], &current).unwrap_err();
        assert!(error.to_string().contains("name"), "{error}");
        assert!(check(&json!([1]), &["name"], &current).is_err());
    }
}
