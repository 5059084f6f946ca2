//! How an agent's paid requests are described to payers and indexers: the v1
//! requirement's `extra` and `outputSchema`, the v2 `bazaar` extension (an example of the
//! request and the JSON Schema it follows), and a discovery entry's metadata. Written
//! from the agent and its paid commands alone, so a price list, a 402 and the discovery
//! list always say the same.

use serde_json::{Map, Value, json};

use crate::domain::{Agent, Command, Network, ParamSpec, ParamType};
use crate::money::MicroUsdc;

/// Name given to clients in `extra.serviceName`.
const SERVICE_NAME: &str = "agent-host";

/// An agent for sale on one network, as the descriptions need it.
pub struct Listing<'a> {
    pub agent: &'a Agent,
    pub network: Network,
    /// Its paid commands, in manifest order.
    pub commands: &'a [Command],
    /// The price of a message, and of a command without its own.
    pub default_price: MicroUsdc,
}

impl Listing<'_> {
    pub fn price_of(&self, command: &Command) -> MicroUsdc {
        command.def.price.unwrap_or(self.default_price)
    }

    /// The v1 requirement's `extra`: who sells, what, and at which prices.
    pub fn v1_extra(&self) -> Map<String, Value> {
        let mut extra = Map::new();
        extra.insert("serviceName".into(), json!(SERVICE_NAME));
        extra.insert("agentId".into(), json!(self.agent.id));
        extra.insert("agentName".into(), json!(self.agent.def.name));
        let names: Vec<&str> = self.commands.iter().map(|c| c.def.name.as_str()).collect();
        extra.insert("availableCommands".into(), json!(names));
        let pricing = self
            .commands
            .iter()
            .map(|c| (c.def.name.clone(), self.price_of(c).to_json_number()));
        extra.insert("commandPricing".into(), Value::Object(pricing.collect()));
        extra
    }

    /// The v1 requirement's `outputSchema`: how the request is posted, and its fields.
    pub fn v1_output_schema(&self) -> Value {
        json!({ "input": {
            "type": "http",
            "method": "POST",
            "bodyType": "json",
            "bodyFields": self.body_fields(),
        }})
    }

    /// The v2 `bazaar` extension: the request's input and output, as `info` (an example)
    /// and `schema` (JSON Schema of `info`), built from the same data as v1's
    /// `outputSchema`. A command's request describes that command's parameters alone.
    pub fn bazaar(&self, command: Option<&Command>) -> Value {
        let (body_example, body_schema) = match command {
            Some(command) => command_body(command),
            None => (
                json!({ "message": "Hello" }),
                json!({ "type": "object", "properties": Value::Object(self.body_schema_properties()) }),
            ),
        };
        let output_example = json!({
            "success": true,
            "response": "…",
            "format": command.map(|c| c.def.response_format.as_str()).unwrap_or("text"),
            "agentId": self.agent.id,
        });
        json!({
            "info": {
                "input": { "type": "http", "method": "POST", "bodyType": "json", "body": body_example },
                "output": { "type": "json", "example": output_example },
            },
            "schema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "input": {
                        "type": "object",
                        "properties": {
                            "type": { "type": "string", "const": "http" },
                            "method": { "type": "string", "enum": ["POST"] },
                            "bodyType": { "type": "string", "enum": ["json"] },
                            "body": body_schema,
                        },
                        "required": ["type", "method", "bodyType", "body"],
                        "additionalProperties": false,
                    },
                    "output": {
                        "type": "object",
                        "properties": { "type": { "type": "string" }, "example": { "type": "object" } },
                        "required": ["type"],
                    },
                },
                "required": ["input"],
            },
        })
    }

    /// The v2 `bazaar` extension for a tool sold over MCP: the tool's name, what it does,
    /// the transport and its arguments' JSON Schema, as `info`, with `schema` describing
    /// `info` (the extension's MCP form).
    pub fn mcp_bazaar(&self, tool: &str, description: &str, input_schema: &Value, format: &str) -> Value {
        json!({
            "info": {
                "input": {
                    "type": "mcp",
                    "toolName": tool,
                    "description": description,
                    "transport": "streamable-http",
                    "inputSchema": input_schema,
                },
                "output": { "type": "mcp", "format": format },
            },
            "schema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "input": {
                        "type": "object",
                        "properties": {
                            "type": { "type": "string", "const": "mcp" },
                            "toolName": { "type": "string" },
                            "description": { "type": "string" },
                            "transport": { "type": "string", "enum": ["streamable-http", "sse"] },
                            "inputSchema": { "type": "object" },
                        },
                        "required": ["type", "toolName", "inputSchema"],
                        "additionalProperties": false,
                    },
                    "output": {
                        "type": "object",
                        "properties": { "type": { "type": "string" }, "format": { "type": "string" } },
                    },
                },
                "required": ["input"],
            },
        })
    }

    /// A discovery entry's `metadata`: the agent, its message request, and each paid
    /// command with its price and its request's description.
    pub fn discovery_metadata(&self) -> Map<String, Value> {
        let commands: Vec<Value> = self
            .commands
            .iter()
            .map(|command| {
                json!({
                    "command": command.def.name,
                    "description": command.def.description,
                    "amount": self.price_of(command).0.to_string(),
                    "bazaar": self.bazaar(Some(command)),
                })
            })
            .collect();
        let agent = self.agent;
        let mut metadata = Map::new();
        metadata.insert("agentId".into(), json!(agent.id));
        metadata.insert("agentName".into(), json!(agent.def.name));
        metadata.insert("username".into(), json!(agent.def.username));
        metadata.insert("network".into(), json!(self.network.as_str()));
        metadata.insert("bazaar".into(), self.bazaar(None));
        metadata.insert("commands".into(), Value::Array(commands));
        metadata
    }

    /// The request body's fields, as JSON Schema properties (the v1 `bodyFields` minus
    /// its `required: false` markers).
    fn body_schema_properties(&self) -> Map<String, Value> {
        self.body_fields()
            .into_iter()
            .map(|(name, mut field)| {
                if let Some(field) = field.as_object_mut() {
                    field.remove("required");
                }
                (name, field)
            })
            .collect()
    }

    /// `message`, `command` (with the paid commands as its enum) and the union of their
    /// parameters (a parameter is required only by its own command, so none is here).
    fn body_fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert(
            "message".into(),
            json!({ "type": "string", "required": false, "description": "Free text for the agent; a leading /command runs that command" }),
        );
        let names: Vec<&str> = self.commands.iter().map(|c| c.def.name.as_str()).collect();
        fields.insert(
            "command".into(),
            json!({ "type": "string", "required": false, "description": "A command to run instead of a message", "enum": names }),
        );
        for command in self.commands {
            for param in &command.def.parameters {
                if fields.contains_key(&param.name) {
                    continue;
                }
                fields.insert(
                    param.name.clone(),
                    json!({ "type": json_type(param.kind), "required": false, "description": param_description(command, param) }),
                );
            }
        }
        fields
    }
}

/// What a standard client needs to sign on `network`, in both versions: Solana's fee
/// payer (who co-signs: the seller, or its facilitator), or Base's EIP-712 domain of the
/// token (`name`, `version`).
pub fn signing_extra(network: Network, fee_payer: &str, eip712: (&str, &str)) -> Map<String, Value> {
    let mut extra = Map::new();
    match network {
        Network::Solana => {
            extra.insert("feePayer".into(), json!(fee_payer));
        }
        Network::Base => {
            extra.insert("name".into(), json!(eip712.0));
            extra.insert("version".into(), json!(eip712.1));
        }
    }
    extra
}

/// A parameter's JSON type: a file travels as a URL or data string.
fn json_type(kind: ParamType) -> &'static str {
    match kind {
        ParamType::File => "string",
        other => other.as_str(),
    }
}

fn param_description(command: &Command, param: &ParamSpec) -> String {
    if param.description.is_empty() {
        format!("Parameter of /{}", command.def.name)
    } else {
        format!("{} (/{})", param.description, command.def.name)
    }
}

/// The body a command's own address takes: its parameters (and, if it likes, the
/// command's name), as JSON Schema.
pub fn parameters_schema(command: &Command) -> Value {
    // At the command's own address the body may still name it, but need not.
    let (_, mut schema) = command_body(command);
    if let Some(required) = schema["required"].as_array_mut() {
        required.retain(|name| name != "command");
    }
    schema
}

/// One command's request: an example body and its JSON Schema.
fn command_body(command: &Command) -> (Value, Value) {
    let mut example = Map::new();
    example.insert("command".into(), json!(command.def.name));
    let mut properties = Map::new();
    properties.insert("command".into(), json!({ "type": "string", "const": command.def.name }));
    let mut required = vec![json!("command")];
    for param in &command.def.parameters {
        let kind = json_type(param.kind);
        properties.insert(
            param.name.clone(),
            json!({ "type": kind, "description": param_description(command, param) }),
        );
        if param.required {
            required.push(json!(param.name));
            let sample = match param.kind {
                ParamType::Number => json!(1),
                ParamType::Boolean => json!(true),
                ParamType::Array => json!([]),
                ParamType::Object => json!({}),
                ParamType::String | ParamType::File => json!(param.name),
            };
            example.insert(param.name.clone(), sample);
        }
    }
    // A parameter the command does not declare is refused (`params::resolve`).
    let schema =
        json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false });
    (Value::Object(example), schema)
}
