//! `simple_text`: answers with the command's `config.text`, `{{param}}` placeholders filled in.

use agent_plugin_sdk::{Invocation, Manifest, Output, Plugin, Result, template};

struct SimpleText;

impl Plugin for SimpleText {
    fn manifest() -> Manifest {
        Manifest::new("simple_text", env!("CARGO_PKG_VERSION")).describe("A static text with {{param}} placeholders")
    }

    fn execute(call: Invocation) -> Result<Output> {
        let text: String = call.config("text")?;
        Ok(Output::text(template::render(&text, &call.parameters)).with_format(call.format))
    }
}

agent_plugin_sdk::export_plugin!(SimpleText);
