/** The machine's load averages and cores, printed beside every timing the simulator reports. */
import { availableParallelism, loadavg } from "node:os";

export function os(): string {
  return `load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")} on ${availableParallelism()} cores`;
}
