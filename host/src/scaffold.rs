//! `agent-host plugin new NAME --lang rust|js|python`: a plugin project that builds as is,
//! with a `plugin-tests.toml` that `agent-host plugin test` runs.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The languages a plugin can be written in here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Js,
    Python,
}

/// Creates `parent/name` in `lang`. `sdk` is the language's SDK (the `agent-plugin-sdk`
/// crate, or `plugin-sdk/js`); a Python plugin binds to the WIT folder `wit` directly.
pub fn create(parent: &Path, name: &str, lang: Lang, sdk: &Path, wit: &Path) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    let lib = name.replace('-', "_");
    let (files, artifact) = match lang {
        Lang::Rust => (
            rust(name, &canonical(sdk, "the SDK")?),
            format!("target/wasm32-wasip2/release/{lib}.wasm"),
        ),
        Lang::Js => (
            js(name, &lib, &canonical(sdk, "the JavaScript SDK")?),
            format!("dist/{lib}.wasm"),
        ),
        Lang::Python => (
            python(name, &lib, &canonical(wit, "the WIT")?),
            format!("dist/{lib}.wasm"),
        ),
    };
    // Only once every input checked out: a failed attempt leaves no folder behind.
    let dir = new_folder(parent, name)?;
    for (path, text) in files
        .into_iter()
        .chain([("plugin-tests.toml".to_string(), cases(&artifact))])
    {
        let path = dir.join(path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).with_context(|| format!("cannot create {}", folder.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    #[cfg(unix)]
    if lang == Lang::Python {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("build.sh"), std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}

fn canonical(path: &Path, what: &str) -> anyhow::Result<PathBuf> {
    path.canonicalize()
        .with_context(|| format!("{what} is not at {}", path.display()))
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid {
        bail!("a plugin name is 1 to 64 of a-z 0-9 _ -, starting with a letter");
    }
    Ok(())
}

/// Makes the plugin's folder, which must not exist yet.
fn new_folder(parent: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = parent.join(name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// The cases every new plugin starts with: it greets, and it needs a name.
fn cases(artifact: &str) -> String {
    format!(
        r#"# `agent-host plugin test` runs these in order, after the build (add --watch to rerun on save).
plugin = "{artifact}"

[[case]]
name = "greets"
params = {{ name = "Ann" }}
expect = "Hello, Ann!"

[[case]]
name = "needs a name"
params = {{}}
expect_error = "missing required parameter 'name'"
"#
    )
}

fn rust(name: &str, sdk: &Path) -> Vec<(String, String)> {
    let manifest = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
agent-plugin-sdk = {{ path = "{sdk}" }}

# Small components; a panic aborts only this plugin's instance.
[profile.release]
opt-level = "s"
lto = true
strip = true
codegen-units = 1
panic = "abort"

# A standalone crate, not part of any enclosing workspace.
[workspace]
"#,
        sdk = sdk.display()
    );
    let struct_name: String = name
        .split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    let source = format!(
        r#"//! The `{name}` command plugin.

use agent_plugin_sdk::{{Invocation, Manifest, Output, Param, Plugin, Result}};

struct {struct_name};

impl Plugin for {struct_name} {{
    fn manifest() -> Manifest {{
        Manifest::new("{name}", env!("CARGO_PKG_VERSION"))
            .describe("Greets someone")
            .param(Param::string("name").required().describe("Who to greet"))
    }}

    fn execute(call: Invocation) -> Result<Output> {{
        let name: String = call.param("name")?;
        Ok(Output::text(format!("Hello, {{name}}!")))
    }}
}}

agent_plugin_sdk::export_plugin!({struct_name});
"#
    );
    let lib = name.replace('-', "_");
    let readme = format!(
        "# {name}\n\nBuild:\n\n    cargo build --release --target wasm32-wasip2\n\nTry it:\n\n    agent-host plugin test\n    agent-host plugin run target/wasm32-wasip2/release/{lib}.wasm --param name=Ann\n\n\
         Use it in an agent manifest:\n\n    [[commands]]\n    command = \"{lib}\"\n    handler_type = \"custom\"\n    plugin = \"target/wasm32-wasip2/release/{lib}.wasm\"\n"
    );
    vec![
        ("Cargo.toml".into(), manifest),
        ("src/lib.rs".into(), source),
        ("README.md".into(), readme),
        (".gitignore".into(), "/target\n".into()),
    ]
}

fn js(name: &str, lib: &str, sdk: &Path) -> Vec<(String, String)> {
    let sdk = sdk.display();
    let package = format!(
        r#"{{
  "name": "{name}",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "scripts": {{
    "prebuild": "npm install --prefix {sdk} --no-audit --no-fund --loglevel=error",
    "build": "node {sdk}/build.mjs src/index.js dist/{lib}.wasm"
  }}
}}
"#
    );
    let source = format!(
        r#"// The `{name}` command plugin. Build: npm run build; try it: agent-host plugin test.
import {{ definePlugin }} from "@agent-host/plugin-sdk";

export const command = definePlugin({{
  name: "{name}",
  version: "0.1.0",
  description: "Greets someone",
  parameters: [{{ name: "name", type: "string", required: true, description: "Who to greet" }}],
  execute(call) {{
    return `Hello, ${{call.string("name")}}!`;
  }},
}});
"#
    );
    let readme = format!(
        "# {name}\n\nWritten with the JavaScript SDK ({sdk}). Build:\n\n    npm run build\n\nTry it:\n\n    agent-host plugin test\n    agent-host plugin run dist/{lib}.wasm --param name=Ann\n\n\
         Use it in an agent manifest:\n\n    [[commands]]\n    command = \"{lib}\"\n    handler_type = \"custom\"\n    plugin = \"dist/{lib}.wasm\"\n"
    );
    vec![
        ("package.json".into(), package),
        ("src/index.js".into(), source),
        ("README.md".into(), readme),
        (".gitignore".into(), "/dist\n/node_modules\n".into()),
    ]
}

fn python(name: &str, lib: &str, wit: &Path) -> Vec<(String, String)> {
    let wit = wit.display();
    let build = format!(
        r#"#!/usr/bin/env bash
# Builds dist/{lib}.wasm from app.py with componentize-py (pip install componentize-py).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p dist
componentize-py -d {wit} -w command-plugin componentize app -o dist/{lib}.wasm
"#
    );
    let source = format!(
        r#""""The `{name}` command plugin. Build: ./build.sh; try it: agent-host plugin test."""

import json

from componentize_py_types import Err
from wit_world import exports
# Since WIT 0.2.0 wasi:http has a `types` interface too, so componentize-py names ours in full.
from wit_world.imports import agent_plugin_types as types


class Command(exports.Command):
    def manifest(self) -> types.PluginManifest:
        return types.PluginManifest(
            name="{name}",
            version="0.1.0",
            description="Greets someone",
            parameters=[
                types.ParamSpec(name="name", kind=types.ParamType.STRING, required=True, description="Who to greet"),
            ],
            response_format=types.ResponseFormat.TEXT,
            capabilities=[],
            long_running=False,
        )

    def execute(self, invocation: types.Invocation) -> types.Output:
        name = json.loads(invocation.parameters or "{{}}").get("name")
        if not isinstance(name, str) or not name.strip():
            raise Err(types.CommandError_InvalidInput("parameter 'name' must be a non-empty string"))
        return types.Output(response=f"Hello, {{name}}!", format=invocation.response_format, media_url=None)
"#
    );
    let readme = format!(
        "# {name}\n\nWritten in Python, bound to the WIT ({wit}) by componentize-py. Build:\n\n    ./build.sh\n\nTry it:\n\n    agent-host plugin test\n    agent-host plugin run dist/{lib}.wasm --param name=Ann\n\n\
         Use it in an agent manifest:\n\n    [[commands]]\n    command = \"{lib}\"\n    handler_type = \"custom\"\n    plugin = \"dist/{lib}.wasm\"\n"
    );
    vec![
        ("build.sh".into(), build),
        ("app.py".into(), source),
        ("README.md".into(), readme),
        (".gitignore".into(), "/dist\n__pycache__/\n".into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_attempt_leaves_no_folder() {
        let parent = std::env::temp_dir().join(format!("scaffold-{}", crate::random::hex_token(6)));
        std::fs::create_dir_all(&parent).unwrap();
        let missing = parent.join("no-sdk-here");
        let err = create(&parent, "hello", Lang::Js, &missing, &missing).unwrap_err();
        assert!(err.to_string().contains("the JavaScript SDK is not at"), "{err}");
        assert!(!parent.join("hello").exists(), "the folder is not left behind");
        assert!(create(&parent, "Bad Name", Lang::Rust, &missing, &missing).is_err());
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
