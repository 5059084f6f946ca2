/// <reference path="./interfaces/agent-plugin-agent-info.d.ts" />
/// <reference path="./interfaces/agent-plugin-command.d.ts" />
/// <reference path="./interfaces/agent-plugin-http.d.ts" />
/// <reference path="./interfaces/agent-plugin-kv.d.ts" />
/// <reference path="./interfaces/agent-plugin-llm.d.ts" />
/// <reference path="./interfaces/agent-plugin-log.d.ts" />
/// <reference path="./interfaces/agent-plugin-progress.d.ts" />
/// <reference path="./interfaces/agent-plugin-types.d.ts" />
declare module 'agent:plugin/command-plugin@0.3.0' {
  export type * as AgentPluginAgentInfo030 from 'agent:plugin/agent-info@0.3.0'; // import agent:plugin/agent-info@0.3.0
  export type * as AgentPluginHttp030 from 'agent:plugin/http@0.3.0'; // import agent:plugin/http@0.3.0
  export type * as AgentPluginKv030 from 'agent:plugin/kv@0.3.0'; // import agent:plugin/kv@0.3.0
  export type * as AgentPluginLlm030 from 'agent:plugin/llm@0.3.0'; // import agent:plugin/llm@0.3.0
  export type * as AgentPluginLog030 from 'agent:plugin/log@0.3.0'; // import agent:plugin/log@0.3.0
  export type * as AgentPluginProgress030 from 'agent:plugin/progress@0.3.0'; // import agent:plugin/progress@0.3.0
  export type * as AgentPluginTypes030 from 'agent:plugin/types@0.3.0'; // import agent:plugin/types@0.3.0
  export * as command from 'agent:plugin/command@0.3.0'; // export agent:plugin/command@0.3.0
}
