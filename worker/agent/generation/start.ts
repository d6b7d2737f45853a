/**
 * The inbox policy of an agent harness: the queue modes from the settings, and how an admitted input
 * starts the generation that answers it. With the transcript cached and no blocking compaction due,
 * the creating commit also prepares the first request (and starts a background compaction when one
 * is due); otherwise the generation starts at its `prepare` phase.
 */
import type { AnyTaskDefinition } from "../../core/define.ts";
import { compactionNeeded } from "../compaction/policy.ts";
import { startBackgroundCompaction } from "../compaction/task.ts";
import type { CompactionDefinition } from "../compaction/types.ts";
import type { InboxPolicy } from "../conversation/inbox.ts";
import { DOC, type LiveState, readDoc, writeDoc } from "../records.ts";
import type { AgentServices } from "../services.ts";
import { prepareRequest } from "./task.ts";

/** The policy; `tasks` hands out the definitions it creates (made after the policy: read at each start). */
export function inboxPolicy(
  services: AgentServices,
  tasks: { generation: () => AnyTaskDefinition; compaction: () => CompactionDefinition },
): InboxPolicy {
  return {
    steeringMode: () => services.settings().steeringMode,
    followUpMode: () => services.settings().followUpMode,
    startGeneration: (tx, conversationId) => {
      // With the transcript cached, the creating commit also prepares the first request. The cache
      // holds published entries only: the unpublished ones follow it, for the threshold check and the
      // system planning alike (copied only when there are any).
      const cached = services.entries.peek(conversationId);
      // Entries not published yet: this commit's, and those of the commits before it in its group
      // (a round's handover joins the group that stored the round's results). A cache loaded from
      // the store after the group's COMMIT may hold some of them already.
      const last = cached?.at(-1)?.id ?? 0;
      const appended = cached ? tx.appendedEntries(conversationId).filter((e) => e.id > last) : [];
      const entries = cached && appended.length > 0 ? cached.concat(appended) : cached;
      // Over the blocking threshold the generation starts at `prepare`, which compacts first.
      const need = entries && compactionNeeded(services, tx, conversationId, entries);
      if (entries && need !== "blocking") {
        const prepared = prepareRequest(services, tx, conversationId, undefined, 1, entries);
        // A section that renders asynchronously makes the generation start at `prepare` instead.
        if (prepared.status === "ready") {
          if (need === "background") startBackgroundCompaction(tx, tasks.compaction(), conversationId);
          const taskId = tx.createTask(
            tasks.generation(),
            {},
            {
              ownership: { kind: "conversation" },
              conversationId,
              start: prepared.checkpoint,
            },
          );
          const state = readDoc<LiveState>(tx, conversationId, DOC.live, {});
          writeDoc<LiveState>(tx, conversationId, DOC.live, {
            ...state,
            generation: { taskId, attempt: 1 },
          });
          return taskId;
        }
      }
      return tx.createTask(
        tasks.generation(),
        {},
        {
          ownership: { kind: "conversation" },
          conversationId,
        },
      );
    },
  };
}
