/**
 * The same object, with each of its methods replaced by what `wrap` makes of it: `call` runs the
 * original with the given arguments. The wrappers are made at once, as own properties of an object
 * whose prototype is the target (so its other properties read through, and `instanceof` holds): a
 * Proxy's `get` trap ran on every call, and storage calls go through several of these layers on every
 * request. Accessors are forwarded to the target, where they run with it as `this`.
 */
export function wrapMethods<T extends object>(
  target: T,
  wrap: (call: (args: unknown[]) => unknown, method: string) => (...args: unknown[]) => unknown,
): T {
  const wrapped = Object.create(target) as T;
  const done = new Set<PropertyKey>(['constructor']);
  for (let owner: object | null = target; owner && owner !== Object.prototype; ) {
    for (const key of Reflect.ownKeys(owner)) {
      if (done.has(key)) continue;
      done.add(key);
      const descriptor = Object.getOwnPropertyDescriptor(owner, key) as PropertyDescriptor;
      if (typeof descriptor.value === 'function') {
        const method = descriptor.value as (...args: unknown[]) => unknown;
        const wrapper = wrap((args) => method.apply(target, args), String(key));
        Object.defineProperty(wrapped, key, { value: wrapper, writable: true, configurable: true });
      } else if (descriptor.get || descriptor.set) {
        Object.defineProperty(wrapped, key, {
          get: () => Reflect.get(target, key),
          set: (value: unknown) => Reflect.set(target, key, value),
          configurable: true,
        });
      }
    }
    owner = Object.getPrototypeOf(owner) as object | null;
  }
  return wrapped;
}

/**
 * The same object, with every error thrown or rejected by one of its methods passed to `handle`,
 * which rethrows it (as it is, or as another). `handle` also learns the method's name. `succeeded`,
 * when given, is told of every call that did not fail.
 */
export function interceptErrors<T extends object>(
  target: T,
  handle: (error: unknown, method: string) => never,
  succeeded?: () => void,
): T {
  return wrapMethods(target, (call, method) => {
    const rethrow = (error: unknown) => handle(error, method);
    // Not an async function: that would add a promise and two turns to every storage call.
    return (...args) => {
      try {
        const result = call(args);
        if (!(result instanceof Promise)) {
          succeeded?.();
          return result;
        }
        if (!succeeded) return result.catch(rethrow);
        return result.then((settled: unknown) => {
          succeeded();
          return settled;
        }, rethrow);
      } catch (error) {
        return rethrow(error);
      }
    };
  });
}
