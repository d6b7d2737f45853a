/**
 * The MCP server edit form's change (src/lib/mcp-edit.ts): only what differs is sent; the token field
 * starts empty (the saved one is never shown back) and empty keeps it; "remove the saved token"
 * sends null, and only when one is saved.
 */
import { expect, test } from "vitest";
import { editFormOf, mcpChange } from "../../../src/lib/mcp-edit.ts";

const server = { name: "docs", url: "https://example.com/mcp", hasToken: true };

test("the form starts with the name and address, never a token", () => {
  expect(editFormOf(server)).toEqual({
    name: "docs",
    url: "https://example.com/mcp",
    token: "",
    dropToken: false,
  });
});

test("only what differs is sent; an empty token field keeps the saved one", () => {
  expect(mcpChange(server, editFormOf(server))).toEqual({});
  expect(mcpChange(server, { ...editFormOf(server), name: " notes " })).toEqual({ name: "notes" });
  expect(mcpChange(server, { ...editFormOf(server), url: "https://other.example/mcp" })).toEqual({
    url: "https://other.example/mcp",
  });
  expect(mcpChange(server, { ...editFormOf(server), token: " new-token " })).toEqual({ token: "new-token" });
});

test("removing the saved token sends null; a new token wins over removing", () => {
  expect(mcpChange(server, { ...editFormOf(server), dropToken: true })).toEqual({ token: null });
  expect(mcpChange(server, { ...editFormOf(server), dropToken: true, token: "t2" })).toEqual({ token: "t2" });
  expect(mcpChange({ ...server, hasToken: false }, { ...editFormOf(server), dropToken: true })).toEqual({});
});
