/**
 * The execution environment of a conversation (spec §2.2 `HarnessOptions.env`, §7.3, §7.4): what its
 * tools and prompt sections reach. Ours is a workspace file system (the browser has no shell and no
 * working directory). An app builds one per conversation with the `env` option of
 * `AgentHarness.open`; without it there is no environment (spec §2.2). `workspaceEnv(fs)` is the
 * builder that gives every conversation one workspace (the app's, worker/app/app-agent.ts).
 * Invariants: a builder is called at each use, never inside a commit: once per tool execution (a
 * rerun after recovery builds it again; a throw is the call's ordinary error result) and once per
 * preparation that renders sections (a throw is reported and the sections render with no env).
 */
import type { ConversationId, Json } from "../core/types.ts";
import type { WorkspaceFs } from "./workspace/fs.ts";

export interface ExecutionEnv {
  readonly fs: WorkspaceFs;
}

/** What a builder is asked for: the conversation, and a reader of its committed documents. */
export interface EnvTarget {
  readonly conversationId: ConversationId;
  /** A committed document of the conversation (undefined when absent). */
  read(name: string): Json | undefined;
}

/** Builds a conversation's environment at each use; undefined: the conversation has none. */
export type EnvBuilder = (
  target: EnvTarget,
  context: { readonly signal: AbortSignal },
) => ExecutionEnv | undefined | Promise<ExecutionEnv | undefined>;

/** A builder giving every conversation the same environment: the workspace `fs`. */
export function workspaceEnv(fs: WorkspaceFs): EnvBuilder {
  const env: ExecutionEnv = { fs };
  return () => env;
}

/** The file system of a tool's environment, or an error that becomes the call's error result. */
export function envFs(env: ExecutionEnv | undefined): WorkspaceFs {
  if (!env) throw new Error("this conversation has no environment: no workspace to reach");
  return env.fs;
}
