/// <reference path="./agent-plugin-types.d.ts" />
declare module 'agent:plugin/agent-info@0.4.0' {
  export function profile(): AgentProfile;
  export function commands(): Array<CommandInfo>;
  export type ParamSpec = import('agent:plugin/types@0.4.0').ParamSpec;
  export interface AgentProfile {
    id: string,
    username: string,
    name: string,
    personality: string,
    knowledge: Array<string>,
  }
  export interface CommandInfo {
    name: string,
    description: string,
    parameters: Array<ParamSpec>,
    enabled: boolean,
  }
}
