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
  const wrappers = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property);
      if (typeof value !== 'function') return value;
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        const method = String(property);
        const rethrow = (error: unknown) => handle(error, method);
        // Not an async function: that would add a promise and two turns to every storage call.
        wrapper = (...args: unknown[]) => {
          try {
            const result = value.apply(object, args);
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
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
}
