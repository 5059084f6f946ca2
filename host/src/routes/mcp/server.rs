//! The MCP server an agent is: its info, its tools, resources and prompts as MCP lists
//! them, a tool call answered (its outcome in MCP's words: `results.rs`; a task for a long
//! one: `tasks.rs`). rmcp calls it; the direct path (`direct.rs`) calls [`answer_call`]
//! without it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo,
    ContentBlock, DiscoverResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Icon, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, RequestMetaObject,
    Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::model::{CancelTaskParams, CreateTaskResult, GetTaskParams, GetTaskResult, UpdateTaskParams};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::results::{failure, result_of, shaped};
use super::tasks::{detailed, new_task, store_failure, unknown_task};
use super::{Visit, icons};
use crate::domain::{HandlerType, McpBody, McpMessageContent};
use crate::routes::AppState;
use crate::services::ServiceError;
use crate::services::mcp::exposed::{self, PromptRefusal};
use crate::services::mcp::tasks;
use crate::services::mcp::{self, Called, ToolCall, ToolOutcome, Toolbox};

#[derive(Clone)]
pub(super) struct AgentServer {
    pub(super) state: AppState,
}

impl AgentServer {
    fn visit(ctx: &RequestContext<RoleServer>) -> Result<Arc<Toolbox>, ErrorData> {
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Visit>())
            .map(|visit| visit.0.clone())
            .ok_or_else(|| ErrorData::internal_error("Internal server error", None))
    }

    /// One page of a list, from the request's cursor (the index to start at), and the
    /// cursor of the next page, if any.
    fn page<T>(
        &self,
        items: Vec<T>,
        request: Option<PaginatedRequestParams>,
    ) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let per_page = self.state.services.settings.mcp.mcp_tools_per_page;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start < items.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("Invalid cursor '{cursor}'"), None))?,
        };
        let end = (start + per_page).min(items.len());
        let next = (end < items.len()).then(|| end.to_string());
        Ok((items.into_iter().skip(start).take(per_page).collect(), next))
    }

    /// Who this server is: the host, titled with the agent's name, with the agent's icon
    /// (else the host's) and the host's address.
    fn server_info(&self, toolbox: &Toolbox) -> Implementation {
        let base = &self.state.services.public_base_url;
        let agent = &toolbox.found.agent;
        let icon = match &agent.def.mcp.icon {
            Some(icon) => icon_of(icons::icon_url(base, &agent.id, None), &icon.mime_type),
            None => icon_of(format!("{base}/console/icon.svg"), "image/svg+xml"),
        };
        let mut info = Implementation::new("agent-host", env!("CARGO_PKG_VERSION"));
        info.title = Some(agent.def.name.clone());
        info.icons = Some(vec![icon]);
        info.website_url = Some(base.clone());
        info
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("agent-host", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "An agent's commands as tools, and a chat tool to talk to the agent. \
                 With a key they are free; without one, a priced tool answers what to pay \
                 (x402), paid in the call's _meta[\"x402/payment\"].",
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        ctx.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        result.server_info = self.server_info(&*Self::visit(&ctx)?);
        Ok(result)
    }

    async fn discover(&self, ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        info.server_info = self.server_info(&*Self::visit(&ctx)?);
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let tools: Vec<Tool> = toolbox
            .tools()
            .iter()
            .filter_map(|tool| {
                tool_of(
                    tool,
                    toolbox.description(tool),
                    &toolbox,
                    &self.state.services.public_base_url,
                )
            })
            .collect();
        let (page, next) = self.page(tools, request)?;
        Ok(ListToolsResult {
            next_cursor: next,
            ..ListToolsResult::with_all_items(page)
        })
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let listed = exposed::resources(&toolbox.found.agent.def).into_iter().map(|r| {
            let mut resource = Resource::new(r.uri, r.name).with_mime_type(r.mime_type);
            resource.title = r.title;
            resource.description = r.description;
            resource
        });
        let (page, next) = self.page(listed.collect(), request)?;
        Ok(ListResourcesResult {
            next_cursor: next,
            ..ListResourcesResult::with_all_items(page)
        })
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let listed = exposed::templates(&toolbox.found.agent.def).into_iter().map(|r| {
            let mut template = ResourceTemplate::new(r.uri, r.name);
            template.title = r.title;
            template.description = r.description;
            template.mime_type = Some(r.mime_type);
            template
        });
        let (page, next) = self.page(listed.collect(), request)?;
        Ok(ListResourceTemplatesResult {
            next_cursor: next,
            ..ListResourceTemplatesResult::with_all_items(page)
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        // As the revisions name it: -32002, which the SDK makes -32602 for 2026-07-28.
        let Some(found) = exposed::read(&toolbox.found.agent.def, &request.uri) else {
            return Err(ErrorData::resource_not_found(
                "Resource not found",
                Some(json!({ "uri": request.uri })),
            ));
        };
        let contents = match found.body {
            McpBody::Text(text) => ResourceContents::text(text, found.uri),
            McpBody::Blob(blob) => ResourceContents::blob(blob, found.uri),
        };
        Ok(ReadResourceResult::new(vec![contents.with_mime_type(found.mime_type)]).into())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let listed = exposed::prompts(&toolbox.found.agent.def).into_iter().map(|p| {
            let arguments = p.arguments.iter().map(|a| {
                let argument = PromptArgument::new(&a.name).with_required(a.required);
                match &a.description {
                    Some(description) => argument.with_description(description),
                    None => argument,
                }
            });
            let prompt = Prompt::new(p.name, Some(p.description), Some(arguments.collect()));
            match p.title {
                Some(title) => prompt.with_title(title),
                None => prompt,
            }
        });
        let (page, next) = self.page(listed.collect(), request)?;
        Ok(ListPromptsResult {
            next_cursor: next,
            ..ListPromptsResult::with_all_items(page)
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let arguments = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| match value {
                Value::String(text) => (name, text),
                other => (name, other.to_string()),
            })
            .collect();
        let filled = match exposed::prompt(&toolbox.found.agent.def, &request.name, &arguments) {
            Ok(filled) => filled,
            Err(PromptRefusal::Unknown) => {
                return Err(ErrorData::invalid_params(
                    format!("Unknown prompt: {}", request.name),
                    None,
                ));
            }
            Err(PromptRefusal::Invalid(why)) => return Err(ErrorData::invalid_params(why, None)),
        };
        let messages = filled.messages.into_iter().map(|(role, content)| {
            let role = if role == "assistant" {
                Role::Assistant
            } else {
                Role::User
            };
            let block = match content {
                McpMessageContent::Text(text) => ContentBlock::text(text),
                McpMessageContent::Image { mime_type, data } => ContentBlock::image(data, mime_type),
                McpMessageContent::Resource { uri, mime_type, text } => {
                    ContentBlock::resource(ResourceContents::text(text, uri).with_mime_type(mime_type))
                }
            };
            PromptMessage::new(role, block)
        });
        let mut result = GetPromptResult::new(messages.collect());
        result.description = Some(filled.description);
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let agent = &toolbox.found.agent.def;
        let (name, value) = (&request.argument.name, &request.argument.value);
        let values = match &request.r#ref {
            Reference::Prompt(prompt) => exposed::complete_prompt(agent, &prompt.name, name, value),
            Reference::Resource(template) => exposed::complete_template(agent, &template.uri, name, value),
            _ => None,
        };
        let info = CompletionInfo::with_all_values(values.unwrap_or_default()).unwrap_or_default();
        Ok(CompleteResult::new(info))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        // A client of the tasks extension is given a long-running command as a task; one
        // that sent a progress token waits for it, told its progress; any other is given
        // the command's job to poll.
        let as_task = ctx.client_capabilities().is_some_and(|c| c.supports_tasks());
        let progress = ctx.meta.get_progress_token().filter(|_| !as_task).map(|token| {
            let peer = ctx.peer.clone();
            async move |percent: u8| {
                let report = ProgressNotificationParam::new(token.clone(), f64::from(percent)).with_total(100.0);
                let _ = peer.notify_progress(report).await;
            }
        });
        answer_call(&self.state, &toolbox, request, &ctx.meta, progress, as_task).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        let view = tasks::task(&self.state.services, &toolbox, &request.task_id)
            .await
            .map_err(store_failure)?
            .ok_or_else(|| unknown_task(&request.task_id))?;
        Ok(GetTaskResult::new(detailed(
            view,
            &toolbox,
            &self.state.services.public_base_url,
        )))
    }

    async fn update_task(&self, request: UpdateTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        // No command asks its caller for input: there is nothing to answer, only the task
        // to know.
        let toolbox = Self::visit(&ctx)?;
        match tasks::task(&self.state.services, &toolbox, &request.task_id).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(unknown_task(&request.task_id)),
            Err(err) => Err(store_failure(err)),
        }
    }

    async fn cancel_task(&self, request: CancelTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let toolbox = Self::visit(&ctx)?;
        match tasks::cancel(&self.state.services, &toolbox, &request.task_id).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(unknown_task(&request.task_id)),
            Err(err) => Err(store_failure(err)),
        }
    }
}

/// Answers `tools/call`: the tool's outcome, a payment it asks for, or the protocol error
/// of an unknown tool. `meta` is the request's `_meta` (where a payment comes).
pub(super) async fn answer_call(
    state: &AppState,
    toolbox: &Toolbox,
    request: CallToolRequestParams,
    meta: &RequestMetaObject,
    progress: Option<impl AsyncFnMut(u8)>,
    as_task: bool,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    let arguments = request.arguments.unwrap_or_default();
    // Text no database can keep, refused as on every other surface.
    if let Err(refused) = crate::error::refuse_nul(&serde_json::to_vec(&arguments).unwrap_or_default()) {
        return Ok(failure(ServiceError::Validation(refused.message), None).into());
    }
    let sent = json!({ "tool": name, "arguments": arguments });
    let call = ToolCall {
        name,
        arguments,
        payment: meta.get(crate::x402::wire::MCP_PAYMENT_META).cloned(),
        sign_in: meta.get(crate::x402::sign_in::SIGN_IN_WITH_X).cloned(),
        request: sent,
    };
    let services = &state.services;
    Ok(match mcp::call(services, toolbox, call, progress).await {
        // As both revisions name it: a protocol error, not a tool's.
        Ok(Called::UnknownTool) => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        }
        Ok(Called::PaymentRequired(required)) => {
            CallToolResult::structured_error(serde_json::to_value(required).unwrap_or_default())
        }
        Ok(Called::Done { outcome, settlement }) => {
            let meta = settlement.map(|settlement| {
                let mut meta = Map::new();
                meta.insert(
                    crate::x402::wire::MCP_PAYMENT_RESPONSE_META.into(),
                    serde_json::to_value(settlement).unwrap_or_default(),
                );
                MetaObject(meta)
            });
            if let (true, ToolOutcome::Queued { job_id }) = (as_task, &outcome) {
                let created = CreateTaskResult::new(new_task(services, job_id));
                return Ok(CallToolResponse::Task(match meta {
                    Some(meta) => created.with_meta(meta),
                    None => created,
                }));
            }
            let tool = toolbox.found.agent.def.mcp.tools.get(request.name.as_ref());
            let mut result = shaped(result_of(outcome, &services.public_base_url), tool);
            result.meta = meta;
            result
        }
        Err(ServiceError::Store(err)) => {
            tracing::error!("an MCP tool call failed on the store: {err}");
            return Err(ErrorData::internal_error("Internal server error", None));
        }
        Err(err) => failure(err, None),
    }
    .into())
}

/// A tool as MCP lists it. A command that takes a file is not a tool (no argument can
/// carry one).
fn tool_of(tool: &mcp::Tool<'_>, description: String, toolbox: &Toolbox, public_base_url: &str) -> Option<Tool> {
    let Value::Object(schema) = mcp::input_schema(tool.command)? else {
        return None;
    };
    let agent = &toolbox.found.agent;
    let meta = agent.def.mcp.tools.get(tool.name);
    let mut description = description;
    if let Some(price) = tool.price {
        description = format!("{description} Costs {price} USDC a call, paid with x402.")
            .trim()
            .to_string();
    }
    let mut listed = Tool::new(tool.name.to_string(), description, Arc::new(schema));
    listed.title = meta.and_then(|m| m.title.clone());
    listed.output_schema = meta.and_then(|m| m.output_schema.clone()).map(Arc::new);
    // Its own icon, else the agent's.
    let icon = match meta.and_then(|m| m.icon.as_ref()) {
        Some(icon) => Some((icon, icons::icon_url(public_base_url, &agent.id, Some(tool.name)))),
        None => agent
            .def
            .mcp
            .icon
            .as_ref()
            .map(|icon| (icon, icons::icon_url(public_base_url, &agent.id, None))),
    };
    listed.icons = icon.map(|(icon, src)| vec![icon_of(src, &icon.mime_type)]);
    // A fixed text reads nothing and changes nothing; other handlers may reach anything.
    if tool
        .command
        .is_some_and(|c| c.def.handler_type == HandlerType::SimpleText)
    {
        listed = listed.with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        );
    }
    Some(listed)
}

fn icon_of(src: String, mime_type: &str) -> Icon {
    let mut icon = Icon::new(src);
    icon.mime_type = Some(mime_type.to_string());
    icon
}
