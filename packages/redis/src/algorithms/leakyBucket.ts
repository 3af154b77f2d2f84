/**
 * The leaky bucket in Lua: the GCRA (`gcra.ts`) with its `burst` and `queue` (requests past the
 * burst, up to `queue`, pass with a delay).
 *
 * @module
 */
import type { LeakyBucketPolicy } from "@sluice/core";
import { int } from "./definition.js";
import { gcraLua } from "./gcra.js";

export const leakyBucketLua = gcraLua<LeakyBucketPolicy>((policy) => `burst ${int(policy.burst)}, queue ${int(policy.queue)}`);
