/**
 * The settings' "Server" section state: the address and token being typed, the saved setting (the
 * address, whether a token is saved: never the token), the last connection test in words, and save,
 * test and disconnect through the tab's server client (server.svelte.ts). The token draft is cleared
 * once saved; nothing here keeps or shows a saved token.
 */
import { errorMessage } from "../../worker/protocol/index.ts";
import { checkWords, type ServerClient } from "./server.svelte.ts";

export type TestResult = { readonly tone: "ok" | "bad" | "busy"; readonly words: string };

export class ServerSettingsState {
  url = $state("");
  token = $state("");
  /** The last test of the connection, in words. */
  result = $state.raw<TestResult | undefined>(undefined);
  note = $state("");
  error = $state("");
  busy = $state(false);

  constructor(readonly server: ServerClient) {
    this.url = server.settings.url ?? "";
  }

  get saved() {
    return this.server.settings;
  }

  async save(): Promise<void> {
    const token = this.token.trim();
    if (!this.url.trim()) {
      this.error = "Enter the server's address first.";
      return;
    }
    if (!token && !this.saved.hasToken) {
      this.error = "Paste the space's token first.";
      return;
    }
    this.result = undefined;
    await this.#run(async () => {
      await this.server.save(this.url, token || null);
      this.token = "";
      this.url = this.server.settings.url ?? this.url;
      this.note = `Saved. This browser now attaches to the space “${this.server.space ?? "?"}”.`;
    });
  }

  async test(): Promise<void> {
    this.note = "";
    this.result = { tone: "busy", words: "Testing the connection…" };
    try {
      const { check, space } = await this.server.test(this.url || undefined, this.token || undefined);
      this.result = { tone: check.ok ? "ok" : "bad", words: checkWords(check, space) };
    } catch (e) {
      this.result = { tone: "bad", words: `${errorMessage(e)}.` };
    }
  }

  async disconnect(): Promise<void> {
    await this.#run(async () => {
      await this.server.disconnect();
      this.url = "";
      this.token = "";
      this.result = undefined;
      this.note = "Disconnected: this browser attaches to no server now.";
    });
  }

  async #run(work: () => Promise<void>): Promise<void> {
    this.error = "";
    this.note = "";
    this.busy = true;
    try {
      await work();
    } catch (e) {
      this.error = errorMessage(e);
    } finally {
      this.busy = false;
    }
  }
}
