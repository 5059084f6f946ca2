//! `agent-host plugin new NAME`: a plugin crate that builds as is.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

pub fn create(parent: &Path, name: &str, sdk: &Path) -> anyhow::Result<PathBuf> {
    let valid = name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid {
        bail!("a plugin name is 1 to 64 of a-z 0-9 _ -, starting with a letter");
    }
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("the SDK is not at {}", sdk.display()))?;
    let dir = parent.join(name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    std::fs::create_dir_all(dir.join("src")).with_context(|| format!("cannot create {}", dir.display()))?;
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
        "# {name}\n\nBuild:\n\n    cargo build --release --target wasm32-wasip2\n\nCheck:\n\n    agent-host plugin inspect target/wasm32-wasip2/release/{lib}.wasm\n\n\
         Use it in an agent manifest:\n\n    [[commands]]\n    command = \"{lib}\"\n    handler_type = \"custom\"\n    plugin = \"target/wasm32-wasip2/release/{lib}.wasm\"\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    std::fs::write(dir.join("src/lib.rs"), source)?;
    std::fs::write(dir.join("README.md"), readme)?;
    std::fs::write(dir.join(".gitignore"), "/target\n")?;
    Ok(dir)
}
