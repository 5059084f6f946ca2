//! An example custom command, written only against `agent-plugin-sdk`: a notebook the
//! agent keeps. `/notes add text="Buy milk"`, `/notes list`, `/notes clear`.

use agent_plugin_sdk::{Capability, Error, Invocation, Manifest, Output, Param, Plugin, Result, kv};

struct Notes;

const KEY: &str = "notes";
const MAX_NOTES: usize = 100;

impl Plugin for Notes {
    fn manifest() -> Manifest {
        Manifest::new("notes", env!("CARGO_PKG_VERSION"))
            .describe("Keeps short notes: add, list, clear")
            .param(Param::string("action").required().describe("add, list or clear"))
            .param(Param::string("text").describe("The note to add"))
            .capability(Capability::Kv)
    }

    fn execute(call: Invocation) -> Result<Output> {
        let mut notes: Vec<String> = match kv::get(KEY)? {
            Some(bytes) => String::from_utf8_lossy(&bytes).lines().map(str::to_string).collect(),
            None => Vec::new(),
        };
        let action: String = call.param("action")?;
        let reply = match action.as_str() {
            "add" => {
                let text: String = call.param("text")?;
                let text = text.replace('\n', " ").trim().to_string();
                if text.is_empty() {
                    return Err(Error::invalid("parameter 'text' is empty"));
                }
                if notes.len() >= MAX_NOTES {
                    return Err(Error::failed(format!("the notebook is full ({MAX_NOTES} notes)")));
                }
                notes.push(text);
                kv::set_string(KEY, &notes.join("\n"))?;
                format!("Noted ({} in all).", notes.len())
            }
            "list" if notes.is_empty() => "No notes yet.".to_string(),
            "list" => notes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{}. {n}", i + 1))
                .collect::<Vec<_>>()
                .join("\n"),
            "clear" => {
                kv::delete(KEY)?;
                format!("Cleared {} notes.", notes.len())
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown action '{other}': use add, list or clear"
                )));
            }
        };
        Ok(Output::text(reply))
    }
}

agent_plugin_sdk::export_plugin!(Notes);
