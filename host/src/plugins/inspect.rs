//! Checking a component before it is used: is it a component, does it target our world
//! at a version this host serves, does it import only what this host provides, and is its
//! manifest sound.

use std::collections::HashSet;
use std::sync::Arc;

use wasmparser::{Parser, Payload};

use super::bindings::WIT_VERSIONS;
use super::bindings::types::{Capability, PluginManifest};
use super::engine::{CompileError, Queueing};
use super::{PluginKind, PluginRuntime, Tenant, content_hash};

#[derive(Debug, Clone)]
pub struct Inspection {
    pub hash: String,
    pub size: usize,
    pub wit_version: String,
    pub manifest: PluginManifest,
    pub imports: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InspectError {
    /// The component is not one this host runs; the message says why.
    Refused(String),
    /// Too many components are being compiled; try again in a few seconds.
    Busy { retry_after_secs: u64 },
}

impl std::fmt::Display for InspectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InspectError::Refused(m) => f.write_str(m),
            InspectError::Busy { retry_after_secs } => {
                write!(
                    f,
                    "{}",
                    CompileError::Busy {
                        retry_after_secs: *retry_after_secs
                    }
                )
            }
        }
    }
}

impl std::error::Error for InspectError {}

fn fail<T>(message: impl Into<String>) -> Result<T, InspectError> {
    Err(InspectError::Refused(message.into()))
}

/// What a component says of itself at its top level: the version of our world it exports
/// and what it imports. Read from the bytes, without compiling them.
pub(super) struct Shape {
    wit_version: String,
    pub(super) imports: Vec<String>,
}

/// Checks size and shape before anything is compiled: a component (not a core module),
/// exporting `agent:plugin/command` at a served version, importing only what this host
/// provides.
pub(super) fn read_shape(bytes: &[u8], limit: usize) -> Result<Shape, InspectError> {
    if bytes.len() > limit {
        return fail(format!(
            "the component is {} bytes; this host accepts at most {limit} (plugin_max_component_bytes)",
            bytes.len()
        ));
    }
    if !Parser::is_component(bytes) {
        if Parser::is_core_wasm(bytes) {
            return fail("this is a core WebAssembly module, not a component: build it for the wasm32-wasip2 target");
        }
        return fail("this is not a WebAssembly component");
    }
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    // Nested modules and components have imports and exports of their own: only the
    // outermost ones say what the component needs and offers.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| InspectError::Refused(format!("not a valid component: {e}")))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) if depth == 0 => break,
            Payload::End(_) => depth -= 1,
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import.map_err(|e| InspectError::Refused(format!("not a valid component: {e}")))?;
                    imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    let export = export.map_err(|e| InspectError::Refused(format!("not a valid component: {e}")))?;
                    exports.push(export.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    let Some(command) = exports.iter().find(|n| n.starts_with("agent:plugin/command")) else {
        return fail(format!(
            "the component does not export agent:plugin/command (it exports: {}); build it with agent-plugin-sdk or the WIT in wit/",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        ));
    };
    let wit_version = command.split_once('@').map(|(_, v)| v.to_string()).unwrap_or_default();
    if !WIT_VERSIONS.contains(&wit_version.as_str()) {
        return fail(format!(
            "the component targets agent:plugin@{wit_version}, which this host does not serve (served: {})",
            WIT_VERSIONS.join(", ")
        ));
    }
    for import in &imports {
        let base = import.split('@').next().unwrap_or(import);
        let known = base.starts_with("wasi:") || base.starts_with("agent:plugin/");
        if !known {
            return fail(format!(
                "the component imports {import}, which this host does not provide"
            ));
        }
        // wasi:http came with 0.2.0; a 0.1.0 component asking for it is half-built.
        if base.starts_with("wasi:http/") && wit_version == "0.1.0" {
            return fail(format!(
                "the component imports {import} but targets agent:plugin@0.1.0; wasi:http is served to agent:plugin@0.2.0 and later components: build against wit/v0.4.0 (agent-plugin-sdk does)"
            ));
        }
    }
    Ok(Shape { wit_version, imports })
}

/// Checks a component whole: its shape, then compiled (in memory only: nothing is kept
/// for a refused one), linked, and its `manifest()` called on `tenant`'s share. Returns
/// the compiled component for the caller to keep.
pub(super) async fn inspect(
    rt: &PluginRuntime,
    bytes: Arc<Vec<u8>>,
    kind: PluginKind,
    tenant: &Tenant,
) -> Result<(Inspection, wasmtime::component::Component), InspectError> {
    let shape = read_shape(&bytes, rt.limits().max_component_bytes)?;
    let (hash, size) = (content_hash(&bytes), bytes.len());
    let component = rt
        .cache
        .compile(bytes, Queueing::RefuseWhenFull, Some(&tenant.account))
        .await
        .map_err(|e| match e {
            CompileError::Busy { retry_after_secs } => InspectError::Busy { retry_after_secs },
            CompileError::Invalid(m) => InspectError::Refused(m),
        })?;
    let pre = rt.cache.link(&component).map_err(InspectError::Refused)?;
    let manifest = rt
        .call_manifest(&pre, tenant)
        .await
        .map_err(|e| InspectError::Refused(format!("calling manifest() failed: {e}")))?;
    check_manifest(&manifest, kind)?;
    let inspection = Inspection {
        hash,
        size,
        wit_version: shape.wit_version,
        manifest,
        imports: shape.imports,
    };
    Ok((inspection, component))
}

/// The manifest must name itself sensibly and claim only what its kind of plugin can have.
pub fn check_manifest(manifest: &PluginManifest, kind: PluginKind) -> Result<(), InspectError> {
    let name_ok = !manifest.name.is_empty()
        && manifest.name.len() <= 64
        && manifest
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !name_ok {
        return fail(format!(
            "the manifest's name '{}' must be 1 to 64 of a-z 0-9 _ -",
            manifest.name
        ));
    }
    if manifest.version.trim().is_empty() {
        return fail("the manifest has no version");
    }
    let mut seen = HashSet::new();
    for param in &manifest.parameters {
        if param.name.is_empty() || !param.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return fail(format!(
                "the manifest's parameter '{}' is not an identifier",
                param.name
            ));
        }
        if !seen.insert(param.name.as_str()) {
            return fail(format!("the manifest declares the parameter '{}' twice", param.name));
        }
    }
    // Importing an interface is not using it: componentize-py, for one, imports the whole
    // world. What a plugin may do is decided per call by its grants; here it is enough that
    // it does not claim what it can never have.
    if kind == PluginKind::Custom && manifest.capabilities.contains(&Capability::AgentInfo) {
        return fail("the manifest declares agent-info, which is reserved for built-in plugins");
    }
    Ok(())
}

fn capability_name(c: &Capability) -> &'static str {
    match c {
        Capability::Http => "http",
        Capability::Kv => "kv",
        Capability::Llm => "llm",
        Capability::Progress => "progress",
        Capability::AgentInfo => "agent-info",
    }
}

/// A manifest as JSON: what `plugin inspect` prints and the store keeps.
pub fn manifest_json(m: &PluginManifest) -> serde_json::Value {
    use crate::domain::{ParamType, ResponseFormat};
    serde_json::json!({
        "name": m.name,
        "version": m.version,
        "description": m.description,
        "parameters": m.parameters.iter().map(|p| serde_json::json!({
            "name": p.name, "type": ParamType::from(p.kind).as_str(), "required": p.required, "description": p.description,
        })).collect::<Vec<_>>(),
        "responseFormat": ResponseFormat::from(m.response_format).as_str(),
        "capabilities": m.capabilities.iter().map(capability_name).collect::<Vec<_>>(),
        "longRunning": m.long_running,
    })
}

/// Reads back what [`manifest_json`] wrote; `None` for anything else.
pub fn manifest_from_json(value: &serde_json::Value) -> Option<PluginManifest> {
    use crate::domain::{ParamSpec, ResponseFormat};
    let text = |key: &str| value[key].as_str().map(str::to_string);
    let parameters: Vec<ParamSpec> = serde_json::from_value(value["parameters"].clone()).ok()?;
    let response_format: ResponseFormat = serde_json::from_value(value["responseFormat"].clone()).ok()?;
    let all = [
        Capability::Http,
        Capability::Kv,
        Capability::Llm,
        Capability::Progress,
        Capability::AgentInfo,
    ];
    let capabilities = value["capabilities"]
        .as_array()?
        .iter()
        .map(|c| all.into_iter().find(|k| Some(capability_name(k)) == c.as_str()))
        .collect::<Option<Vec<_>>>()?;
    Some(PluginManifest {
        name: text("name")?,
        version: text("version")?,
        description: text("description")?,
        parameters: parameters.into_iter().map(Into::into).collect(),
        response_format: response_format.into(),
        capabilities,
        long_running: value["longRunning"].as_bool()?,
    })
}

/// The inspection as JSON (for `plugin inspect`).
pub fn describe(inspection: &Inspection) -> serde_json::Value {
    serde_json::json!({
        "hash": inspection.hash,
        "size": inspection.size,
        "witVersion": inspection.wit_version,
        "manifest": manifest_json(&inspection.manifest),
        "imports": inspection.imports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::bindings::types::{ParamSpec, ParamType, ResponseFormat};

    #[test]
    fn a_stored_manifest_reads_back_the_same() {
        let manifest = PluginManifest {
            name: "weather".into(),
            version: "1.2.0".into(),
            description: "Weather".into(),
            parameters: vec![ParamSpec {
                name: "city".into(),
                kind: ParamType::String,
                required: true,
                description: "City".into(),
            }],
            response_format: ResponseFormat::Markdown,
            capabilities: vec![Capability::Http, Capability::Llm],
            long_running: true,
        };
        let back = manifest_from_json(&manifest_json(&manifest)).unwrap();
        assert_eq!(manifest_json(&back), manifest_json(&manifest));
        assert!(manifest_from_json(&serde_json::json!({"name": "x"})).is_none());
    }
}
