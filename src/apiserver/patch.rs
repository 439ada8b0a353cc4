//! apiserver::patch: JSON merge patches (RFC 7386, `application/merge-patch+json`) computed
//! from what the API server holds to what podvisor wants, so a patch says only what changed
//! and removes (with `null`) what podvisor no longer sets. Lists are replaced whole, as the
//! API server applies a merge patch.

use serde_json::{Map, Value};

/// The merge patch turning `old` into `new`; `None` when they are equal. `new` holds no
/// `null`s (a merge patch cannot set one).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386's own application, to check that a diff applied gives `new`.
    fn apply(target: &Value, patch: &Value) -> Value {
        match patch {
            Value::Object(p) => {
                let mut t = match target {
                    Value::Object(t) => t.clone(),
                    _ => Map::new(),
                };
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        let cur = t.get(k).cloned().unwrap_or(Value::Null);
                        t.insert(k.clone(), apply(&cur, v));
                    }
                }
                Value::Object(t)
            }
            other => other.clone(),
        }
    }

    #[test]
    fn diffs_apply_back_to_the_new_document() {
        let cases = [
            (
                json!({"a": 1, "b": {"c": 2, "d": 3}}),
                json!({"a": 1, "b": {"c": 4}}),
            ),
            (
                json!({"phase": "Pending"}),
                json!({"phase": "Running", "podIP": "10.0.0.1"}),
            ),
            (json!({"l": [1, 2, 3]}), json!({"l": [1, 2]})),
            (json!({"x": {"y": 1}}), json!({"x": 5})),
            (json!({}), json!({"n": {"deep": {"er": true}}})),
        ];
        for (old, new) in cases {
            let p = merge_diff(&old, &new).expect("differs");
            assert_eq!(apply(&old, &p), new, "{old} -> {new}: {p}");
        }
        assert_eq!(merge_diff(&json!({"a": [1]}), &json!({"a": [1]})), None);
        assert_eq!(
            merge_diff(&json!({"a": 1, "b": 2}), &json!({"a": 1})),
            Some(json!({"b": null}))
        );
    }
}
