/**
 * A TCP relay in front of a test's workerd: a fixed local port whose every connection goes to
 * wherever workerd listens now, so an address a client keeps (a tab's server URL) stays valid across
 * `restart()` (SIGKILL of workerd, then a new one on another port). `close()` cuts every connection.
 */
import { createServer, type Server, Socket } from "node:net";

export interface Relay {
  /** The relay's port on 127.0.0.1. */
  readonly port: number;
  close(): Promise<void>;
}

/** A relay to the address `target()` names at each new connection. */
export async function startRelay(target: () => URL): Promise<Relay> {
  const pipes = new Set<Socket>();
  const relay: Server = createServer((inbound) => {
    const to = target();
    const outbound = new Socket();
    outbound.connect(Number(to.port), to.hostname);
    for (const s of [inbound, outbound]) {
      pipes.add(s);
      s.on("close", () => pipes.delete(s));
      s.on("error", () => undefined);
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    inbound.on("close", () => outbound.destroy());
    outbound.on("close", () => inbound.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", () => resolve()));
  return {
    port: (relay.address() as { port: number }).port,
    async close() {
      for (const s of pipes) s.destroy();
      await new Promise((resolve) => relay.close(resolve));
    },
  };
}
