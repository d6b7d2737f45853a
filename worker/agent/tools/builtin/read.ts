import { Type } from "typebox";
import { envFs } from "../../env.ts";
import { FsError } from "../../workspace/fs.ts";
import { capHead, defineTool, errorResult, textResult } from "../contract.ts";

const parameters = Type.Object({
  path: Type.String({ description: "File path relative to the workspace root" }),
  offset: Type.Optional(Type.Integer({ minimum: 1, description: "First line to read, 1-based (default 1)" })),
  limit: Type.Optional(Type.Integer({ minimum: 1, description: "Maximum number of lines to read" })),
});

/**
 * `read`: a workspace file's text, optionally a window of lines. Output is capped at 2,000 lines and
 * 50 KiB; a note tells the model which `offset` continues.
 */
export function createReadTool() {
  return defineTool({
    name: "read",
    label: "Read file",
    description:
      "Read a text file from the workspace. Output is capped at 2000 lines or 50 KiB; use offset/limit to page through larger files.",
    parameters,
    replay: "safe",
    readOnly: true,
    async execute(args, api) {
      const fs = envFs(api.env);
      let text: string;
      try {
        text = await fs.read(args.path);
      } catch (error) {
        if (error instanceof FsError) {
          if (error.code === "not_found") return errorResult(`File not found: ${error.path}`);
          if (error.code === "is_dir") return errorResult(`${error.path} is a directory; use ls to list it`);
          return errorResult(error.message);
        }
        throw error;
      }
      const lines = text.split("\n");
      if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
      const totalLines = text === "" ? 0 : lines.length;
      if (totalLines === 0) return textResult("(empty file)", { path: args.path, totalLines: 0 });

      const offset = args.offset ?? 1;
      if (offset > totalLines) {
        return errorResult(`Offset ${offset} is beyond the end of ${args.path} (${totalLines} lines)`);
      }
      const end = args.limit === undefined ? totalLines : Math.min(totalLines, offset - 1 + args.limit);
      const cap = capHead(lines.slice(offset - 1, end).join("\n"));
      const lastShown = offset - 1 + cap.shownLines;
      let out = cap.head;
      if (cap.truncated) {
        const next = lastShown + 1;
        out +=
          cap.shownLines === 0
            ? `\n\n[line ${offset} is longer than 50 KiB; only its start is shown]`
            : `\n\n[output truncated at 2000 lines / 50 KiB: showing lines ${offset}-${lastShown} of ${totalLines}; use offset=${next} to continue]`;
      } else if (end < totalLines) {
        out += `\n\n[showing lines ${offset}-${end} of ${totalLines}; use offset=${end + 1} to continue]`;
      }
      return textResult(out, {
        path: args.path,
        totalLines,
        from: offset,
        to: cap.truncated ? lastShown : end,
        truncated: cap.truncated,
      });
    },
  });
}
