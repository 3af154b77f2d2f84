import { fieldName } from "./headers.js";
import type { Decision } from "./types.js";

/** The RFC 9457 problem type of a quota that is exhausted (IANA HTTP Problem Types registry). */
export const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/** The registered title of {@link QUOTA_EXCEEDED_TYPE}. */
export const QUOTA_EXCEEDED_TITLE = "Request cannot be satisfied as assigned quota has been exceeded";

/** The JSON body of the default 429 response. */
export interface QuotaExceededProblem {
  type: typeof QUOTA_EXCEEDED_TYPE;
  title: string;
  status: 429;
  detail: string;
  /** Seconds until the same request can pass; `null` if it never can. */
  retryAfter: number | null;
  /** Names of the policies that denied the request. */
  "violated-policies": string[];
}

/** The `application/problem+json` body for a denied decision. */
export function quotaExceededProblem(decision: Decision): QuotaExceededProblem {
  const retryAfter = Number.isFinite(decision.retryAfterMs) ? Math.max(0, Math.ceil(decision.retryAfterMs / 1000)) : null;
  const violated = decision.policies.filter((p) => !p.allowed).map((p) => p.policy);
  const wait = retryAfter === 1 ? "1 second" : `${retryAfter} seconds`;
  let detail: string;
  if (decision.reason === "store-error" || decision.reason === "timeout") {
    detail =
      retryAfter === null
        ? `The rate limiter's store is unavailable, and the request's cost exceeds the quota of policy "${decision.policy}".`
        : `The rate limiter's store is unavailable and the request was not allowed; retry after ${wait}.`;
  } else if (retryAfter === null) {
    detail = `The request's cost exceeds the quota of policy "${decision.policy}" and can never be allowed.`;
  } else {
    detail = `Quota of policy "${decision.policy}" exceeded; retry after ${wait}.`;
  }
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status: 429,
    detail,
    retryAfter,
    "violated-policies": violated,
  };
}

/**
 * The default 429 response for a denied decision: an RFC 9457 `application/problem+json` body,
 * with `headers` (the rate-limit headers) attached.
 *
 * @example
 * ```ts
 * if (!decision.allowed) return limitedResponse(decision, headers);
 * ```
 */
export function limitedResponse(decision: Decision, headers: ConstructorParameters<typeof Headers>[0]): Response {
  const body = JSON.stringify(quotaExceededProblem(decision));
  if (Array.isArray(headers)) {
    // a list of pairs (what the pipeline passes): a plain record, which a server's lightweight
    // response (@hono/node-server's) writes as it is, where a Headers object is validated, sorted
    // and copied again (the deny path of the HTTP benchmark)
    const record: Record<string, string> = {};
    let plain = true;
    for (let i = 0; i < headers.length; i++) {
      const pair = headers[i] as readonly [string, string];
      const name = pair[0].toLowerCase();
      // a header named `__proto__` cannot travel in a record (an assignment sets the prototype,
      // and Fetch implementations copy records by assignment): such a list goes as a Headers
      if (name === "__proto__") plain = false;
      else if (name !== "content-type") record[name] = pair[1];
    }
    if (plain) {
      record["content-type"] = "application/problem+json";
      return new Response(body, { status: 429, headers: record });
    }
  }
  const responseHeaders = new Headers(headers);
  responseHeaders.set("Content-Type", "application/problem+json");
  return new Response(body, { status: 429, headers: responseHeaders });
}

/**
 * Adds rate-limit `headers` to a response the application built — headers it already has win —
 * copying it first when its headers are immutable (`Response.redirect()`, a `fetch()` response).
 * A network error (`Response.error()`) can carry no headers and is returned unchanged.
 *
 * @example
 * ```ts
 * const { headers } = await guard(request);
 * return addRateLimitHeaders(await handler(request), headers);
 * ```
 */
export function addRateLimitHeaders(response: Response, headers: Headers | readonly (readonly [string, string])[]): Response {
  // status 0 is a network error (`Response.error()`, whose type is "error"): read `status`, not
  // `type`, which a server's lightweight response (@hono/node-server's) can only answer by building
  // the full Response object, and that takes the slow streaming path when the response is written
  if (response.status === 0) return response;
  const list = Array.isArray(headers) ? (headers as readonly (readonly [string, string])[]) : [...headers];
  const present = response.headers;
  for (let i = 0; i < list.length; i++) {
    const pair = list[i] as readonly [string, string];
    const name = fieldName(pair[0]);
    if (present.has(name)) continue;
    try {
      present.set(name, pair[1]);
    } catch {
      // immutable headers (`Response.redirect()`, a `fetch()` response): nothing was set yet
      return withMissing(new Response(response.body, response), list, i);
    }
  }
  return response;
}

/** `copy` with the headers of `list` from index `from` that it lacks. */
function withMissing(copy: Response, list: readonly (readonly [string, string])[], from: number): Response {
  for (let i = from; i < list.length; i++) {
    const pair = list[i] as readonly [string, string];
    const name = fieldName(pair[0]);
    if (!copy.headers.has(name)) copy.headers.set(name, pair[1]);
  }
  return copy;
}
