/**
 * The token bucket in Lua: the GCRA (`gcra.ts`) with `burst = capacity` and no queue.
 *
 * @module
 */
import type { TokenBucketPolicy } from "@sluice/core";
import { int } from "./definition.js";
import { gcraLua } from "./gcra.js";

export const tokenBucketLua = gcraLua<TokenBucketPolicy>((policy) => `capacity ${int(policy.burst)}`);
