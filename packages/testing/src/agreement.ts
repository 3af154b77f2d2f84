/**
 * The header/body agreement property, for the request pipeline and every adapter: on every 429,
 * each policy named in the body's `violated-policies` appears in `RateLimit-Policy` and in
 * `RateLimit` with `r=0`, and `Retry-After` is never earlier than its `t` (no `Retry-After` only
 * when the body's `retryAfter` is `null`: a cost that can never pass). Checked with fast-check over
 * random limits and random sequences of (clock move, cost), each run on a fresh `MemoryStore` whose
 * clock the test moves: `@sluice/testing/agreement`.
 *
 * @example
 * ```ts
 * const checked = await checkHeadersAgreeWithBody((limits, clock) => {
 *   const guard = createGuard({ limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf });
 *   return async (request) => (await guard(request)).response ?? new Response("ok");
 * });
 * expect(checked).toBeGreaterThan(0);
 * ```
 *
 * @module
 */
import type { Policy } from "@sluice/core";
import fc from "fast-check";
import { REFERENCE_ALGORITHM_LIST } from "./algorithms/index.js";

/** 42 s into a minute: where every run's clock starts. */
export const AGREEMENT_T0 = 1_700_000_022_000;

/** The request header that carries a request's cost in these runs: read it with {@link costOf}. */
export const COST_HEADER = "x-cost";

/** The cost a request of these runs asks for (the `cost` option of the pipeline under test). */
export function costOf(request: Request): number {
  return Number(request.headers.get(COST_HEADER) ?? "1");
}

/**
 * One random policy of each kind the runs take (small quotas, so denials are frequent): each kind's
 * own arbitrary (`algorithms/<kind>.ts`), in the registry's order.
 */
const policyArbitrary = (name: string): fc.Arbitrary<Policy> =>
  fc.oneof(...REFERENCE_ALGORITHM_LIST.flatMap((algorithm) => (algorithm.agreementArbitrary === null ? [] : [algorithm.agreementArbitrary(name)])));

/** Limits (one to three policies, named apart) and a sequence of requests: a clock move in ms, then a cost. */
export interface AgreementCase {
  limits: Policy[];
  steps: { advanceMs: number; cost: number }[];
}

/** Random {@link AgreementCase}s. */
export const agreementCases: fc.Arbitrary<AgreementCase> = fc
  .integer({ min: 1, max: 3 })
  .chain((count) => fc.tuple(...Array.from({ length: count }, (_, i) => policyArbitrary(`p${i}`))))
  .chain((limits) =>
    fc.record({
      limits: fc.constant(limits),
      steps: fc.array(fc.record({ advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30_000 })), cost: fc.integer({ min: 1, max: 4 }) }), { minLength: 1, maxLength: 25 }),
    }),
  );

/** The members of an IETF list field, by policy name: `"p0";r=0;t=18` → `p0 → { r: 0, t: 18 }`. */
export function ietfMembers(value: string | null): Map<string, Record<string, string>> {
  const members = new Map<string, Record<string, string>>();
  if (value === null) return members;
  for (const member of value.split(",")) {
    const [quoted, ...params] = member.trim().split(";");
    const name = (quoted as string).replace(/^"|"$/g, "");
    members.set(name, Object.fromEntries(params.map((p) => p.split("=") as [string, string])));
  }
  return members;
}

/**
 * What is wrong with a 429's headers, given its body (the RFC 9457 problem), or `undefined` when
 * they agree.
 */
export function disagreement(headers: Headers, body: { "violated-policies"?: unknown; retryAfter?: unknown }): string | undefined {
  const violated = body["violated-policies"];
  if (!Array.isArray(violated) || violated.length === 0) return `no violated-policies in ${JSON.stringify(body)}`;
  const policy = ietfMembers(headers.get("RateLimit-Policy"));
  const state = ietfMembers(headers.get("RateLimit"));
  const retryAfter = headers.get("Retry-After");
  if (body.retryAfter === null ? retryAfter !== null : retryAfter === null) return `Retry-After ${retryAfter} with the body's retryAfter ${String(body.retryAfter)}`;
  for (const name of violated as string[]) {
    if (!policy.has(name)) return `${name} is not in RateLimit-Policy: ${headers.get("RateLimit-Policy")}`;
    const member = state.get(name);
    if (member === undefined) return `${name} is not in RateLimit: ${headers.get("RateLimit")}`;
    if (member.r !== "0") return `${name} has r=${member.r}, not 0: ${headers.get("RateLimit")}`;
    if (retryAfter !== null && Number(retryAfter) < Number(member.t)) return `Retry-After ${retryAfter} < t=${member.t} of ${name}: ${headers.get("RateLimit")}`;
  }
  return undefined;
}

/**
 * Runs the property: for each random case, `build(limits, clock)` makes a fresh pipeline (or
 * adapter) over `limits` on a `MemoryStore({ clock })` and returns how to send one request; each
 * step moves the clock and sends a request whose cost is in {@link COST_HEADER}. Every 429 must
 * agree ({@link disagreement}). Resolves to the number of 429s checked (assert it is not zero).
 */
export async function checkHeadersAgreeWithBody(
  build: (limits: Policy[], clock: () => number) => (request: Request) => Promise<Response>,
  options: { numRuns?: number; seed?: number } = {},
): Promise<number> {
  let checked = 0;
  await fc.assert(
    fc.asyncProperty(agreementCases, async ({ limits, steps }) => {
      let now = AGREEMENT_T0;
      const send = build(limits, () => now);
      for (const { advanceMs, cost } of steps) {
        now += advanceMs;
        const response = await send(new Request("https://api.test/items", { headers: { [COST_HEADER]: String(cost) } }));
        if (response.status !== 429) {
          await response.body?.cancel();
          continue;
        }
        const problem = disagreement(response.headers, (await response.json()) as Record<string, unknown>);
        if (problem !== undefined) throw new Error(`at +${now - AGREEMENT_T0} ms, cost ${cost}: ${problem}`);
        checked++;
      }
    }),
    { numRuns: options.numRuns ?? 60, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
  return checked;
}
