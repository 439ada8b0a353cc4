//! manifest: Pod manifest text (YAML or JSON), from bytes to raw documents and raw `v1 Pod`s.
//!
//! Phase one parses the text with serde-saphyr into [`RawNode`] trees that keep, for every
//! mapping key and sequence item, the line:column where it was written; syntax errors name the
//! source and its line:column, and alias bombs are stopped by the parser's budget. A tree then
//! locates field paths (`spec.containers[1].ports[0].containerPort`) for validation errors,
//! gives the canonical JSON the static-pod hashes are computed from, and is deserialized into
//! k8s-openapi's `Pod`, type errors naming the field path and its line:column.
//! [`super::validation`] checks the Pod; [`crate::staticpod`] applies the kubelet's defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.containers[0].image`.
    pub field: String,
    pub message: String,
    /// Where the field (or its closest written ancestor) is in the manifest text.
    pub pos: Option<TextPos>,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
            pos: None,
        }
    }

    /// The same error located at `pos`.
    pub fn at(mut self, pos: Option<TextPos>) -> Self {
        self.pos = pos;
        self
    }
}

/// `:line:column: field: message` (the caller prefixes the source name).
impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.pos {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        write!(f, ": {}: {}", self.field, self.message)
    }
}

/// Largest manifest accepted (the kubelet's maxConfigLength).
pub const MAX_MANIFEST_BYTES: usize = 10 * 1024 * 1024;

/// Errors reading a manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{source_name}: {size} bytes is over the {max}-byte manifest limit")]
    TooLarge {
        source_name: String,
        size: usize,
        max: usize,
    },
    #[error("{source_name}: manifest is empty")]
    Empty { source_name: String },
    #[error("{source_name}: manifest is not UTF-8")]
    NotUtf8 { source_name: String },
    #[error("{source_name}{location}: {message}")]
    Syntax {
        source_name: String,
        location: String,
        message: String,
    },
    /// Every problem found in one manifest, one `source:line:column: field: message` a line.
    #[error("{}", format_field_errors(source_name, errors))]
    Invalid {
        source_name: String,
        errors: Vec<FieldError>,
    },
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

impl ManifestError {
    /// An `Invalid` error with a single field error.
    pub fn invalid_field(source_name: &str, error: FieldError) -> Self {
        ManifestError::Invalid {
            source_name: source_name.into(),
            errors: vec![error],
        }
    }
}

fn format_field_errors(source_name: &str, errors: &[FieldError]) -> String {
    let lines: Vec<String> = errors.iter().map(|e| format!("{source_name}{e}")).collect();
    lines.join("\n")
}

/// Most events an alias may replay in one manifest. serde-saphyr's default, 1,000,000, lets a
/// 400-byte "billion laughs" document cost half a second of CPU and tens of MB before it is
/// refused; a Pod or a KubeletConfiguration is a few thousand events even when written with
/// anchors.
pub const MAX_ALIAS_REPLAYED_EVENTS: usize = 100_000;

/// serde-saphyr options for YAML podvisor reads from users (manifests, the kubelet config):
/// budgets sized for those documents, so that alias and nesting bombs stop early.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    // These limits stop "billion laughs" expansions early.
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_events = 200_000;
    // Events copied into anchored containers, replayed ones included.
    budget.max_recorded_anchor_events = 2 * MAX_ALIAS_REPLAYED_EVENTS;
    let mut opts = serde_saphyr::Options::default();
    opts.budget = Some(budget);
    opts.alias_limits.max_total_replayed_events = MAX_ALIAS_REPLAYED_EVENTS;
    opts.with_snippet = false;
    opts
}

/// Reads a manifest file, refusing files over [`MAX_MANIFEST_BYTES`] without reading them whole.
pub fn read_manifest_file(path: &Path) -> Result<Vec<u8>, ManifestError> {
    let read_err = |source| ManifestError::Read {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut data = Vec::new();
    file.take(MAX_MANIFEST_BYTES as u64 + 1)
        .read_to_end(&mut data)
        .map_err(read_err)?;
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            source_name: path.display().to_string(),
            size: data.len(),
            max: MAX_MANIFEST_BYTES,
        });
    }
    Ok(data)
}

/// Checks size, encoding and emptiness; returns the text.
pub fn manifest_text<'a>(data: &'a [u8], source_name: &str) -> Result<&'a str, ManifestError> {
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            source_name: source_name.into(),
            size: data.len(),
            max: MAX_MANIFEST_BYTES,
        });
    }
    let text = std::str::from_utf8(data).map_err(|_| ManifestError::NotUtf8 {
        source_name: source_name.into(),
    })?;
    if text.trim().is_empty() {
        return Err(ManifestError::Empty {
            source_name: source_name.into(),
        });
    }
    Ok(text)
}

/// A `line:column` in the manifest text (both 1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextPos {
    pub line: u64,
    pub column: u64,
}

impl TextPos {
    fn from_location(l: &Location) -> Option<TextPos> {
        (l.line() > 0).then(|| TextPos {
            line: l.line(),
            column: l.column(),
        })
    }
}

/// One YAML/JSON node as written (aliases expanded), with locations for keys and items.
#[derive(Debug, Clone, PartialEq)]
pub enum RawNode {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Seq(Vec<Spanned<RawNode>>),
    /// Entries in written order; the key's location is where the key was written.
    Map(Vec<(Spanned<String>, Spanned<RawNode>)>),
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawNodeVisitor)
    }
}

struct RawNodeVisitor;

impl<'de> Visitor<'de> for RawNodeVisitor {
    type Value = RawNode;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawNode, E> {
        Ok(RawNode::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawNode, E> {
        Ok(RawNode::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawNode, E> {
        Ok(RawNode::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawNode, E> {
        // JSON has no NaN/infinity: keep them as the text YAML spells them.
        Ok(serde_json::Number::from_f64(v)
            .map(RawNode::Number)
            .unwrap_or_else(|| RawNode::String(format!("{v}"))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawNode, E> {
        Ok(RawNode::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<RawNode, E> {
        Ok(RawNode::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<RawNode, D::Error> {
        RawNode::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<RawNode>>()? {
            items.push(item);
        }
        Ok(RawNode::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<RawNode>>()?;
            entries.push((key, value));
        }
        Ok(RawNode::Map(entries))
    }
}

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSeg {
    Key(String),
    Index(usize),
}

/// Splits `spec.containers[1].resources.limits[nvidia.com/gpu]` into segments; a bracketed
/// segment that is not a number is a map key (resource names, label keys).
fn split_path(path: &str) -> Vec<PathSeg> {
    let mut segs = Vec::new();
    let mut cur = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !cur.is_empty() {
                    segs.push(PathSeg::Key(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    segs.push(PathSeg::Key(std::mem::take(&mut cur)));
                }
                let inner: String = chars.by_ref().take_while(|&c| c != ']').collect();
                segs.push(match inner.parse::<usize>() {
                    Ok(i) => PathSeg::Index(i),
                    Err(_) => PathSeg::Key(inner),
                });
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        segs.push(PathSeg::Key(cur));
    }
    segs
}

impl RawNode {
    /// The value of `key` in a mapping (the last one if written twice).
    pub fn get(&self, key: &str) -> Option<&Spanned<RawNode>> {
        match self {
            RawNode::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.value == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The key entry of `key` in a mapping.
    fn get_entry(&self, key: &str) -> Option<&(Spanned<String>, Spanned<RawNode>)> {
        match self {
            RawNode::Map(entries) => entries.iter().rev().find(|(k, _)| k.value == key),
            _ => None,
        }
    }

    /// The string value of `key`, when it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        match self.get(key).map(|v| &v.value) {
            Some(RawNode::String(s)) => Some(s),
            _ => None,
        }
    }

    /// Where the field at `path` was written: the key of a mapping entry or the start of a
    /// sequence item. A path that does not exist (a missing required field) is located at its
    /// deepest written ancestor; `None` when nothing of it was written.
    pub fn locate(&self, path: &str) -> Option<TextPos> {
        let mut node = self;
        let mut found = None;
        for seg in split_path(path) {
            let next = match (&seg, node) {
                (PathSeg::Key(k), RawNode::Map(_)) => node
                    .get_entry(k)
                    .map(|(key, value)| (&key.referenced, &value.value)),
                (PathSeg::Index(i), RawNode::Seq(items)) => {
                    items.get(*i).map(|item| (&item.referenced, &item.value))
                }
                _ => None,
            };
            match next {
                Some((loc, child)) => {
                    found = TextPos::from_location(loc).or(found);
                    node = child;
                }
                None => break,
            }
        }
        found
    }

    /// Canonical JSON: mapping keys sorted, no whitespace, later duplicate keys winning.
    /// Equal for manifests that differ only in formatting, comments, key order or quoting.
    pub fn canonical_json(&self) -> String {
        let mut out = String::new();
        self.write_canonical(&mut out);
        out
    }

    fn write_canonical(&self, out: &mut String) {
        match self {
            RawNode::Null => out.push_str("null"),
            RawNode::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            RawNode::Number(n) => out.push_str(&n.to_string()),
            RawNode::String(s) => out.push_str(&json_string(s)),
            RawNode::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.value.write_canonical(out);
                }
                out.push(']');
            }
            RawNode::Map(entries) => {
                let sorted: BTreeMap<&str, &RawNode> = entries
                    .iter()
                    .map(|(k, v)| (k.value.as_str(), &v.value))
                    .collect();
                out.push('{');
                for (i, (k, v)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&json_string(k));
                    out.push(':');
                    v.write_canonical(out);
                }
                out.push('}');
            }
        }
    }

    /// A copy without the mapping entries whose key is in `keys`.
    pub fn without_keys(&self, keys: &[&str]) -> RawNode {
        match self {
            RawNode::Map(entries) => RawNode::Map(
                entries
                    .iter()
                    .filter(|(k, _)| !keys.contains(&k.value.as_str()))
                    .cloned()
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// A short name of the node's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            RawNode::Null => "null",
            RawNode::Bool(_) => "a boolean",
            RawNode::Number(_) => "a number",
            RawNode::String(_) => "a string",
            RawNode::Seq(_) => "a list",
            RawNode::Map(_) => "a mapping",
        }
    }
}

fn json_string(s: &str) -> String {
    // Serializing a str to JSON cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

fn syntax_error(source_name: &str, e: &serde_saphyr::Error) -> ManifestError {
    let location = e
        .location()
        .map(|l| format!(":{}:{}", l.line(), l.column()))
        .unwrap_or_default();
    ManifestError::Syntax {
        source_name: source_name.into(),
        location,
        message: e.without_snippet().to_string(),
    }
}

/// Parses every YAML document of `text` into trees; empty documents are left out.
pub fn parse_documents(text: &str, source_name: &str) -> Result<Vec<RawNode>, ManifestError> {
    let docs: Vec<Option<Spanned<RawNode>>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| syntax_error(source_name, &e))?;
    Ok(docs
        .into_iter()
        .flatten()
        .map(|d| d.value)
        .filter(|d| *d != RawNode::Null)
        .collect())
}

/// A type error found while turning a tree into k8s-openapi types, with where it happened.
#[derive(Debug)]
pub struct TreeError {
    message: String,
    path: Option<String>,
    pos: Option<TextPos>,
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TreeError {}

impl de::Error for TreeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        TreeError {
            message: msg.to_string(),
            path: None,
            pos: None,
        }
    }
}

impl TreeError {
    fn at(mut self, path: &str, pos: Option<TextPos>) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_string());
            self.pos = pos;
        }
        self
    }

    /// Turns the error into a field error (`<path>: <message>`).
    pub fn into_field_error(self) -> FieldError {
        let field = match self.path.as_deref() {
            Some("") | None => "(document)".to_string(),
            Some(p) => p.to_string(),
        };
        FieldError::new(field, self.message).at(self.pos)
    }
}

/// Deserializes k8s-openapi types from a tree, tracking the field path and location.
struct TreeDeserializer<'a> {
    node: &'a RawNode,
    path: String,
    pos: Option<TextPos>,
}

impl<'a> TreeDeserializer<'a> {
    fn child_key(&self, key: &str, node: &'a RawNode, loc: &Location) -> Self {
        let path = if self.path.is_empty() {
            key.to_string()
        } else if key.contains('.') || key.contains('/') {
            format!("{}[{key}]", self.path)
        } else {
            format!("{}.{key}", self.path)
        };
        TreeDeserializer {
            node,
            path,
            pos: TextPos::from_location(loc).or(self.pos),
        }
    }
}

struct TreeSeq<'a> {
    parent: &'a TreeDeserializer<'a>,
    items: std::iter::Enumerate<std::slice::Iter<'a, Spanned<RawNode>>>,
}

impl<'de, 'a> SeqAccess<'de> for TreeSeq<'a> {
    type Error = TreeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TreeError> {
        match self.items.next() {
            None => Ok(None),
            Some((i, item)) => {
                let d = TreeDeserializer {
                    node: &item.value,
                    path: format!("{}[{i}]", self.parent.path),
                    pos: TextPos::from_location(&item.referenced).or(self.parent.pos),
                };
                seed.deserialize(d).map(Some)
            }
        }
    }
}

struct TreeMap<'a> {
    parent: &'a TreeDeserializer<'a>,
    entries: std::slice::Iter<'a, (Spanned<String>, Spanned<RawNode>)>,
    value: Option<&'a (Spanned<String>, Spanned<RawNode>)>,
}

impl<'de, 'a> MapAccess<'de> for TreeMap<'a> {
    type Error = TreeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TreeError> {
        match self.entries.next() {
            None => Ok(None),
            Some(entry) => {
                self.value = Some(entry);
                let key: de::value::StrDeserializer<'_, TreeError> =
                    entry.0.value.as_str().into_deserializer();
                seed.deserialize(key).map(Some).map_err(|e| {
                    let d =
                        self.parent
                            .child_key(&entry.0.value, &entry.1.value, &entry.0.referenced);
                    e.at(&d.path, d.pos)
                })
            }
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, TreeError> {
        match self.value.take() {
            Some((k, v)) => {
                seed.deserialize(self.parent.child_key(&k.value, &v.value, &k.referenced))
            }
            None => Err(de::Error::custom("value requested before its key")),
        }
    }
}

impl<'de, 'a> de::Deserializer<'de> for TreeDeserializer<'a> {
    type Error = TreeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        let result = match self.node {
            RawNode::Null => visitor.visit_unit(),
            RawNode::Bool(b) => visitor.visit_bool(*b),
            RawNode::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            RawNode::String(s) => visitor.visit_str(s),
            RawNode::Seq(items) => visitor.visit_seq(TreeSeq {
                parent: &self,
                items: items.iter().enumerate(),
            }),
            RawNode::Map(entries) => visitor.visit_map(TreeMap {
                parent: &self,
                entries: entries.iter(),
                value: None,
            }),
        };
        result.map_err(|e| e.at(&self.path, self.pos))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self.node {
            RawNode::Null => visitor.visit_none(),
            _ => {
                let (path, pos) = (self.path.clone(), self.pos);
                visitor.visit_some(self).map_err(|e| e.at(&path, pos))
            }
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        let (path, pos) = (self.path.clone(), self.pos);
        visitor
            .visit_newtype_struct(self)
            .map_err(|e| e.at(&path, pos))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// Deserializes a tree into a k8s-openapi type; type errors carry the field path and the
/// line:column of the field.
pub fn from_tree<T: de::DeserializeOwned>(node: &RawNode) -> Result<T, FieldError> {
    T::deserialize(TreeDeserializer {
        node,
        path: String::new(),
        pos: None,
    })
    .map_err(TreeError::into_field_error)
}

/// A JSON value as a tree without locations (for [`from_tree`]).
pub fn tree_of_json(v: serde_json::Value) -> RawNode {
    let unknown = |node| Spanned::new(node, Location::UNKNOWN, Location::UNKNOWN);
    match v {
        serde_json::Value::Null => RawNode::Null,
        serde_json::Value::Bool(b) => RawNode::Bool(b),
        serde_json::Value::Number(n) => RawNode::Number(n),
        serde_json::Value::String(s) => RawNode::String(s),
        serde_json::Value::Array(items) => RawNode::Seq(
            items
                .into_iter()
                .map(|i| unknown(tree_of_json(i)))
                .collect(),
        ),
        serde_json::Value::Object(map) => RawNode::Map(
            map.into_iter()
                .map(|(k, v)| {
                    (
                        Spanned::new(k, Location::UNKNOWN, Location::UNKNOWN),
                        unknown(tree_of_json(v)),
                    )
                })
                .collect(),
        ),
    }
}

/// Parses manifest bytes holding one document into a raw Pod (phase one only: no kind check,
/// no validation). `source_name` names the file or URL in errors.
pub fn parse_pod(data: &[u8], source_name: &str) -> Result<Pod, ManifestError> {
    let text = manifest_text(data, source_name)?;
    let docs = parse_documents(text, source_name)?;
    match docs.as_slice() {
        [] => Err(ManifestError::Empty {
            source_name: source_name.into(),
        }),
        [doc] => from_tree(doc).map_err(|e| ManifestError::invalid_field(source_name, e)),
        more => Err(ManifestError::invalid_field(
            source_name,
            FieldError::new(
                "(document)",
                format!(
                    "a manifest file holds one Pod, found {} documents",
                    more.len()
                ),
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
