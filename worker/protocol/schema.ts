/**
 * The schemas of everything a tab may send, checked at the engine's door (door.ts) before anything
 * runs: the two message shapes (a call, an acknowledgement) and, for each method of `EngineApi`, the
 * tuple of its arguments as they travel (a watch's listener stays in the tab). Engine-only: the tab
 * never imports this module (TypeBox stays out of its bundle; import-direction.test.ts checks it).
 * Invariants:
 * - `METHODS` has exactly one entry per method of `EngineApi` (the compiler checks both ways through
 *   `MethodName`), and each tuple matches the method's parameters (door.ts calls the method with the
 *   checked tuple's static type);
 * - the checks are of types and shapes only: a value's meaning (a title's length, a known
 *   conversation) stays the engine's to judge, with its own typed errors;
 * - objects refuse properties they do not name (a misspelt option is an error, not silence), except
 *   the hello, so a tab of another version still learns which protocol this engine speaks.
 */

import { type Static, type TSchema, Type } from "typebox";
import type { MethodName, MovesApi } from "./api.ts";
import { ATTACHMENT_IMAGE_TYPES, ATTACHMENT_LIMITS, MAX_IMAGE_BASE64 } from "./attachments.ts";

const Id = Type.Integer();
const Text = Type.String();
const strict = { additionalProperties: false } as const;

const ThinkingLevel = Type.Union([
  Type.Literal("off"),
  Type.Literal("minimal"),
  Type.Literal("low"),
  Type.Literal("medium"),
  Type.Literal("high"),
  Type.Literal("xhigh"),
]);
const DemoSpeed = Type.Union([
  Type.Literal("slow"),
  Type.Literal("normal"),
  Type.Literal("fast"),
  Type.Literal("instant"),
]);

const ToolName = Type.String({ minLength: 1, maxLength: 64, pattern: "^[a-zA-Z0-9_-]+$" });
const Policy = Type.Union([Type.Literal("allow"), Type.Literal("ask"), Type.Literal("never"), Type.Null()]);

/** A schedule's shape (its cron, time zone and time are judged by the engine: app/schedules.ts). */
const ScheduleDraftSchema = Type.Object(
  {
    text: Type.String({ minLength: 1, maxLength: 10_000 }),
    when: Type.Union([
      Type.Object(
        { kind: Type.Literal("cron"), cron: Type.String({ minLength: 1, maxLength: 200 }) },
        strict,
      ),
      Type.Object({ kind: Type.Literal("once"), at: Type.Integer({ minimum: 0 }) }, strict),
    ]),
    timeZone: Type.String({ minLength: 1, maxLength: 100 }),
    catchUp: Type.Union([Type.Literal("run"), Type.Literal("skip")]),
  },
  strict,
);
const ScheduleId = Type.String({ minLength: 1, maxLength: 100, pattern: "^[A-Za-z0-9-]+$" });

/**
 * A file attached to an input (attachments.ts): kind, name, type, size and count bounded here, so an
 * oversized or unknown one is refused at the door before the engine reads it; the engine checks the
 * rest (base64, the bytes' real type, the total, the model) in worker/app/attachments.ts.
 */
const AttachmentName = Type.String({ minLength: 1, maxLength: ATTACHMENT_LIMITS.nameChars });
const AttachmentText = Type.String({ maxLength: ATTACHMENT_LIMITS.textChars });
const AttachmentSchema = Type.Union([
  Type.Object(
    {
      kind: Type.Literal("image"),
      name: AttachmentName,
      mimeType: Type.Union(ATTACHMENT_IMAGE_TYPES.map((t) => Type.Literal(t))),
      size: Type.Integer({ minimum: 1, maximum: ATTACHMENT_LIMITS.imageBytes }),
      data: Type.String({ minLength: 4, maxLength: MAX_IMAGE_BASE64 }),
    },
    strict,
  ),
  Type.Object(
    {
      kind: Type.Literal("text"),
      name: AttachmentName,
      mimeType: Type.String({ maxLength: 100 }),
      size: Type.Integer({ minimum: 0, maximum: ATTACHMENT_LIMITS.fileBytes }),
      text: AttachmentText,
    },
    strict,
  ),
  Type.Object(
    {
      kind: Type.Literal("pdf"),
      name: AttachmentName,
      size: Type.Integer({ minimum: 1, maximum: ATTACHMENT_LIMITS.fileBytes }),
      pages: Type.Integer({ minimum: 1, maximum: ATTACHMENT_LIMITS.pages }),
      text: AttachmentText,
    },
    strict,
  ),
]);

/** A timeline's range (api.ts `TimelineRange`): epoch ms, and a page's limit. */
const TimelineRangeSchema = Type.Object(
  {
    from: Type.Optional(Type.Number({ minimum: 0 })),
    to: Type.Optional(Type.Number({ minimum: 0 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  },
  strict,
);

/** A move's transfer id (worker/core/move.ts checks it again). */
const Transfer = Type.String({ minLength: 1, maxLength: 200, pattern: "^[A-Za-z0-9_.:-]+$" });
const Records = Type.Array(Type.Object({ id: Id }), { maxItems: 200_000 });
/**
 * A move's package (worker/core/move.ts `MovePackage`): its shape and size bounded here; `adopt`
 * checks it whole (ids, references, every record) before anything is written.
 */
const MovePackageSchema = Type.Object(
  {
    format: Type.Literal("durable-agent/move"),
    version: Type.Integer({ minimum: 1 }),
    transfer: Transfer,
    preparedAt: Type.Number(),
    conversation: Type.Object({ id: Id, createdAt: Type.Number() }, strict),
    entries: Records,
    documents: Type.Array(
      Type.Object({ name: Type.String({ maxLength: 200 }), value: Type.Unknown(), version: Id }, strict),
      { maxItems: 10_000 },
    ),
    submissions: Records,
    tasks: Records,
  },
  strict,
);

/** The arguments of the `moves` group (api.ts `MovesApi`), served by a server space. */
export const MOVES_METHODS = {
  "moves.prepare": Type.Tuple([Transfer, Id]),
  "moves.adopt": Type.Tuple([MovePackageSchema]),
  "moves.stage": Type.Tuple([
    Transfer,
    Type.Integer({ minimum: 0 }),
    Type.Integer({ minimum: 1, maximum: 100_000 }),
    Type.String({ maxLength: 1_000_000 }),
  ]),
  "moves.adoptStaged": Type.Tuple([Transfer]),
  "moves.finish": Type.Tuple([Transfer, Id]),
  "moves.refuse": Type.Tuple([Transfer]),
  "moves.cancel": Type.Tuple([Transfer]),
} satisfies Record<`moves.${keyof MovesApi & string}`, TSchema>;

/** A call: `{ id, method, args }`. */
export const CallSchema = Type.Object(
  {
    id: Type.Integer({ minimum: 0 }),
    method: Type.String({ maxLength: 100 }),
    args: Type.Array(Type.Unknown()),
  },
  strict,
);
/** An acknowledgement of a watch's frame: `{ ack, seq, failed? }`. */
export const AckSchema = Type.Object(
  {
    ack: Type.Integer({ minimum: 0 }),
    seq: Type.Integer({ minimum: 1 }),
    failed: Type.Optional(Type.Literal(true)),
  },
  strict,
);

/** Each method's arguments, by wire name. */
export const METHODS = {
  hello: Type.Tuple([
    Type.Object({ tabId: Type.String({ minLength: 1, maxLength: 200 }), protocol: Type.Number() }),
  ]),

  "conversations.list": Type.Tuple([]),
  "conversations.watch": Type.Tuple([]),
  "conversations.create": Type.Union([Type.Tuple([]), Type.Tuple([Text])]),
  "conversations.fork": Type.Tuple([Id, Id]),
  "conversations.delete": Type.Tuple([Id]),
  "conversations.rename": Type.Tuple([Id, Text]),
  "conversations.search": Type.Tuple([Text]),
  "conversations.watchPage": Type.Tuple([
    Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 500 }) }, strict),
  ]),
  "conversations.searchPage": Type.Tuple([
    Text,
    Type.Object(
      {
        limit: Type.Integer({ minimum: 1, maximum: 200 }),
        before: Type.Optional(Type.Integer({ minimum: 1 })),
        titlesBefore: Type.Optional(Type.Integer({ minimum: 1 })),
      },
      strict,
    ),
  ]),
  "conversations.export": Type.Tuple([Id]),
  "conversations.import": Type.Tuple([Text]),

  "run.submit": Type.Tuple([
    Id,
    Type.Object(
      {
        text: Text,
        mode: Type.Optional(Type.Union([Type.Literal("followUp"), Type.Literal("steer")])),
        requestId: Type.Optional(Type.String({ maxLength: 200 })),
        attachments: Type.Optional(Type.Array(AttachmentSchema, { maxItems: ATTACHMENT_LIMITS.files })),
      },
      strict,
    ),
  ]),
  "run.resendAsFork": Type.Union([
    Type.Tuple([Id, Id, Text]),
    Type.Tuple([
      Id,
      Id,
      Text,
      Type.Array(Type.Integer({ minimum: 0, maximum: ATTACHMENT_LIMITS.files - 1 }), {
        maxItems: ATTACHMENT_LIMITS.files,
      }),
    ]),
  ]),
  "run.abort": Type.Tuple([Id]),
  "run.withdraw": Type.Tuple([Id, Id]),
  "run.reset": Type.Tuple([Id]),
  "run.compact": Type.Tuple([Id]),

  "settings.agent": Type.Tuple([Id]),
  "settings.configure": Type.Tuple([
    Id,
    Type.Object(
      {
        thinkingLevel: Type.Optional(Type.Union([ThinkingLevel, Type.Null()])),
        instructions: Type.Optional(Type.Union([Text, Type.Null()])),
      },
      strict,
    ),
  ]),
  "settings.setModel": Type.Tuple([Id, Type.Object({ provider: Text, modelId: Text }, strict)]),
  "settings.models": Type.Tuple([]),
  "settings.extensions": Type.Tuple([Id]),
  "settings.setExtensionEnabled": Type.Tuple([Id, Text, Type.Boolean()]),
  "settings.demoSpeed": Type.Tuple([]),
  "settings.setDemoSpeed": Type.Tuple([DemoSpeed]),

  "keys.set": Type.Tuple([Text, Type.Union([Text, Type.Null()])]),
  "keys.has": Type.Tuple([Text]),
  "keys.list": Type.Tuple([]),
  "keys.test": Type.Tuple([Text]),

  "workspace.files": Type.Tuple([]),
  "workspace.read": Type.Tuple([Text]),
  "workspace.delete": Type.Tuple([Text]),

  "userTools.list": Type.Tuple([]),
  "userTools.save": Type.Tuple([
    Type.Object({ name: Text, description: Text, parameters: Text, body: Text }, strict),
  ]),
  "userTools.remove": Type.Tuple([Text]),
  "userTools.enableEverywhere": Type.Tuple([Text]),

  "watches.conversation": Type.Tuple([Id]),
  "watches.events": Type.Tuple([Id]),
  "watches.taskGraph": Type.Tuple([]),
  "watches.unwatch": Type.Tuple([Id]),
  "watches.entries": Type.Tuple([Id]),
  "watches.entriesBefore": Type.Tuple([Id, Id, Id]),

  "tasks.graph": Type.Tuple([]),
  "tasks.inspect": Type.Tuple([]),
  "tasks.abort": Type.Tuple([Id]),

  "usage.total": Type.Tuple([]),
  "usage.conversation": Type.Tuple([Id]),
  "usage.days": Type.Tuple([
    Type.Object(
      {
        // The zone's name is judged by the engine (worker/agent/usage-days.ts), the days' shape here.
        timeZone: Type.String({ minLength: 1, maxLength: 100 }),
        from: Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$", maxLength: 10 }),
        to: Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$", maxLength: 10 }),
      },
      strict,
    ),
  ]),

  "traces.export": Type.Tuple([Id]),

  "approvals.decide": Type.Tuple([
    Id,
    Type.Object(
      {
        taskId: Id,
        decision: Type.Union([Type.Literal("approve"), Type.Literal("deny")]),
        reason: Type.Optional(Type.String({ maxLength: 10_000 })),
        always: Type.Optional(Type.Boolean()),
        requestId: Type.String({ minLength: 1, maxLength: 200 }),
      },
      strict,
    ),
  ]),
  "approvals.policies": Type.Union([Type.Tuple([]), Type.Tuple([Id])]),
  "approvals.setPolicy": Type.Union([Type.Tuple([ToolName, Policy]), Type.Tuple([ToolName, Policy, Id])]),

  "schedules.preview": Type.Tuple([ScheduleDraftSchema]),
  "schedules.create": Type.Tuple([Id, ScheduleDraftSchema]),
  "schedules.update": Type.Tuple([Id, ScheduleId, ScheduleDraftSchema]),
  "schedules.setPaused": Type.Tuple([Id, ScheduleId, Type.Boolean()]),
  "schedules.delete": Type.Tuple([Id, ScheduleId]),

  "timeline.page": Type.Tuple([Id, TimelineRangeSchema]),
  "timeline.watch": Type.Tuple([Id, TimelineRangeSchema]),
  "timeline.detail": Type.Tuple([Id, Id]),
  "timeline.rerunTool": Type.Tuple([
    Id,
    Type.Object(
      {
        entryId: Id,
        callId: Type.String({ minLength: 1, maxLength: 200 }),
        requestId: Type.String({ minLength: 1, maxLength: 200 }),
      },
      strict,
    ),
  ]),

  "remote.get": Type.Tuple([]),
  "remote.credentials": Type.Tuple([]),
  "remote.set": Type.Tuple([
    Type.Union([Type.String({ maxLength: 4000 }), Type.Null()]),
    Type.Union([Type.String({ maxLength: 4000 }), Type.Null()]),
  ]),

  "mcp.list": Type.Tuple([]),
  "mcp.add": Type.Tuple([
    Type.Object(
      {
        name: Type.String({ maxLength: 100 }),
        url: Type.String({ maxLength: 4000 }),
        token: Type.Union([Type.String({ maxLength: 8000 }), Type.Null()]),
      },
      strict,
    ),
  ]),
  "mcp.update": Type.Tuple([
    Type.String({ maxLength: 100 }),
    Type.Object(
      {
        name: Type.Optional(Type.String({ maxLength: 100 })),
        url: Type.Optional(Type.String({ maxLength: 4000 })),
        token: Type.Optional(Type.Union([Type.String({ maxLength: 8000 }), Type.Null()])),
      },
      strict,
    ),
  ]),
  "mcp.refresh": Type.Tuple([Type.String({ maxLength: 100 })]),
  "mcp.remove": Type.Tuple([Type.String({ maxLength: 100 })]),

  "homes.toServer": Type.Tuple([Id]),
  "homes.bringBack": Type.Tuple([Id]),
  "homes.list": Type.Tuple([]),

  "store.startFresh": Type.Tuple([]),

  ...MOVES_METHODS,

  "debug.startTicker": Type.Tuple([
    Type.Object({ phases: Type.Number(), delayMs: Type.Number(), conversationId: Type.Optional(Id) }, strict),
  ]),
  "debug.ticker": Type.Tuple([Id]),
  "debug.stats": Type.Tuple([]),
  "debug.recordPartials": Type.Tuple([]),
  "debug.partials": Type.Tuple([]),
  "debug.bench": Type.Tuple([Type.Object({ seconds: Type.Number() }, strict)]),
  "debug.seed": Type.Tuple([
    Type.Object(
      {
        tasks: Type.Number(),
        conversations: Type.Optional(Type.Number()),
        batch: Type.Optional(Type.Number()),
      },
      strict,
    ),
  ]),
  "debug.seedChat": Type.Tuple([Type.Object({ entries: Type.Number() }, strict)]),
  "debug.seedGrowth": Type.Tuple([
    Type.Object(
      {
        conversations: Type.Number(),
        entries: Type.Number(),
        tasks: Type.Number(),
        chatEntries: Type.Number(),
      },
      strict,
    ),
  ]),
  "debug.memory": Type.Tuple([]),
  "debug.commitLatency": Type.Tuple([Type.Object({ conversationId: Id, commits: Type.Number() }, strict)]),
  "debug.runScript": Type.Tuple([
    Type.Object(
      {
        code: Text,
        sliceMs: Type.Optional(Type.Number()),
        cpuMs: Type.Optional(Type.Number()),
        inThread: Type.Optional(Type.Boolean()),
      },
      strict,
    ),
  ]),
  "debug.scriptWorkers": Type.Tuple([]),
} satisfies Record<MethodName, TSchema>;

/** Every `MethodName` has a schema (the `satisfies` above checks the other way). */
type Missing = Exclude<MethodName, keyof typeof METHODS>;
const complete: [Missing] extends [never] ? true : Missing = true;
void complete;

export type Methods = typeof METHODS;
/** A method's checked arguments, as the door hands them to the engine. */
export type ArgsOf<M extends MethodName> = Static<Methods[M]>;

/** Whether `name` is a method this protocol knows (an own key: never `__proto__` or `toString`). */
export function isMethodName(name: string): name is MethodName {
  return Object.hasOwn(METHODS, name);
}
