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
import type { ConversationId, EntryId, Json } from "../core/types.ts";
import type { WorkspaceFs } from "./workspace/fs.ts";

export interface ExecutionEnv {
  readonly fs: WorkspaceFs;
}

/**
 * Committed documents as an environment builder and a prompt section read them: the `read` of
 * `EnvTarget` and `PromptInput` (spec §2.2, §7.4: a `DocumentReader`, here by name: documents have
 * names, not public tokens). Reads never create a document. Called as a function, `read(name)`
 * answers at once for the asking conversation (its documents are in memory while it prepares or
 * runs a call); `read.snapshot` and `read.snapshotAsOf` reach any conversation and may load its
 * documents first, so they answer by promise, as the hooks' api does (extensions/hooks.ts).
 */
export interface DocumentReader {
  /** A committed document of the asking conversation (undefined when absent). */
  (name: string): Json | undefined;
  /** A committed document of any conversation, the asking one by default (undefined when absent). */
  snapshot(name: string, conversationId?: ConversationId): Promise<Json | undefined>;
  /**
   * A rewindable document of a conversation (the asking one by default) as it was at the end of entry
   * `at`'s commit (spec §3.3): undefined when no incarnation was alive then; refused for a document
   * that keeps no history or an entry the conversation cannot see.
   */
  snapshotAsOf(name: string, at: EntryId, conversationId?: ConversationId): Promise<Json | undefined>;
}

/** What a `DocumentReader` reads through: the core harness's committed reads. */
export interface DocumentSource {
  docNow(conversationId: ConversationId, name: string): Json | undefined;
  doc(conversationId: ConversationId, name: string): Promise<Json | undefined>;
  snapshotAsOf(
    conversationId: ConversationId,
    name: string,
    at: EntryId,
  ): Promise<{ readonly value: Json } | undefined>;
}

/** The reader from conversation `c`'s point of view. */
export function documentReader(source: DocumentSource, c: ConversationId): DocumentReader {
  return Object.assign((name: string) => source.docNow(c, name), {
    snapshot: (name: string, other: ConversationId = c) => source.doc(other, name),
    snapshotAsOf: async (name: string, at: EntryId, other: ConversationId = c) =>
      (await source.snapshotAsOf(other, name, at))?.value,
  });
}

/** What a builder is asked for: the conversation, and a reader of committed documents. */
export interface EnvTarget {
  readonly conversationId: ConversationId;
  /** Committed documents: `read(name)` of this conversation, `read.snapshot`, `read.snapshotAsOf`. */
  readonly read: DocumentReader;
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
