/** A local HTTP server answering from a script, recording what it received. */

import { type IncomingHttpHeaders, createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  body?: unknown;
  text?: string;
  headers?: Record<string, string>;
}

export async function withServer(answers: Answer[], run: (url: string, received: Received[]) => Promise<void>) {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ method: request.method!, url: request.url!, headers: request.headers,
                      body: Buffer.concat(chunks).toString("utf8") });
      const answer = answers[Math.min(received.length - 1, answers.length - 1)]!;
      const text = answer.text ?? JSON.stringify(answer.body ?? {});
      response.writeHead(answer.status, { "Content-Type": answer.text === undefined ? "application/json" : "text/html",
                                          ...answer.headers });
      response.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await run(`http://127.0.0.1:${port}`, received);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

export function errorBody(status: number, code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { status, code, message, ...extra } };
}
