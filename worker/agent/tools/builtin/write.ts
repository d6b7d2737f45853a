import { Type } from "typebox";
import { envFs } from "../../env.ts";
import { FsError, normalizePath, pathQueueFor, utf8Length } from "../../workspace/fs.ts";
import { defineTool, errorResult, textResult } from "../contract.ts";

const parameters = Type.Object({
  path: Type.String({ description: "File path relative to the workspace root" }),
  content: Type.String({ description: "The complete new content of the file" }),
});

/**
 * `write`: replace a file's whole content, creating missing parent directories. Writing the same
 * content again gives the same file, so recovery may repeat it (`replay: "safe"`).
 */
export function createWriteTool() {
  return defineTool({
    name: "write",
    label: "Write file",
    description:
      "Write a file in the workspace, replacing its content. Parent directories are created as needed.",
    parameters,
    replay: "safe",
    async execute(args, api) {
      const fs = envFs(api.env);
      try {
        const path = normalizePath(args.path);
        await pathQueueFor(fs)(path, async () => {
          api.signal.throwIfAborted();
          await fs.write(path, args.content);
        });
        const bytes = utf8Length(args.content);
        return textResult(`Wrote ${bytes} bytes to ${path}`, { path, bytes });
      } catch (error) {
        if (error instanceof FsError) {
          if (error.code === "is_dir") return errorResult(`Cannot write ${error.path}: it is a directory`);
          if (error.code === "not_dir") return errorResult(`Cannot write ${error.path}: ${error.message}`);
          return errorResult(error.message);
        }
        throw error;
      }
    },
  });
}
