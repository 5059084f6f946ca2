/// <reference path="./agent-plugin-types.d.ts" />
declare module 'agent:plugin/command@0.4.0' {
  export function manifest(): PluginManifest;
  export function execute(invocation: Invocation): Output;
  export type PluginManifest = import('agent:plugin/types@0.4.0').PluginManifest;
  export type Invocation = import('agent:plugin/types@0.4.0').Invocation;
  export type Output = import('agent:plugin/types@0.4.0').Output;
  export type CommandError = import('agent:plugin/types@0.4.0').CommandError;
}
