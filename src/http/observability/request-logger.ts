import type { FastifyBaseLogger } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
type Log = (...args: unknown[]) => void;

/**
 * A request's logger, made when first used. Fastify makes a child logger for every request (its id
 * bound); most requests log nothing but their request line, which `line` writes through the parent:
 * the same bytes as the child would write, with no child made. Anything else (a warning, an error)
 * makes the child then.
 */
export class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildOptions;
  /** No options of its own (no level, no serializers): its lines differ from the parent's by the bindings only. */
  readonly #bindingsOnly: boolean;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
    this.#bindingsOnly = isEmpty(options);
  }

  get #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  /**
   * Writes one line at `level` as this logger would. `line` starts with this logger's bindings, with the
   * same values (the request line is built so), so the parent writes it as the child would: its
   * bindings right after the parent's. Through the child, once it exists or when it differs from the
   * parent by more than its bindings (a level or serializers of its own), with the bindings left out of
   * `line` (pino leaves undefined values out) so they are not written twice.
   */
  line(level: Level, line: Bindings, message: string): void {
    if (!this.#child && this.#bindingsOnly) {
      this.#parent[level](line, message);
      return;
    }
    const own = { ...line };
    for (const key in this.#bindings) own[key] = undefined;
    this.#logger[level](own, message);
  }

  get level(): string {
    return this.#logger.level;
  }
  set level(level: string) {
    this.#logger.level = level;
  }

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }

  // Prototype methods, not arrow fields: a request that never logs allocates no closures for them.
  fatal(...args: unknown[]): void {
    (this.#logger.fatal as Log)(...args);
  }
  error(...args: unknown[]): void {
    (this.#logger.error as Log)(...args);
  }
  warn(...args: unknown[]): void {
    (this.#logger.warn as Log)(...args);
  }
  info(...args: unknown[]): void {
    (this.#logger.info as Log)(...args);
  }
  debug(...args: unknown[]): void {
    (this.#logger.debug as Log)(...args);
  }
  trace(...args: unknown[]): void {
    (this.#logger.trace as Log)(...args);
  }
  silent(...args: unknown[]): void {
    (this.#logger.silent as Log)(...args);
  }
}

/** True for an object with no own enumerable properties (Fastify passes `{}` for no options). */
function isEmpty(object: object | undefined): boolean {
  for (const _key in object) return false;
  return true;
}
