/**
 * Client identity from request headers, with explicit trust: no header is believed unless the
 * caller names the platform that sets it.
 *
 * @module
 */
import { SluiceConfigError, describe } from "./errors.js";

/**
 * Which header to believe: `"cloudflare"` (`CF-Connecting-IP`), `"vercel"`
 * (`x-vercel-forwarded-for`, else `x-real-ip`), or a number N of trusted reverse proxies (the N-th
 * address from the right of `X-Forwarded-For`).
 */
export type ClientIpTrust = "cloudflare" | "vercel" | number;

/** Options of {@link clientIp}. */
export interface ClientIpOptions {
  /** Which header to believe. Without it, no header is trusted and the result is `undefined`. */
  trust?: ClientIpTrust;
  /**
   * IPv6 clients are keyed by this prefix length (a single host usually owns a whole /64).
   * @default 64
   */
  ipv6Subnet?: number;
}

/**
 * The key adapters give every request whose address `trust` cannot establish (no trusted header,
 * or a value that is not an IP address): such requests share one quota rather than go unlimited.
 */
export const UNKNOWN_CLIENT_KEY = "unknown";

/**
 * Validates `trust` and `ipv6Subnet`; throws `SluiceConfigError` whose `option` is `"trust"`,
 * `"ipv6Subnet"`, or `"options"` when `options` is not an object.
 */
export function validateClientIpOptions(options: ClientIpOptions | undefined): void {
  if (options === undefined) return;
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`options must be an object like { trust, ipv6Subnet }; got ${describe(options)}`, { option: "options" });
  }
  const { trust, ipv6Subnet } = options;
  if (
    trust !== undefined &&
    trust !== "cloudflare" &&
    trust !== "vercel" &&
    !(typeof trust === "number" && Number.isSafeInteger(trust) && trust > 0)
  ) {
    throw new SluiceConfigError(`trust must be "cloudflare", "vercel" or a positive integer count of trusted proxies; got ${describe(trust)}`, {
      option: "trust",
    });
  }
  if (ipv6Subnet !== undefined && !(typeof ipv6Subnet === "number" && Number.isInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)) {
    throw new SluiceConfigError(`ipv6Subnet must be an integer from 1 to 128; got ${describe(ipv6Subnet)}`, { option: "ipv6Subnet" });
  }
}

/**
 * The client's address from trusted headers, as a rate-limit key: an IPv4 address as written
 * (`"203.0.113.7"`), an IPv4-mapped IPv6 address as its IPv4 address, any other IPv6 address as
 * its prefix (`"2001:db8:1:2::/64"`). `undefined` if nothing is trusted, the header is missing, or
 * its value is not an IP address.
 *
 * @example
 * ```ts
 * clientIp(request, { trust: "cloudflare" }); // from CF-Connecting-IP
 * clientIp(request, { trust: 1 });            // the rightmost X-Forwarded-For entry
 * clientIp(request);                          // undefined: nothing trusted
 * ```
 */
export function clientIp(request: Request, options: ClientIpOptions = {}): string | undefined {
  validateClientIpOptions(options);
  const { trust } = options;
  let raw: string | undefined;
  if (trust === "cloudflare") {
    raw = request.headers.get("cf-connecting-ip") ?? undefined;
  } else if (trust === "vercel") {
    const forwarded = request.headers.get("x-vercel-forwarded-for") ?? request.headers.get("x-real-ip");
    raw = forwarded?.split(",")[0];
  } else if (typeof trust === "number") {
    const list = request.headers.get("x-forwarded-for");
    if (list === null) return undefined;
    const hops = list.split(",");
    raw = hops[hops.length - trust];
  }
  if (raw === undefined) return undefined;
  return normalize(raw, options.ipv6Subnet ?? 64);
}

/**
 * Turns an address into a rate-limit key: IPv4 as written, IPv4-mapped IPv6 as IPv4, other IPv6
 * as its `/ipv6Subnet` prefix in canonical (RFC 5952) form. `undefined` if it is not an IP address.
 * Use it for a socket's remote address.
 *
 * @example
 * ```ts
 * normalizeIp("::ffff:127.0.0.1");        // "127.0.0.1"
 * normalizeIp("2001:DB8:1:2:3:4:5:6");    // "2001:db8:1:2::/64"
 * ```
 */
export function normalizeIp(address: string, options: Pick<ClientIpOptions, "ipv6Subnet"> = {}): string | undefined {
  validateClientIpOptions(options);
  return normalize(address, options.ipv6Subnet ?? 64);
}

function normalize(address: string, subnet: number): string | undefined {
  if (typeof address !== "string") return undefined;
  let value = address.trim();
  if (value.startsWith("[") && value.endsWith("]")) value = value.slice(1, -1);
  const v4 = parseIPv4(value);
  if (v4 !== undefined) return v4.join(".");
  const v6 = parseIPv6(value);
  if (v6 === undefined) return undefined;
  if (v6[0] === 0 && v6[1] === 0 && v6[2] === 0 && v6[3] === 0 && v6[4] === 0 && v6[5] === 0xffff) {
    return `${(v6[6] as number) >> 8}.${(v6[6] as number) & 0xff}.${(v6[7] as number) >> 8}.${(v6[7] as number) & 0xff}`;
  }
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnet - i * 16));
    v6[i] = (v6[i] as number) & ((0xffff << (16 - keep)) & 0xffff);
  }
  return `${formatIPv6(v6)}/${subnet}`;
}

function parseIPv4(value: string): number[] | undefined {
  const parts = value.split(".");
  if (parts.length !== 4) return undefined;
  const octets: number[] = [];
  for (const part of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    octets.push(n);
  }
  return octets;
}

function parseHextets(part: string): number[] | undefined {
  if (part === "") return [];
  const out: number[] = [];
  const groups = part.split(":");
  for (let i = 0; i < groups.length; i++) {
    const group = groups[i] as string;
    if (i === groups.length - 1 && group.includes(".")) {
      const v4 = parseIPv4(group);
      if (v4 === undefined) return undefined;
      out.push(((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number));
    } else {
      if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return undefined;
      out.push(Number.parseInt(group, 16));
    }
  }
  return out;
}

function parseIPv6(value: string): number[] | undefined {
  if (!value.includes(":")) return undefined;
  const halves = value.split("::");
  if (halves.length > 2) return undefined;
  // a dotted IPv4 part may only be the last 32 bits, never before "::"
  if (halves.length === 2 && (halves[0] as string).includes(".")) return undefined;
  const head = parseHextets(halves[0] as string);
  if (head === undefined) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const tail = parseHextets(halves[1] as string);
  if (tail === undefined || head.length + tail.length > 7) return undefined;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/** RFC 5952: lowercase, no leading zeros, the longest run (2+) of zero groups as `::` (the first on ties). */
function formatIPv6(groups: number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}
