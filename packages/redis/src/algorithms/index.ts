/**
 * The Lua side of every algorithm, one module per kind, and the registry that maps a policy kind to
 * it. Core keeps everything else about a kind in `packages/core/src/algorithms/<kind>/`; the script
 * generator (`scripts.ts`) only assembles the parts it finds here, so nothing outside this folder
 * branches on a kind.
 *
 * Adding an algorithm: a module here with its {@link LuaAlgorithm} and its line in
 * {@link LUA_ALGORITHMS} (the compiler asks for it once core's `Policy` has the kind).
 *
 * @module
 */
import type { Policy, PolicyKind } from "@sluice/core/store";
import { concurrencyLua } from "./concurrency.js";
import type { LuaAlgorithm } from "./definition.js";
import { fixedWindowLua } from "./fixedWindow.js";
import { leakyBucketLua } from "./leakyBucket.js";
import { slidingLogLua } from "./slidingLog.js";
import { slidingWindowLua } from "./slidingWindow.js";
import { tokenBucketLua } from "./tokenBucket.js";

export type { LuaAlgorithm, LuaPart } from "./definition.js";
export { indent, int, str } from "./definition.js";

/** Every kind's Lua: the compiler refuses a kind of core's `Policy` without one. */
export const LUA_ALGORITHMS: { readonly [K in PolicyKind]: LuaAlgorithm<Extract<Policy, { kind: K }>> } = {
  fixedWindow: fixedWindowLua,
  slidingWindow: slidingWindowLua,
  slidingLog: slidingLogLua,
  tokenBucket: tokenBucketLua,
  leakyBucket: leakyBucketLua,
  concurrency: concurrencyLua,
};

/** The Lua of a policy's algorithm (typed for any policy). */
export function luaOf(policy: Pick<Policy, "kind">): LuaAlgorithm<Policy> {
  return LUA_ALGORITHMS[policy.kind] as unknown as LuaAlgorithm<Policy>;
}
