/**
 * A third-party store built only on `@sluice/core/store` — the key schema and the pure
 * `decideState`/`peekState`/`refundState`/`releaseState`/`reserveState`/`controlState` over a JSON state — passes
 * the same conformance suite as the stores Sluice ships, overrides and manual blocks included.
 * Each record goes through `JSON.stringify`/`JSON.parse`, as it would through a database or a KV
 * store, and every answer through core's `storeResultProblem`, as one that crossed a wire would: the
 * checks must accept whatever the algorithms answer, in every sequence of the suite.
 */
import { SluiceStoreError } from "@sluice/core";
import {
  type BoundStore,
  type Store,
  type StoreNamespace,
  type StoreResult,
  type StoredState,
  assertNamespace,
  controlState,
  decideState,
  peekState,
  refundState,
  releaseState,
  reserveState,
  storageKey,
  storeResultProblem,
} from "@sluice/core/store";
import { testStore } from "./conformance.js";

class JsonRecordStore implements Store {
  readonly #records = new Map<string, { json: string; expiresAtUs: number }>();

  constructor(readonly clock: () => number) {}

  bind(namespace: StoreNamespace): BoundStore {
    assertNamespace(namespace, "JsonRecordStore.bind");
    const records = this.#records;
    const nowUs = () => Math.floor(this.clock() * 1000);
    // the answer at `nowUs` for a call that asked about `cost` (1 but for a consume), checked
    const checked = (result: StoreResult, nowUs: number, cost = 1): StoreResult => {
      const problem = storeResultProblem(namespace.policies, result, { nowMs: Math.floor(nowUs / 1000), cost });
      if (problem !== undefined) throw new SluiceStoreError(`JsonRecordStore answered what no algorithm can: ${problem}`);
      return result;
    };
    const read = (id: string, now: number): StoredState | undefined => {
      const record = records.get(id);
      return record === undefined || record.expiresAtUs <= now ? undefined : (JSON.parse(record.json) as StoredState);
    };
    return {
      consume(key, cost, lease) {
        const id = storageKey(namespace, key);
        const now = nowUs();
        const decided = decideState(namespace.policies, read(id, now), now, cost, lease);
        if (decided.state !== undefined) records.set(id, { json: JSON.stringify(decided.state), expiresAtUs: decided.expiresAtUs });
        // an allowed charge's marks go back to the limiter, which hands them to refund(); the
        // override that applied goes on the decision
        return checked({ now: Math.floor(now / 1000), policies: decided.policies, marks: decided.marks, override: decided.override }, now, cost);
      },
      peek(key) {
        const now = nowUs();
        const peeked = peekState(namespace.policies, read(storageKey(namespace, key), now), now);
        return checked({ now: Math.floor(now / 1000), policies: peeked.policies, override: peeked.override }, now);
      },
      refund(key, cost, charge) {
        const id = storageKey(namespace, key);
        const now = nowUs();
        const refunded = refundState(namespace.policies, read(id, now), now, cost, charge);
        if (refunded.state !== undefined) records.set(id, { json: JSON.stringify(refunded.state), expiresAtUs: refunded.expiresAtUs });
        return checked({ now: Math.floor(now / 1000), policies: refunded.policies, override: refunded.override }, now);
      },
      release(key, lease) {
        const id = storageKey(namespace, key);
        const now = nowUs();
        const released = releaseState(namespace.policies, read(id, now), now, lease);
        if (released.state !== undefined) records.set(id, { json: JSON.stringify(released.state), expiresAtUs: released.expiresAtUs });
        return checked({ now: Math.floor(now / 1000), policies: released.policies, override: released.override }, now);
      },
      reserve(key, units, holdMs) {
        const id = storageKey(namespace, key);
        const now = nowUs();
        const reserved = reserveState(namespace.policies, read(id, now), now, units, holdMs * 1000);
        if (reserved.state !== undefined) records.set(id, { json: JSON.stringify(reserved.state), expiresAtUs: reserved.expiresAtUs });
        return { now: Math.floor(now / 1000), policies: reserved.policies, marks: reserved.marks, override: reserved.override, granted: reserved.granted };
      },
      reset(key) {
        records.delete(storageKey(namespace, key));
      },
      control(key, command) {
        const id = storageKey(namespace, key);
        const now = nowUs();
        const controlled = controlState(namespace.policies, read(id, now), now, command);
        if (controlled.state !== undefined) records.set(id, { json: JSON.stringify(controlled.state), expiresAtUs: controlled.expiresAtUs });
        return { now: Math.floor(now / 1000), override: controlled.override };
      },
    };
  }
}

testStore({ name: "a store on @sluice/core/store (decideState over JSON records)", makeStore: ({ clock }) => new JsonRecordStore(clock), numRuns: 100 });
