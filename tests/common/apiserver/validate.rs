//! Strict field validation (`fieldValidation=Strict`): an object must decode into
//! k8s-openapi's type for its kind (generated from the API's OpenAPI schema: wrong types
//! fail there), and every field it has must survive the round trip through that type (a
//! field the type does not know is dropped by the decoder: that is an unknown field).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn unknown(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                if v.is_null() {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match o.get(k) {
                    Some(ov) => unknown(v, ov, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (n, (iv, ov)) in i.iter().zip(o.iter()).enumerate() {
                unknown(iv, ov, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// `Err(message)` in the API server's words when `v` is not a valid `T`.
pub fn strict<T: DeserializeOwned + Serialize>(v: &Value) -> Result<(), String> {
    let typed: T =
        serde_json::from_value(v.clone()).map_err(|e| format!("strict decoding error: {e}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    unknown(v, &back, "", &mut out);
    if out.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "strict decoding error: {}",
            out.iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// Strict validation by kind (`pods`, `nodes`, `leases`, `deleteoptions`).
pub fn strict_kind(kind: &str, v: &Value) -> Result<(), String> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
    match kind {
        "pods" => strict::<Pod>(v),
        "nodes" => strict::<Node>(v),
        "leases" => strict::<Lease>(v),
        "deleteoptions" => strict::<DeleteOptions>(v),
        _ => Ok(()),
    }
}

/// RFC 7386: `patch` applied to `target`.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut t = match target {
                Value::Object(t) => t.clone(),
                _ => serde_json::Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    let cur = t.get(k).cloned().unwrap_or(Value::Null);
                    t.insert(k.clone(), merge_patch(&cur, v));
                }
            }
            Value::Object(t)
        }
        other => other.clone(),
    }
}
