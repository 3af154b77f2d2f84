import {
  type BoundStore,
  type Policy,
  type PolicyResult,
  SluiceConfigError,
  type Store,
  type StoreNamespace,
  type StoreResult,
} from "@sluice/core";
import { type Script, decideScript } from "./scripts.js";

/**
 * The three calls a store makes, whatever the client: one script call per decision (EVALSHA, or
 * EVAL once after `NOSCRIPT`), and DEL for a reset.
 */
export interface Transport {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
}

/**
 * The registry key of the test clock. Only the `@sluice/redis/testing` entry sets it; see
 * `testing.ts` for how it is fenced off from production.
 * @internal
 */
export const TEST_CLOCK: unique symbol = Symbol.for("@sluice/redis:test-clock") as never;

/** @internal a store that runs the `decide` script generated for each namespace through a {@link Transport}. */
export abstract class ScriptStore implements Store {
  /** @internal */
  [TEST_CLOCK]?: () => number;
  protected abstract readonly transport: Transport;

  bind(namespace: StoreNamespace): BoundStore {
    return new ScriptBinding(namespace, this.transport, this[TEST_CLOCK]);
  }
}

function isNoScript(error: unknown): boolean {
  return String((error as { message?: unknown } | null)?.message ?? error).includes("NOSCRIPT");
}

class ScriptBinding implements BoundStore {
  /** The script generated for this namespace's policies, with its SHA-1. */
  readonly #script: Script;
  /** Names of the sliding logs, whose lists are KEYS[2..]. */
  readonly #logNames: string[];
  readonly #names: string[];
  readonly #limits: number[];
  readonly #prefix: string;

  constructor(
    namespace: StoreNamespace,
    readonly transport: Transport,
    readonly testClock: (() => number) | undefined,
  ) {
    this.#prefix = namespace.prefix;
    this.#script = decideScript(namespace.policies);
    this.#logNames = namespace.policies.filter((p) => p.kind === "slidingLog").map((p) => p.name);
    this.#names = namespace.policies.map((p) => p.name);
    this.#limits = namespace.policies.map((p) => p.limit);
  }

  /** The identifier's keys: every key shares the hash tag `{prefix:key}`, so a script touches one slot. */
  #keys(key: string): string[] {
    const base = `{${this.#prefix}:${key}}`;
    if (this.#logNames.length === 0) return [base];
    return [base, ...this.#logNames.map((name) => `${base}:log:${name}`)];
  }

  #args(cost: number, mode: "c" | "p"): string[] {
    // production sends as little as it can: the cost, and the mode for a peek
    if (this.testClock !== undefined) return [String(cost), mode, String(Math.floor(this.testClock() * 1000))];
    return mode === "c" ? [String(cost)] : [String(cost), mode];
  }

  async #run(keys: string[], args: string[]): Promise<StoreResult> {
    let reply: unknown;
    try {
      reply = await this.transport.evalsha(this.#script.sha, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      reply = await this.transport.eval(this.#script.script, keys, args);
    }
    return this.#parse(reply);
  }

  #parse(reply: unknown): StoreResult {
    const n = this.#names.length;
    if (!Array.isArray(reply) || reply.length !== 1 + 5 * n) {
      throw new Error(`[sluice] [redis] unexpected reply from the decide script: ${JSON.stringify(reply)}`);
    }
    const policies: PolicyResult[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const b = 1 + i * 5;
      const retry = Number(reply[b + 3]);
      policies[i] = {
        policy: this.#names[i] as string,
        allowed: Number(reply[b]) === 1,
        limit: this.#limits[i] as number,
        remaining: Number(reply[b + 1]),
        resetAt: Number(reply[b + 2]),
        retryAfterMs: retry < 0 ? Infinity : retry,
        delayMs: Number(reply[b + 4]),
      };
    }
    return { now: Number(reply[0]), policies };
  }

  consume(key: string, cost: number): Promise<StoreResult> {
    return this.#run(this.#keys(key), this.#args(cost, "c"));
  }

  peek(key: string): Promise<StoreResult> {
    return this.#run(this.#keys(key), this.#args(1, "p"));
  }

  async reset(key: string): Promise<void> {
    await this.transport.del(this.#keys(key));
  }
}

/** Throws a config error unless `client` has every method in `methods`. */
export function requireMethods(client: unknown, methods: string[], store: string, hint: string): void {
  for (const method of methods) {
    if (typeof (client as Record<string, unknown> | null)?.[method] !== "function") {
      throw new SluiceConfigError(`[sluice] [redis] ${store} needs ${hint}; the client has no ${method}() method`);
    }
  }
}
