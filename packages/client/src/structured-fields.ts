/**
 * A parser for Structured Field Values for HTTP (RFC 9651): Lists, Dictionaries and Items, with
 * every bare item type (Integer, Decimal, String, Token, Byte Sequence, Boolean, Date, Display
 * String), Parameters and Inner Lists. It follows the parsing algorithms of RFC 9651 §4.2 step by
 * step, so a field that does not match the grammar is rejected as a whole (the parse functions
 * return `undefined`), as the RFC requires.
 *
 * Internal to `@sluice/client`: `parseRateLimit` is the public way in.
 *
 * @module
 */

/** A bare item, tagged with its type so that Integers and Decimals, Strings and Tokens stay apart. */
export type BareItem =
  | { readonly type: "integer"; readonly value: number }
  | { readonly type: "decimal"; readonly value: number }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "token"; readonly value: string }
  | { readonly type: "binary"; readonly value: Uint8Array }
  | { readonly type: "boolean"; readonly value: boolean }
  | { readonly type: "date"; readonly value: number }
  | { readonly type: "displaystring"; readonly value: string };

/** Parameters in the order they first appear (a repeated key keeps its place and takes the last value). */
export type Parameters = Map<string, BareItem>;

/** An Item: a bare item with parameters. */
export interface Item {
  readonly kind: "item";
  readonly value: BareItem;
  readonly params: Parameters;
}

/** An Inner List: Items in parentheses, with parameters of its own. */
export interface InnerList {
  readonly kind: "inner-list";
  readonly items: Item[];
  readonly params: Parameters;
}

/** A List member or a Dictionary value. */
export type Member = Item | InnerList;

class ParseError extends Error {}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_VALUE = new Map([...BASE64].map((c, i) => [c, i]));

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= "0" && c <= "9";
}
function isAlpha(c: string | undefined): boolean {
  return c !== undefined && ((c >= "a" && c <= "z") || (c >= "A" && c <= "Z"));
}
function isLcAlpha(c: string | undefined): boolean {
  return c !== undefined && c >= "a" && c <= "z";
}
/** `tchar` of RFC 9110 §5.6.2. */
function isTchar(c: string | undefined): boolean {
  return c !== undefined && (isAlpha(c) || isDigit(c) || "!#$%&'*+-.^_`|~".includes(c));
}
function isKeyChar(c: string | undefined): boolean {
  return c !== undefined && (isLcAlpha(c) || isDigit(c) || c === "_" || c === "-" || c === "." || c === "*");
}

/**
 * Decodes base64 as WHATWG's forgiving-base64 (and so `atob`) does: "=" padding is optional but,
 * when present, must complete a multiple of four characters; anything else fails.
 */
function decodeBase64(text: string): Uint8Array {
  let body = text;
  if (body.length % 4 === 0) body = body.replace(/==?$/, "");
  if (body.length % 4 === 1) throw new ParseError("base64 of impossible length");
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let bits = 0;
  let buffer = 0;
  let o = 0;
  for (const c of body) {
    const v = BASE64_VALUE.get(c);
    if (v === undefined) throw new ParseError("not base64");
    buffer = ((buffer << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (buffer >> bits) & 0xff;
    }
  }
  return out;
}

class Parser {
  private i = 0;
  constructor(private readonly s: string) {
    // Field values are ASCII (RFC 9651 §4.2: "convert to ASCII, fail if not possible").
    for (let k = 0; k < s.length; k++) if (s.charCodeAt(k) > 0x7f) throw new ParseError("not ASCII");
  }

  private get done(): boolean {
    return this.i >= this.s.length;
  }
  private peek(): string | undefined {
    return this.s[this.i];
  }
  private next(): string {
    const c = this.s[this.i++];
    if (c === undefined) throw new ParseError("unexpected end");
    return c;
  }
  private skipSP(): void {
    while (this.s[this.i] === " ") this.i++;
  }
  private skipOWS(): void {
    while (this.s[this.i] === " " || this.s[this.i] === "\t") this.i++;
  }

  /** §4.2: leading and trailing SP are discarded; anything else left over is an error. */
  top<T>(parse: () => T): T {
    this.skipSP();
    const value = parse();
    this.skipSP();
    if (!this.done) throw new ParseError("trailing characters");
    return value;
  }

  /** §4.2.1 */
  list(): Member[] {
    const members: Member[] = [];
    while (!this.done) {
      members.push(this.itemOrInnerList());
      this.skipOWS();
      if (this.done) return members;
      if (this.next() !== ",") throw new ParseError("expected a comma");
      this.skipOWS();
      if (this.done) throw new ParseError("trailing comma");
    }
    return members;
  }

  /** §4.2.2 */
  dictionary(): Map<string, Member> {
    const dict = new Map<string, Member>();
    while (!this.done) {
      const key = this.key();
      let member: Member;
      if (this.peek() === "=") {
        this.i++;
        member = this.itemOrInnerList();
      } else {
        member = { kind: "item", value: { type: "boolean", value: true }, params: this.parameters() };
      }
      dict.set(key, member);
      this.skipOWS();
      if (this.done) return dict;
      if (this.next() !== ",") throw new ParseError("expected a comma");
      this.skipOWS();
      if (this.done) throw new ParseError("trailing comma");
    }
    return dict;
  }

  /** §4.2.1.1 */
  private itemOrInnerList(): Member {
    return this.peek() === "(" ? this.innerList() : this.item();
  }

  /** §4.2.1.2 */
  private innerList(): InnerList {
    if (this.next() !== "(") throw new ParseError("expected (");
    const items: Item[] = [];
    while (!this.done) {
      this.skipSP();
      if (this.peek() === ")") {
        this.i++;
        return { kind: "inner-list", items, params: this.parameters() };
      }
      items.push(this.item());
      const c = this.peek();
      if (c !== " " && c !== ")") throw new ParseError("expected SP or ) in an inner list");
    }
    throw new ParseError("unterminated inner list");
  }

  /** §4.2.3 */
  item(): Item {
    const value = this.bareItem();
    return { kind: "item", value, params: this.parameters() };
  }

  /** §4.2.3.1 */
  private bareItem(): BareItem {
    const c = this.peek();
    if (c === "-" || isDigit(c)) return this.numeric();
    if (c === '"') return { type: "string", value: this.string() };
    if (c === "*" || isAlpha(c)) return { type: "token", value: this.token() };
    if (c === ":") return { type: "binary", value: this.byteSequence() };
    if (c === "?") return { type: "boolean", value: this.boolean() };
    if (c === "@") return this.date();
    if (c === "%") return { type: "displaystring", value: this.displayString() };
    throw new ParseError("not a bare item");
  }

  /** §4.2.3.2 */
  private parameters(): Parameters {
    const params: Parameters = new Map();
    while (this.peek() === ";") {
      this.i++;
      this.skipSP();
      const key = this.key();
      let value: BareItem = { type: "boolean", value: true };
      if (this.peek() === "=") {
        this.i++;
        value = this.bareItem();
      }
      params.set(key, value);
    }
    return params;
  }

  /** §4.2.3.3 */
  private key(): string {
    const first = this.peek();
    if (!(isLcAlpha(first) || first === "*")) throw new ParseError("a key starts with a lowercase letter or *");
    const start = this.i;
    while (isKeyChar(this.peek())) this.i++;
    return this.s.slice(start, this.i);
  }

  /** §4.2.4 */
  private numeric(): BareItem {
    let type: "integer" | "decimal" = "integer";
    let sign = 1;
    let digits = "";
    if (this.peek() === "-") {
      this.i++;
      sign = -1;
    }
    if (!isDigit(this.peek())) throw new ParseError("expected a digit");
    while (!this.done) {
      const c = this.s[this.i] as string;
      if (isDigit(c)) {
        digits += c;
      } else if (type === "integer" && c === ".") {
        if (digits.length > 12) throw new ParseError("decimal with more than 12 integer digits");
        digits += c;
        type = "decimal";
      } else {
        break;
      }
      this.i++;
      if (type === "integer" && digits.length > 15) throw new ParseError("integer with more than 15 digits");
      if (type === "decimal" && digits.length > 16) throw new ParseError("decimal with more than 16 characters");
    }
    if (type === "integer") return { type, value: sign * Number.parseInt(digits, 10) };
    if (digits.endsWith(".")) throw new ParseError("decimal ends with a dot");
    if (digits.length - digits.indexOf(".") - 1 > 3) throw new ParseError("decimal with more than 3 fraction digits");
    return { type, value: sign * Number.parseFloat(digits) };
  }

  /** §4.2.5 */
  private string(): string {
    this.i++; // the opening DQUOTE
    let out = "";
    while (!this.done) {
      const c = this.next();
      if (c === "\\") {
        const escaped = this.next();
        if (escaped !== '"' && escaped !== "\\") throw new ParseError("bad escape in a string");
        out += escaped;
      } else if (c === '"') {
        return out;
      } else {
        const code = c.charCodeAt(0);
        if (code < 0x20 || code > 0x7e) throw new ParseError("control character in a string");
        out += c;
      }
    }
    throw new ParseError("unterminated string");
  }

  /** §4.2.6 */
  private token(): string {
    const start = this.i++;
    while (!this.done) {
      const c = this.s[this.i];
      if (!(isTchar(c) || c === ":" || c === "/")) break;
      this.i++;
    }
    return this.s.slice(start, this.i);
  }

  /** §4.2.7 */
  private byteSequence(): Uint8Array {
    this.i++; // the opening colon
    const end = this.s.indexOf(":", this.i);
    if (end < 0) throw new ParseError("unterminated byte sequence");
    const content = this.s.slice(this.i, end);
    this.i = end + 1;
    if (!/^[A-Za-z0-9+/=]*$/.test(content)) throw new ParseError("not base64");
    return decodeBase64(content);
  }

  /** §4.2.8 */
  private boolean(): boolean {
    this.i++; // "?"
    const c = this.next();
    if (c === "1") return true;
    if (c === "0") return false;
    throw new ParseError("a boolean is ?0 or ?1");
  }

  /** §4.2.9 */
  private date(): BareItem {
    this.i++; // "@"
    const n = this.numeric();
    if (n.type !== "integer") throw new ParseError("a date is an integer");
    return { type: "date", value: n.value };
  }

  /** §4.2.10 */
  private displayString(): string {
    this.i++; // "%"
    if (this.next() !== '"') throw new ParseError('expected " after %');
    const bytes: number[] = [];
    while (!this.done) {
      const c = this.next();
      const code = c.charCodeAt(0);
      if (code <= 0x1f || code >= 0x7f) throw new ParseError("control character in a display string");
      if (c === "%") {
        const hex = this.s.slice(this.i, this.i + 2);
        if (!/^[0-9a-f]{2}$/.test(hex)) throw new ParseError("bad percent-encoding");
        this.i += 2;
        bytes.push(Number.parseInt(hex, 16));
      } else if (c === '"') {
        try {
          return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
        } catch {
          throw new ParseError("display string is not UTF-8");
        }
      } else {
        bytes.push(code);
      }
    }
    throw new ParseError("unterminated display string");
  }
}

function attempt<T>(parse: () => T): T | undefined {
  try {
    return parse();
  } catch (error) {
    if (error instanceof ParseError) return undefined;
    throw error;
  }
}

/**
 * Parses a List field (RFC 9651 §4.2.1); `undefined` if the field is malformed.
 *
 * @example
 * ```ts
 * parseList('"burst";r=0;t=2, "per-day";r=990;t=3432')?.length; // 2
 * parseList('limit=100, remaining=42'); // undefined: that is a Dictionary
 * ```
 */
export function parseList(field: string): Member[] | undefined {
  return attempt(() => {
    const p = new Parser(field);
    return p.top(() => p.list());
  });
}

/**
 * Parses a Dictionary field (RFC 9651 §4.2.2); `undefined` if the field is malformed.
 *
 * @example
 * ```ts
 * parseDictionary("limit=100, remaining=42, reset=18")?.get("remaining"); // { kind: "item", value: { type: "integer", value: 42 }, ... }
 * ```
 */
export function parseDictionary(field: string): Map<string, Member> | undefined {
  return attempt(() => {
    const p = new Parser(field);
    return p.top(() => p.dictionary());
  });
}

/**
 * Parses an Item field (RFC 9651 §4.2.3); `undefined` if the field is malformed.
 *
 * @example
 * ```ts
 * parseItem('"day";q=1000;w=86400')?.params.get("w"); // { type: "integer", value: 86400 }
 * ```
 */
export function parseItem(field: string): Item | undefined {
  return attempt(() => {
    const p = new Parser(field);
    return p.top(() => p.item());
  });
}
