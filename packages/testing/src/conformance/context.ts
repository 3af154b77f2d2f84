/**
 * What every module of the conformance suite shares: the store under test, its test clock, a
 * limiter factory, fresh prefixes and the property runs, in one small object (`SuiteContext`), and
 * `storeSuite`, which builds the store once for a `describe` block and hands the modules that object.
 *
 * A store's test file runs the whole suite with `testStore` (see `../conformance.ts`), or one
 * module alone:
 *
 * @example
 * ```ts
 * import { MemoryStore } from "@sluice/core";
 * import { storeSuite, testRefunds } from "@sluice/testing";
 *
 * storeSuite({ name: "memory", makeStore: ({ clock }) => new MemoryStore({ clock }) }, testRefunds);
 * ```
 *
 * @module
 */
import { type Policy, RateLimiter, type Store } from "@sluice/core";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe } from "vitest";
import { T0, deepRuns, uniquePrefix } from "../suite-shared.js";

/** Options of `testStore` and {@link storeSuite}: the store under test and how hard to search it. */
export interface TestStoreOptions {
  /** Suite name, e.g. `"memory"` or `"redis (ioredis)"`. */
  name: string;
  /**
   * Builds the store under test. `clock` is the test hook for time: epoch milliseconds that the
   * store must use as its clock (a test-only hook; production stores use their own clock).
   */
  makeStore: (hooks: { clock: () => number }) => Store | Promise<Store>;
  /** Runs once after the suite (close connections, stop servers). */
  teardown?: () => void | Promise<void>;
  /** Runs of the property test against the reference models. @default 60 */
  numRuns?: number;
  /**
   * Runs of each invariant property (hundreds of calls each: keep it low for a store whose every
   * call crosses a process or an HTTP hop). @default numRuns
   */
  invariantRuns?: number;
  /** Per-test timeout in ms for slow stores. @default 20_000 */
  timeoutMs?: number;
}

/** The store under test, its clock and the suite's settings, as every module of the suite sees them. */
export interface SuiteContext {
  /** The store's name in the suite's title. */
  readonly name: string;
  /** The epoch ms the sequences start near: a multiple of every window the suite uses. */
  readonly t0: number;
  /** Sets the store's clock (epoch ms). */
  setNow(ms: number): void;
  /** Sets the store's clock to `t0 + ms`. */
  at(ms: number): void;
  /** The store under test (for limiters with options of their own, and wrappers around it). */
  store(): Store;
  /**
   * A limiter over the store under test with a prefix no other test uses: the deny cache off (so
   * every call reaches the store), and a store failure fails the test rather than deciding it.
   */
  limiter(limits: Policy | Policy[], prefix?: string): RateLimiter;
  /** A prefix no other test uses. */
  prefix(label?: string): string;
  /** Property runs, per kind of property. */
  readonly runs: {
    /** Each property checked against exact answers (the reference models, the effective window). */
    readonly properties: number;
    /** The reference model with overrides and blocks, whose sequences are longer: half as many. */
    readonly overrides: number;
    /** Each invariant property (hundreds of calls per run). */
    readonly invariants: number;
  };
  /** The per-test timeout (ms). */
  readonly timeoutMs: number;
  /** The limiters' `timeoutMs`: the test's budget, not the production default. */
  readonly storeTimeoutMs: number;
}

/** A module of the suite: registers its tests (`it`, `describe`) for the store of `suite`. */
export type SuiteModule = (suite: SuiteContext) => void;

/**
 * Registers `describe("store conformance: <name>")` for one store and runs `modules` inside it,
 * each with the same {@link SuiteContext}: the store is built once before the tests and torn down
 * after them, and a test during which the store failed fails.
 */
export function storeSuite(options: TestStoreOptions, ...modules: SuiteModule[]): void {
  const clock = { now: T0 };
  let store: Store | undefined;
  const failures: unknown[] = [];
  const deep = deepRuns();
  // a deep run's properties take minutes: the timeout is then there for a hung store only
  const timeoutMs = deep === undefined ? (options.timeoutMs ?? 20_000) : Math.max(options.timeoutMs ?? 20_000, 30 * 60_000);
  const numRuns = options.numRuns ?? 60;
  // a store call gets the test's budget, not the production default (1 s): on a loaded machine a
  // slow answer must not fail the suite, while a hung store still fails it with a store error
  const storeTimeoutMs = Math.floor(timeoutMs / 2);
  const suite: SuiteContext = {
    name: options.name,
    t0: T0,
    setNow: (ms) => {
      clock.now = ms;
    },
    at: (ms) => {
      clock.now = T0 + ms;
    },
    store: () => {
      if (store === undefined) throw new Error("the store under test is built in beforeAll: call suite.store() inside a test or a hook");
      return store;
    },
    limiter: (limits, prefix = uniquePrefix()) =>
      new RateLimiter({
        store: suite.store(),
        limits,
        prefix,
        onStoreError: "deny",
        onStoreFailure: (error) => failures.push(error),
        denyCache: false,
        timeoutMs: storeTimeoutMs,
      }),
    prefix: (label = "inv") => uniquePrefix(label),
    runs: {
      properties: deep ?? numRuns,
      overrides: deep ?? Math.max(1, Math.ceil(numRuns / 2)),
      invariants: deep ?? options.invariantRuns ?? numRuns,
    },
    timeoutMs,
    storeTimeoutMs,
  };

  describe(`store conformance: ${options.name}`, { timeout: timeoutMs }, () => {
    // a property stops (failing, with the best counterexample it has) before Vitest's timeout
    // would: a timed-out test keeps running in the background, and here it would keep moving the
    // clock the next tests share. A failure found on a slow store is still reported, shrunk as far
    // as that time allowed, rather than as a timeout.
    const fcConfig = fc.readConfigureGlobal();
    beforeAll(async () => {
      fc.configureGlobal({ ...fcConfig, interruptAfterTimeLimit: Math.max(1000, timeoutMs - 2000), markInterruptAsFailure: true });
      store = await options.makeStore({ clock: () => clock.now });
    });
    afterAll(async () => {
      fc.configureGlobal(fcConfig);
      await options.teardown?.();
    });
    afterEach(() => {
      const seen = failures.splice(0);
      if (seen.length > 0) throw new Error(`the store failed during the test: ${String(seen[0])}`, { cause: seen[0] });
    });
    for (const register of modules) register(suite);
  });
}
