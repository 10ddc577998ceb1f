/** Files of the Synapse repository the tests read where they are (never copies). */

import { readFileSync } from "node:fs";

// dist/test/repo.js → the repository root.
const ROOT = new URL("../../../../", import.meta.url);

export function repoFile(path: string): string {
  return readFileSync(new URL(path, ROOT), "utf8");
}
