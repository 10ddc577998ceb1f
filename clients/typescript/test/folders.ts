// Temporary folders for the tests, removed when the test file ends.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";

const made: string[] = [];

after(() => {
  for (const folder of made) rmSync(folder, { recursive: true, force: true });
});

/** A fresh folder under the system's temporary folder, removed after the file's tests. */
export function tempFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), "synapse-ts-"));
  made.push(folder);
  return folder;
}
