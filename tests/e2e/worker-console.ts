/**
 * The consoles Playwright cannot hear: the engine's SharedWorker and the app's service worker, read
 * over CDP. Every such target (present or appearing later) is attached (flatten) with its Runtime
 * enabled, which also replays what it logged before. `probe` logs a line inside one kind of target,
 * so a test can show that the listening works before it asserts that something is absent.
 */
import { Cdp, type LaunchedBrowser } from "./browser.ts";

/** The worker kinds listened to (CDP target types). */
export type WorkerKind = "shared_worker" | "service_worker";
const KINDS: ReadonlySet<string> = new Set<WorkerKind>(["shared_worker", "service_worker"]);

interface TargetInfo {
  readonly targetId: string;
  readonly type: string;
  readonly url: string;
}

interface RemoteObject {
  readonly value?: unknown;
  readonly description?: string;
}

export interface WorkerConsoles {
  /** Every line heard so far, as `[kind] text`. */
  lines(): string[];
  /** The kinds attached so far. */
  kinds(): WorkerKind[];
  /** Log `text` inside every attached target of `kind`. */
  probe(kind: WorkerKind, text: string): Promise<void>;
  close(): void;
}

const textOf = (args: readonly RemoteObject[] = []) =>
  args
    .map((a) =>
      typeof a.value === "string"
        ? a.value
        : a.value !== undefined
          ? JSON.stringify(a.value)
          : (a.description ?? ""),
    )
    .join(" ");

/** Listen to every SharedWorker and service worker of `b` from now on (and what they logged before). */
export async function listenToWorkers(b: LaunchedBrowser): Promise<WorkerConsoles> {
  const cdp = await Cdp.connect(b.wsEndpoint);
  const sessions = new Map<string, WorkerKind>();
  const attaching = new Set<string>();
  const heard: string[] = [];
  const attach = async (target: TargetInfo) => {
    if (!KINDS.has(target.type) || attaching.has(target.targetId)) return;
    attaching.add(target.targetId);
    try {
      const { sessionId } = await cdp.send<{ sessionId: string }>("Target.attachToTarget", {
        targetId: target.targetId,
        flatten: true,
      });
      sessions.set(sessionId, target.type as WorkerKind);
      await cdp.send("Runtime.enable", {}, sessionId);
    } catch {
      // The target went away before it could be attached: nothing of it to hear.
    }
  };
  cdp.onEvent((method, params, sessionId) => {
    const kind = sessionId === undefined ? undefined : sessions.get(sessionId);
    if (method === "Target.targetCreated" || method === "Target.targetInfoChanged") {
      void attach((params as { targetInfo: TargetInfo }).targetInfo);
    } else if (kind && method === "Runtime.consoleAPICalled") {
      heard.push(`[${kind}] ${textOf((params as { args?: RemoteObject[] }).args)}`);
    } else if (kind && method === "Runtime.exceptionThrown") {
      const details = (params as { exceptionDetails: { text: string; exception?: RemoteObject } })
        .exceptionDetails;
      heard.push(`[${kind} exception] ${details.text} ${details.exception?.description ?? ""}`);
    }
  });
  await cdp.send("Target.setDiscoverTargets", { discover: true });
  const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>("Target.getTargets");
  await Promise.all(targetInfos.map(attach));
  return {
    lines: () => [...heard],
    kinds: () => [...new Set(sessions.values())],
    async probe(kind, text) {
      for (const [sessionId, k] of sessions)
        if (k === kind)
          await cdp
            .send("Runtime.evaluate", { expression: `console.log(${JSON.stringify(text)})` }, sessionId)
            .catch(() => undefined);
    },
    close: () => cdp.close(),
  };
}
