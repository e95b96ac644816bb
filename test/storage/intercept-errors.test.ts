import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { interceptErrors, wrapMethods } from '../../src/storage/intercept-errors.js';

class Base {
  inherited(): string {
    return 'base';
  }
}

/** A store-like class: private state, methods on its prototype and its parent's, a field, an accessor. */
class Counter extends Base {
  #count = 0;
  readonly label = 'counter';
  readonly arrow = (by: number) => {
    this.#count += by;
    return this.#count;
  };

  add(by: number): number {
    this.#count += by;
    return this.#count;
  }

  fail(message: string): never {
    throw new Error(message);
  }

  async later(): Promise<number> {
    return this.#count;
  }

  get count(): number {
    return this.#count;
  }
}

describe('wrapMethods', () => {
  test('when an object is wrapped, then each method (its own class, its parent, a function field) goes through the wrapper with its name, and runs on the target', () => {
    const target = new Counter();
    const calls: string[] = [];
    const wrapped = wrapMethods(target, (call, method) => (...args) => {
      calls.push(method);
      return call(args);
    });
    assert.equal(wrapped.add(2), 2);
    assert.equal(wrapped.arrow(3), 5);
    assert.equal(wrapped.inherited(), 'base');
    assert.deepEqual(calls, ['add', 'arrow', 'inherited']);
    // The target's state, private fields included, is the one changed; accessors and fields read through.
    assert.equal(target.count, 5);
    assert.equal(wrapped.count, 5);
    assert.equal(wrapped.label, 'counter');
    assert.ok(wrapped instanceof Counter);
  });

  test('when wrappers are layered, then each layer sees each call once, outermost first', () => {
    const calls: string[] = [];
    const layer =
      (name: string) =>
      (call: (args: unknown[]) => unknown, method: string) =>
      (...args: unknown[]) => {
        calls.push(`${name}.${method}`);
        return call(args);
      };
    const wrapped = wrapMethods(wrapMethods(new Counter(), layer('inner')), layer('outer'));
    assert.equal(wrapped.add(4), 4);
    assert.deepEqual(calls, ['outer.add', 'inner.add']);
  });
});

describe('interceptErrors', () => {
  test('when a method throws or rejects, then the handler gets the error and the method name; a success is told to succeeded', async () => {
    const seen: string[] = [];
    let succeeded = 0;
    const wrapped = interceptErrors(
      new Counter(),
      (error, method) => {
        seen.push(`${method}: ${(error as Error).message}`);
        throw new Error(`handled ${(error as Error).message}`);
      },
      () => succeeded++,
    );
    assert.throws(() => wrapped.fail('broken'), /handled broken/);
    assert.equal(wrapped.add(1), 1);
    assert.equal(await wrapped.later(), 1);
    assert.deepEqual(seen, ['fail: broken']);
    assert.equal(succeeded, 2);
  });
});
