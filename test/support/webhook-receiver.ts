import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { poll } from './cli.js';

/** One request the receiver got: its headers, its body, and when (by the receiver's clock). */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** How the receiver answers one request: a status (and body), or it does something worse. */
export type Answer =
  | { status: number; body?: string; headers?: Record<string, string> }
  | { hang: true } // never answers (until closed)
  | { reset: true }; // destroys the connection

/**
 * A real HTTP receiver on 127.0.0.1 for webhook tests: it records every request and answers as told
 * (by default 204), counting how many requests it holds at once.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  /** The most requests held at once (answered later than received), by path. */
  readonly maxConcurrent = new Map<string, number>();
  readonly #concurrent = new Map<string, number>();
  #answer: (request: Received, n: number) => Answer | Promise<Answer> = () => ({ status: 204 });
  readonly #server: Server;
  readonly #hanging = new Set<ServerResponse>();

  private constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', async () => {
        const request = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() };
        this.received.push(request);
        const held = (this.#concurrent.get(request.path) ?? 0) + 1;
        this.#concurrent.set(request.path, held);
        this.maxConcurrent.set(request.path, Math.max(this.maxConcurrent.get(request.path) ?? 0, held));
        const answer = await this.#answer(request, this.received.length);
        const done = () => this.#concurrent.set(request.path, (this.#concurrent.get(request.path) ?? 1) - 1);
        if ('hang' in answer) {
          this.#hanging.add(res);
          res.on('close', done);
          return;
        }
        done();
        if ('reset' in answer) return req.socket.destroy();
        res.writeHead(answer.status, answer.headers).end(answer.body ?? '');
      });
    });
  }

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await new Promise<void>((resolve) => receiver.#server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** The URL to register, on 127.0.0.1 (or `host`, e.g. localhost). */
  url(path = '/hook', host = '127.0.0.1'): string {
    return `http://${host}:${this.port}${path}`;
  }

  /** How to answer from now on; `n` counts requests from 1. */
  answer(answer: (request: Received, n: number) => Answer | Promise<Answer>): void {
    this.#answer = answer;
  }

  /** Waits (with poll's generous safety bound, never a timing assertion) until `count` requests arrived. */
  async waitFor(count: number, path?: string): Promise<Received[]> {
    return poll(`${count} webhook requests${path ? ` to ${path}` : ''}`, () => {
      const got = this.received.filter((r) => path === undefined || r.path === path);
      return got.length >= count ? got : undefined;
    });
  }

  /** Answers every held request (hang) with 200, then stops listening. */
  async close(): Promise<void> {
    for (const res of this.#hanging) res.destroy();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

/** Verifies a received delivery with the reference library (standardwebhooks); returns its Event. */
export function verified(
  secret: string,
  request: Received,
): { id: number; type: string; data: Record<string, unknown> } {
  const event = new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
  assert.ok(event, 'the signature verifies');
  return event as { id: number; type: string; data: Record<string, unknown> };
}
