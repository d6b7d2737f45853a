import { Type } from "typebox";
import { envFs } from "../../env.ts";
import { FsError } from "../../workspace/fs.ts";
import { capOutput, defineTool, errorResult, textResult } from "../contract.ts";

const parameters = Type.Object({
  path: Type.Optional(Type.String({ description: 'Directory relative to the workspace root (default ".")' })),
});

/** `ls`: the entries of a workspace directory, directories marked with a trailing `/`. */
export function createLsTool() {
  return defineTool({
    name: "ls",
    label: "List files",
    description:
      "List the entries of a directory in the workspace. Directories end with '/'; files show their size in bytes.",
    parameters,
    replay: "safe",
    readOnly: true,
    async execute(args, api) {
      const fs = envFs(api.env);
      const path = args.path ?? ".";
      try {
        const entries = await fs.list(path);
        if (entries.length === 0) return textResult("(empty directory)", { path, entries: [] });
        const lines = entries.map((e) => (e.kind === "dir" ? `${e.name}/` : `${e.name} (${e.size} bytes)`));
        const { text } = capOutput(lines.join("\n"));
        return textResult(text, {
          path,
          entries: entries.map((e) => ({ name: e.name, kind: e.kind, size: e.size })),
        });
      } catch (error) {
        if (error instanceof FsError) {
          if (error.code === "not_found") return errorResult(`Directory not found: ${error.path}`);
          if (error.code === "not_dir") return errorResult(`Not a directory: ${error.path}`);
          return errorResult(error.message);
        }
        throw error;
      }
    },
  });
}
