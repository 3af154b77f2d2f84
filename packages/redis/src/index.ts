/**
 * `@sluice/redis`: Sluice state in Redis, shared by every instance. One Lua script set, two
 * transports: `UpstashStore` over HTTP (`@upstash/redis`, edge-ready) and `RedisStore` over TCP
 * (ioredis or node-redis). One script call per decision, all limits of a key atomically, Redis's
 * `TIME` as the clock, one Redis key per identifier.
 *
 * @module
 */
export { UpstashStore, type UpstashRedisLike } from "./upstash-store.js";
export { RedisStore, type RedisClientLike, type IORedisLike, type NodeRedisLike } from "./redis-store.js";
export type { RedisClock, ScriptStoreOptions } from "./script-store.js";
