use crate::Format;
use crate::bindings::agent::plugin::types as wit;

/// Parameter types, as in agent manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Number,
    Boolean,
    Array,
    Object,
}

/// A host capability a plugin asks for. Logging needs none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Outbound HTTP to the hosts the agent manifest grants (`allowed_hosts`).
    Http,
    /// A key-value store scoped to the agent and the command running this plugin.
    Kv,
    /// Completions from the host's LLM provider (the agent manifest must also grant it to
    /// the command: `allow_llm = true`).
    Llm,
    /// Progress reports for long runs.
    Progress,
    /// The agent's profile and commands (built-in plugins only).
    AgentInfo,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: ParamType,
    pub required: bool,
    pub description: String,
}

impl Param {
    pub fn new(name: &str, kind: ParamType) -> Param {
        Param {
            name: name.to_string(),
            kind,
            required: false,
            description: String::new(),
        }
    }

    pub fn string(name: &str) -> Param {
        Param::new(name, ParamType::String)
    }

    pub fn number(name: &str) -> Param {
        Param::new(name, ParamType::Number)
    }

    pub fn boolean(name: &str) -> Param {
        Param::new(name, ParamType::Boolean)
    }

    pub fn required(mut self) -> Param {
        self.required = true;
        self
    }

    pub fn describe(mut self, description: &str) -> Param {
        self.description = description.to_string();
        self
    }
}

/// What a plugin is and needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub description: String,
    pub parameters: Vec<Param>,
    pub format: Format,
    pub capabilities: Vec<Capability>,
    pub long_running: bool,
}

impl Manifest {
    pub fn new(name: &str, version: &str) -> Manifest {
        Manifest {
            name: name.to_string(),
            version: version.to_string(),
            description: String::new(),
            parameters: Vec::new(),
            format: Format::Text,
            capabilities: Vec::new(),
            long_running: false,
        }
    }

    pub fn describe(mut self, description: &str) -> Manifest {
        self.description = description.to_string();
        self
    }

    pub fn param(mut self, param: Param) -> Manifest {
        self.parameters.push(param);
        self
    }

    pub fn format(mut self, format: Format) -> Manifest {
        self.format = format;
        self
    }

    pub fn capability(mut self, capability: Capability) -> Manifest {
        if !self.capabilities.contains(&capability) {
            self.capabilities.push(capability);
        }
        self
    }

    pub fn long_running(mut self) -> Manifest {
        self.long_running = true;
        self
    }

    pub(crate) fn into_wit(self) -> wit::PluginManifest {
        wit::PluginManifest {
            name: self.name,
            version: self.version,
            description: self.description,
            parameters: self
                .parameters
                .into_iter()
                .map(|p| wit::ParamSpec {
                    name: p.name,
                    kind: match p.kind {
                        ParamType::String => wit::ParamType::String,
                        ParamType::Number => wit::ParamType::Number,
                        ParamType::Boolean => wit::ParamType::Boolean,
                        ParamType::Array => wit::ParamType::Array,
                        ParamType::Object => wit::ParamType::Object,
                    },
                    required: p.required,
                    description: p.description,
                })
                .collect(),
            response_format: self.format.into(),
            capabilities: self
                .capabilities
                .into_iter()
                .map(|c| match c {
                    Capability::Http => wit::Capability::Http,
                    Capability::Kv => wit::Capability::Kv,
                    Capability::Llm => wit::Capability::Llm,
                    Capability::Progress => wit::Capability::Progress,
                    Capability::AgentInfo => wit::Capability::AgentInfo,
                })
                .collect(),
            long_running: self.long_running,
        }
    }
}
