/**
 * The same object, with each of its methods replaced by what `wrap` makes of it (once per method):
 * `call` runs the original with the given arguments.
 */
export function wrapMethods<T extends object>(
  target: T,
  wrap: (call: (args: unknown[]) => unknown, method: string) => (...args: unknown[]) => unknown,
): T {
  const wrappers = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property);
      if (typeof value !== 'function') return value;
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        wrapper = wrap((args) => value.apply(object, args), String(property));
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
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
