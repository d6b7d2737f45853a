/**
 * `watchEvents(harness, conversationId)` (spec §9.4): one conversation's agent events, one batch per
 * commit, on the conversation's shared view mount. Attaching captures the `snapshot` and registers
 * for later publications at one instant (the mount's observer attachment), so the first batch applies
 * to exactly that snapshot. Batches are delivered one at a time, each after the listener's previous
 * promise settled, through the core's bounded `Watch`: at most 100 wait, and one more replaces them
 * all with a single `snapshot` of the newest committed state. A commit that changes nothing the
 * events show delivers nothing. Closing the harness ends the stream (`closed`); a consumer of a
 * reopened store attaches again and starts from its snapshot.
 */

import { UnknownConversation } from "../../core/errors.ts";
import type { Harness } from "../../core/harness.ts";
import { type Frame, WATCH_FRAME_LIMIT, Watch, type WatchEnd } from "../../core/observe.ts";
import type { ConversationId } from "../../core/types.ts";
import type { ConversationView } from "../../core/view-ops.ts";
import { type AgentState, DOC } from "../records.ts";
import { EventDeriver, snapshotOf } from "./derive.ts";
import type { AgentEvent, SnapshotEvent } from "./types.ts";

/** A frame's value: the view after its commit and its agent (for an overflow's snapshot), and its events. */
interface Batch {
  readonly view: ConversationView;
  readonly agent: AgentState;
  readonly events: readonly AgentEvent[];
}

export interface WatchEventsOptions {
  /** Undelivered batches kept before they collapse into one snapshot (default 100). */
  readonly limit?: number;
}

export class AgentEventStream {
  readonly #watch: Watch<Batch>;
  /** The `snapshot` event at attachment. */
  readonly snapshot: SnapshotEvent;

  /** @internal Built by `watchEvents`. */
  constructor(watch: Watch<Batch>) {
    this.#watch = watch;
    this.snapshot = snapshotOf(watch.value.view, watch.value.agent);
  }

  /**
   * Install the sole listener; delivery starts on a later tick. Each call gets one commit's events in
   * order (or, after an overflow, a single `snapshot`); the next waits for its promise.
   */
  start(listener: (events: readonly AgentEvent[]) => unknown): void {
    this.#watch.start((frame: Frame<Batch>) => {
      if (frame.ops[0]?.op === "replace") return listener([snapshotOf(frame.value.view, frame.value.agent)]);
      return frame.value.events.length > 0 ? listener(frame.value.events) : undefined;
    });
  }

  /** Idempotent: discards what is pending, no callback follows. */
  stop(): Promise<WatchEnd> {
    return this.#watch.stop();
  }

  get closed(): Promise<WatchEnd> {
    return this.#watch.closed;
  }

  /** Batches waiting for delivery. */
  get pending(): number {
    return this.#watch.pending;
  }

  /** Batches an overflow replaced since the stream began. */
  get collapsed(): number {
    return this.#watch.collapsed;
  }
}

export async function watchEvents(
  harness: Harness,
  conversationId: ConversationId,
  options: WatchEventsOptions = {},
): Promise<AgentEventStream> {
  if (!(await harness.loadConversation(conversationId))) throw new UnknownConversation(conversationId);
  const limit = options.limit ?? WATCH_FRAME_LIMIT;
  let watch: Watch<Batch> | undefined;
  let deriver: EventDeriver | undefined;
  let detach: () => void = () => undefined;
  const attachment = await harness.mount(conversationId).attach(
    {
      change(change, before, after) {
        if (!watch || !deriver) return;
        const events = deriver.derive(change, before, after);
        // A commit that moved the view but says nothing still advances what an overflow shows.
        if (events.length > 0 || before !== after)
          watch.push({
            seq: change.seq,
            value: { view: after, agent: deriver.agent(after), events },
            ops: [],
          });
      },
      end(reason) {
        watch?.end(reason);
      },
    },
    (view) => {
      // At the attachment instant: the task graph and the view describe the same commit.
      const agentVersion = harness.docVersionedNow(conversationId, DOC.agent).version;
      deriver = new EventDeriver(conversationId, Object.values(harness.taskGraph().tasks), agentVersion);
      watch = new Watch<Batch>({ view, agent: deriver.agent(view), events: [] }, limit, () => detach());
    },
  );
  detach = attachment.detach;
  return new AgentEventStream(watch!);
}
