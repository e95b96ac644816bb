import pg from 'pg';

/** How soon a LISTEN connection that broke is opened again. */
const RELISTEN_MS = 1_000;

/**
 * One LISTEN connection per node, shared by everything that wants to hear of other nodes' commits (the
 * deliverer, the live event streams): PostgreSQL sends a NOTIFY at commit to every listening session,
 * so a node learns of any node's commit without polling. Opened on the first watch; a connection that
 * breaks is opened again after a pause, and every watcher is then woken, since a notification may have
 * been missed meanwhile. Channels nobody watches are UNLISTENed: each notification costs its receiver.
 *
 * A NOTIFY reaches every session of the database, whatever its schema: each carries the sender's
 * schema (`current_schema()`) and a node hears only its own, so deployments that share a database in
 * separate schemas do not wake each other. An empty payload (a node of an earlier version, during a
 * rolling upgrade) wakes everyone, as it did.
 */
export class PostgresNotifications {
  readonly #url: string;
  readonly #channels = new Map<string, Set<() => void>>();
  #client: pg.Client | undefined;
  /** This node's schema, as its LISTEN session resolves the URL's search_path. */
  #schema: string | undefined;
  #connected: Promise<void> | undefined;
  #closed = false;

  constructor(url: string) {
    this.#url = url;
  }

  /** `listener` is called on each notification on `channel` (and after a reconnection); returns the unwatch. */
  watch(channel: string, listener: () => void): () => void {
    let listeners = this.#channels.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#channels.set(channel, listeners);
      if (this.#client) void this.#command(`LISTEN ${channel}`);
    }
    listeners.add(listener);
    if (!this.#client) this.#listen();
    return () => {
      const current = this.#channels.get(channel);
      if (!current?.delete(listener) || current.size > 0) return;
      this.#channels.delete(channel);
      if (this.#client) void this.#command(`UNLISTEN ${channel}`);
    };
  }

  /** A LISTEN or UNLISTEN once connected; a failure breaks the connection, which is opened again. */
  async #command(sql: string): Promise<void> {
    const client = this.#client;
    try {
      await this.#connected;
      await client?.query(sql);
    } catch {
      client?.emit('error', new Error(`${sql} failed`));
    }
  }

  #wakeAll(): void {
    for (const listeners of this.#channels.values()) for (const listener of listeners) listener();
  }

  #listen(): void {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#url,
      application_name: 'petstore-listen',
      keepAlive: true,
    });
    this.#client = client;
    const again = () => {
      if (this.#client !== client || this.#closed) return;
      this.#client = undefined;
      client.end().catch(() => undefined);
      setTimeout(() => {
        if (!this.#client && this.#channels.size > 0) this.#listen();
        this.#wakeAll();
      }, RELISTEN_MS).unref();
    };
    client.on('error', again);
    client.on('end', again);
    client.on('notification', ({ channel, payload }) => {
      if (payload && this.#schema !== undefined && payload !== this.#schema) return;
      for (const listener of this.#channels.get(channel) ?? []) listener();
    });
    this.#connected = (async () => {
      await client.connect();
      const { rows } = await client.query<{ schema: string | null }>('SELECT current_schema() AS schema');
      this.#schema = rows[0]?.schema ?? undefined;
      const channels = [...this.#channels.keys()];
      if (channels.length > 0) await client.query(channels.map((c) => `LISTEN ${c}`).join('; '));
    })();
    this.#connected.catch(again);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }
}
