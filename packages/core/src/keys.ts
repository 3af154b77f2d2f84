/**
 * The one key schema every store uses: an injective encoding of (prefix, tier, key) into a single
 * storage string, and of a policy into a field name. Two different (prefix, tier, key) triples never
 * encode to the same string, whatever characters they contain, so no two limiters (or tiers) can
 * share state by accident on any store.
 *
 * Encoding: each part is escaped (`%` → `%25`, `:` → `%3A`, `{` → `%7B`, `}` → `%7D`) and the three
 * parts are joined with `:`. Since no escaped part contains `:`, the split is unambiguous; since no
 * escaped part contains `{` or `}`, Redis can wrap the whole identifier in one `{…}` Cluster hash
 * tag. A missing tier is the empty part (tier names are never empty).
 *
 * @module
 */
import { ALGORITHMS, type Policy, isPolicy, validateName } from "./algorithms/index.js";
import { SluiceConfigError, SluiceInputError, describe, nestOptionError, tagged } from "./errors.js";
import type { StoreNamespace } from "./types.js";

/** The longest key a limiter accepts, in UTF-16 code units (the same on every store). */
export const MAX_KEY_LENGTH = 4096;

/** The most policies one limiter (or one tier) may have: the same on every store. */
export const MAX_POLICIES = 12;

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/**
 * Whether a string is free of lone surrogates: ES2024's `String.prototype.isWellFormed` where the
 * runtime has it (Node.js 20, Bun, Deno, workerd: about half the time of the regular expression on
 * every decision), else {@link LONE_SURROGATE}.
 */
const wellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === "function"
    ? (s) => (s as string & { isWellFormed(): boolean }).isWellFormed()
    : (s) => !LONE_SURROGATE.test(s);

/**
 * Escapes one part of a storage key (see the module comment). A loop over the code units rather
 * than a regular expression's `replace` with a callback: every Redis and Durable Object decision
 * encodes its key, and keys usually hold a `:` (`"user:42"`, `"ip:203.0.113.7"`), where the loop
 * takes about a fifth of the time; a part without special characters is returned as it is.
 *
 * @example
 * ```ts
 * encodeKeyPart("ip:2001:db8::1"); // "ip%3A2001%3Adb8%3A%3A1"
 * encodeKeyPart("100%");           // "100%25"
 * encodeKeyPart("user-42");        // "user-42"
 * ```
 */
export function encodeKeyPart(part: string): string {
  let out = "";
  let from = 0;
  for (let i = 0; i < part.length; i++) {
    const c = part.charCodeAt(i);
    // % : { }
    if (c === 37 || c === 58 || c === 123 || c === 125) {
      out += part.slice(from, i) + (c === 37 ? "%25" : c === 58 ? "%3A" : c === 123 ? "%7B" : "%7D");
      from = i + 1;
    }
  }
  return from === 0 ? part : out + part.slice(from);
}

/**
 * The storage identifier of `key` in the namespace (`prefix`, `tier`): the same string on every
 * store. Injective: different triples never give the same string.
 *
 * @example
 * ```ts
 * storageKey({ prefix: "app" }, "team:alice");      // "app::team%3Aalice"
 * storageKey({ prefix: "app:team" }, "alice");      // "app%3Ateam::alice"
 * storageKey({ prefix: "P", tier: "free" }, "bob"); // "P:free:bob"
 * ```
 */
export function storageKey(namespace: { readonly prefix: string; readonly tier?: string | undefined }, key: string): string {
  return `${encodeKeyPart(namespace.prefix)}:${namespace.tier === undefined ? "" : encodeKeyPart(namespace.tier)}:${encodeKeyPart(key)}`;
}

/** The namespace part of {@link storageKey} (everything before the key), with its trailing `:`. */
export function namespaceKey(namespace: { readonly prefix: string; readonly tier?: string | undefined }): string {
  return `${encodeKeyPart(namespace.prefix)}:${namespace.tier === undefined ? "" : encodeKeyPart(namespace.tier)}:`;
}

/**
 * The field a policy's state is stored under, inside one identifier's record: its name and its
 * algorithm (`"100-per-1m|sw"`; `|cc` for a concurrency cap), so a change of algorithm under the same name starts empty.
 * Injective: names never end in `|` plus a kind code of their own making a clash, since the code is
 * always the last three characters.
 */
export function policyField(policy: Pick<Policy, "name" | "kind">): string {
  return `${policy.name}|${ALGORITHMS[policy.kind].code}`;
}

/**
 * Throws {@link SluiceInputError} (`option: "key"`) unless `key` is a non-empty, well-formed string
 * (no lone surrogates: Redis, HTTP and the Durable Object all carry UTF-8, which cannot encode them)
 * of at most {@link MAX_KEY_LENGTH} UTF-16 code units. `tag` is the package whose message it is
 * (`"cloudflare"`), none for core.
 */
export function assertKey(key: unknown, tag?: string): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    throw new SluiceInputError(tagged(tag, `key must be a non-empty string; got ${describe(key)}`), { option: "key" });
  }
  if (key.length > MAX_KEY_LENGTH) {
    throw new SluiceInputError(tagged(tag, `key must be at most ${MAX_KEY_LENGTH} characters; got ${key.length}`), { option: "key" });
  }
  if (!wellFormed(key)) {
    throw new SluiceInputError(
      tagged(tag, `key must be a well-formed string without lone surrogates (stores carry UTF-8, which cannot encode them); got ${JSON.stringify(key)}`),
      { option: "key" },
    );
  }
}

/** Validates a tier name (the same rules as a policy name); `option` names it in the error. */
export function validateTier(value: unknown, option: string): string {
  return validateName(value, option);
}

/** The factories whose policies a limiter takes, as error messages name them. */
const FACTORIES = "fixedWindow(), slidingWindow(), slidingLog(), tokenBucket(), leakyBucket() or concurrency()";

/**
 * Validates a list of policies (or one policy, which stands for a list of one): 1 to
 * {@link MAX_POLICIES} policies made by the factories, with distinct names. Throws
 * {@link SluiceConfigError} otherwise, whose `option` is `option` (the list: `"limits"`), or the
 * policy in it (`"limits[1]"`, `"limits[1].name"`). `tag` is the package whose message it is
 * (`"redis"`), none for core.
 */
export function validatePolicies(value: unknown, option: string, tag?: string): readonly Policy[] {
  if (!Array.isArray(value) && !isPolicy(value)) {
    throw new SluiceConfigError(tagged(tag, `${option} must be a policy from ${FACTORIES} or a list of them; got ${describe(value)}`), { option });
  }
  const list: readonly unknown[] = Array.isArray(value) ? value : [value];
  if (list.length === 0) throw new SluiceConfigError(tagged(tag, `${option} must hold at least one policy; got an empty array`), { option });
  if (list.length > MAX_POLICIES) {
    throw new SluiceConfigError(tagged(tag, `${option} must hold at most ${MAX_POLICIES} policies (the same on every store); got ${list.length}`), { option });
  }
  const names = new Set<string>();
  for (const [i, policy] of list.entries()) {
    if (!isPolicy(policy)) {
      throw new SluiceConfigError(tagged(tag, `${option}[${i}] must be a policy from ${FACTORIES}; got ${describe(policy)}`), { option: `${option}[${i}]` });
    }
    if (names.has(policy.name)) {
      throw new SluiceConfigError(
        tagged(tag, `${option}[${i}].name must differ from the other policies' names (give one a distinct name option); got ${describe(policy.name)} twice`),
        { option: `${option}[${i}].name` },
      );
    }
    names.add(policy.name);
  }
  return list as readonly Policy[];
}

/**
 * What every store's `bind()` checks, synchronously, so a store used without a `RateLimiter` refuses
 * what a `RateLimiter` would: a valid prefix, a valid tier or none, and 1 to {@link MAX_POLICIES}
 * valid policies with distinct names. Throws {@link SluiceConfigError} whose `option` is the
 * namespace's field (`"namespace"` for the whole, `"prefix"`, `"tier"`, `"policies[1]"`); `tag` is
 * your store's package, written in the message: `[sluice] [my-store] policies must …`.
 *
 * @example
 * ```ts
 * bind(namespace: StoreNamespace): BoundStore {
 *   assertNamespace(namespace, "my-store");
 *   // ...
 * }
 * ```
 */
export function assertNamespace(namespace: StoreNamespace, tag?: string): void {
  if (typeof namespace !== "object" || namespace === null) {
    throw new SluiceConfigError(tagged(tag, `namespace must be an object { prefix, tier?, policies }; got ${describe(namespace)}`), { option: "namespace" });
  }
  assertPrefixAndTier(namespace, tag);
  if (!Array.isArray(namespace.policies)) {
    throw new SluiceConfigError(tagged(tag, `policies must be a list of policies; got ${describe(namespace.policies)}`), { option: "policies" });
  }
  validatePolicies(namespace.policies, "policies", tag);
}

/**
 * The first half of {@link assertNamespace}: a valid prefix, and a valid tier or none. For calls
 * that carry no policies (a reset). Throws {@link SluiceConfigError} (`option` `"prefix"` or
 * `"tier"`); `tag` as for {@link assertNamespace}.
 */
export function assertPrefixAndTier(namespace: { readonly prefix: string; readonly tier?: string | undefined }, tag?: string): void {
  try {
    validateName(namespace.prefix, "prefix");
    if (namespace.tier !== undefined) validateTier(namespace.tier, "tier");
  } catch (error) {
    throw nestOptionError(error, "", tag);
  }
}
