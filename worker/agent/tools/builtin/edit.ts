import { Type } from "typebox";
import { envFs } from "../../env.ts";
import { FsError, normalizePath, pathQueueFor } from "../../workspace/fs.ts";
import { defineTool, errorResult, textResult } from "../contract.ts";

const parameters = Type.Object({
  path: Type.String({ description: "File path relative to the workspace root" }),
  oldText: Type.String({ description: "Exact text to replace; must occur exactly once in the file" }),
  newText: Type.String({ description: "The replacement text" }),
});

function occurrences(haystack: string, needle: string): number[] {
  const at: number[] = [];
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + needle.length))
    at.push(i);
  return at;
}

/**
 * `edit`: replace one exact, unique occurrence of `oldText` with `newText`. Applying it twice is
 * not the same as once, so recovery does not repeat it (`replay: "unsafe"`).
 */
export function createEditTool() {
  return defineTool({
    name: "edit",
    label: "Edit file",
    description:
      "Edit a workspace file by replacing an exact snippet. oldText must match the file exactly (whitespace included) and occur exactly once.",
    parameters,
    replay: "unsafe",
    async execute(args, api) {
      const fs = envFs(api.env);
      if (args.oldText === "") return errorResult("oldText must not be empty");
      try {
        const path = normalizePath(args.path);
        return await pathQueueFor(fs)(path, async () => {
          const before = await fs.read(path);
          const found = occurrences(before, args.oldText);
          if (found.length === 0) {
            return errorResult(`oldText was not found in ${path}; read the file and copy the text exactly`);
          }
          if (found.length > 1) {
            return errorResult(
              `oldText occurs ${found.length} times in ${path}; include more surrounding text so it is unique`,
            );
          }
          const index = found[0]!;
          api.signal.throwIfAborted();
          await fs.write(
            path,
            before.slice(0, index) + args.newText + before.slice(index + args.oldText.length),
          );
          const line = before.slice(0, index).split("\n").length;
          return textResult(`Edited ${path} at line ${line}`, { path, line });
        });
      } catch (error) {
        if (error instanceof FsError) {
          if (error.code === "not_found") return errorResult(`File not found: ${error.path}`);
          if (error.code === "is_dir") return errorResult(`${error.path} is a directory`);
          return errorResult(error.message);
        }
        throw error;
      }
    },
  });
}
