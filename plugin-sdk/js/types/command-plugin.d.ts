/// <reference path="./interfaces/agent-plugin-agent-info.d.ts" />
/// <reference path="./interfaces/agent-plugin-command.d.ts" />
/// <reference path="./interfaces/agent-plugin-http.d.ts" />
/// <reference path="./interfaces/agent-plugin-kv.d.ts" />
/// <reference path="./interfaces/agent-plugin-llm.d.ts" />
/// <reference path="./interfaces/agent-plugin-log.d.ts" />
/// <reference path="./interfaces/agent-plugin-meter.d.ts" />
/// <reference path="./interfaces/agent-plugin-progress.d.ts" />
/// <reference path="./interfaces/agent-plugin-types.d.ts" />
declare module 'agent:plugin/command-plugin@0.4.0' {
  export type * as AgentPluginAgentInfo040 from 'agent:plugin/agent-info@0.4.0'; // import agent:plugin/agent-info@0.4.0
  export type * as AgentPluginHttp040 from 'agent:plugin/http@0.4.0'; // import agent:plugin/http@0.4.0
  export type * as AgentPluginKv040 from 'agent:plugin/kv@0.4.0'; // import agent:plugin/kv@0.4.0
  export type * as AgentPluginLlm040 from 'agent:plugin/llm@0.4.0'; // import agent:plugin/llm@0.4.0
  export type * as AgentPluginLog040 from 'agent:plugin/log@0.4.0'; // import agent:plugin/log@0.4.0
  export type * as AgentPluginMeter040 from 'agent:plugin/meter@0.4.0'; // import agent:plugin/meter@0.4.0
  export type * as AgentPluginProgress040 from 'agent:plugin/progress@0.4.0'; // import agent:plugin/progress@0.4.0
  export type * as AgentPluginTypes040 from 'agent:plugin/types@0.4.0'; // import agent:plugin/types@0.4.0
  export * as command from 'agent:plugin/command@0.4.0'; // export agent:plugin/command@0.4.0
}
