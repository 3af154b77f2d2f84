/**
 * The RFC 9651 parser, with the examples of the RFC and the edge cases of its parsing algorithms
 * (§4.2): every valid form parses to the exact value, every malformed one rejects the whole field.
 */
import fc from "fast-check";
import * as sh from "structured-headers";
import { describe, expect, it } from "vitest";
import { type BareItem, type Member, parseDictionary, parseItem, parseList } from "./structured-fields.js";

/** A plain-JSON view of parsed members, to compare with `toEqual`. */
function plain(value: BareItem): unknown {
  return value.type === "binary" ? { binary: [...value.value] } : { [value.type]: value.value };
}
function params(map: Map<string, BareItem>): [string, unknown][] {
  return [...map].map(([k, v]) => [k, plain(v)]);
}
function member(m: Member): unknown {
  return m.kind === "item"
    ? [plain(m.value), params(m.params)]
    : [m.items.map((i) => [plain(i.value), params(i.params)]), params(m.params)];
}
const list = (field: string) => parseList(field)?.map(member);
const dict = (field: string) => {
  const d = parseDictionary(field);
  return d === undefined ? undefined : [...d].map(([k, m]) => [k, member(m)]);
};
const item = (field: string) => {
  const i = parseItem(field);
  return i === undefined ? undefined : member(i);
};

describe("items", () => {
  it.each([
    ["42", { integer: 42 }],
    ["-42", { integer: -42 }],
    ["0", { integer: 0 }],
    ["00042", { integer: 42 }],
    ["999999999999999", { integer: 999_999_999_999_999 }],
    ["-999999999999999", { integer: -999_999_999_999_999 }],
    ["4.5", { decimal: 4.5 }],
    ["-0.005", { decimal: -0.005 }],
    ["123456789012.123", { decimal: 123_456_789_012.123 }],
    ['"hello world"', { string: "hello world" }],
    ['""', { string: "" }],
    ['"a \\"quoted\\" \\\\ word"', { string: 'a "quoted" \\ word' }],
    ["foo123/456", { token: "foo123/456" }],
    ["*foo", { token: "*foo" }],
    ["text/html:x!#$%&'*+-.^_`|~", { token: "text/html:x!#$%&'*+-.^_`|~" }],
    [":cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:", { binary: [...new TextEncoder().encode("pretend this is binary content.")] }],
    [":YQ:", { binary: [97] }], // padding is optional
    [":YQ==:", { binary: [97] }],
    [":YWI=:", { binary: [97, 98] }],
    ["::", { binary: [] }],
    ["?1", { boolean: true }],
    ["?0", { boolean: false }],
    ["@1659578233", { date: 1_659_578_233 }],
    ["@-62135596800", { date: -62_135_596_800 }],
    ['%"This is intended for display to %c3%bcsers."', { displaystring: "This is intended for display to üsers." }],
  ])("%s", (field, expected) => {
    expect(item(field)).toEqual([expected, []]);
  });

  it("parameters: in order, repeated keys overwritten in place, SP after ';', value true by default", () => {
    expect(item('"day";q=1000;w=86400;pk=:YWJj:;x')).toEqual([
      { string: "day" },
      [
        ["q", { integer: 1000 }],
        ["w", { integer: 86400 }],
        ["pk", { binary: [97, 98, 99] }],
        ["x", { boolean: true }],
      ],
    ]);
    expect(item("1; a=1; b=2;a=3")).toEqual([{ integer: 1 }, [["a", { integer: 3 }], ["b", { integer: 2 }]]]);
    expect(item("t;*k-_.9=?0")).toEqual([{ token: "t" }, [["*k-_.9", { boolean: false }]]]);
  });

  it("leading and trailing spaces are discarded", () => {
    expect(item("   42   ")).toEqual([{ integer: 42 }, []]);
  });

  it.each([
    ["", "empty"],
    ["1000000000000000", "integer of 16 digits"],
    ["1234567890123.0", "decimal with 13 integer digits"],
    ["1.2345", "decimal with 4 fraction digits"],
    ["1.", "decimal ending with a dot"],
    ["1..2", "two dots"],
    ["-", "a lone minus"],
    ["- 1", "minus then space"],
    ["+1", "plus sign"],
    ['"unterminated', "unterminated string"],
    ['"bad \\n escape"', "escape of another character"],
    ['"tab\tinside"', "control character in a string"],
    ['"é"', "non-ASCII"],
    [":YQ==", "unterminated byte sequence"],
    [":Y!Q=:", "not base64"],
    [":Y=Q=:", "padding in the middle"],
    [":YQ===:", "too much padding"],
    [":YQ=:", "padding that does not complete four characters"],
    [":=:", "padding alone"],
    [":Q:", "base64 of impossible length"],
    ["?2", "boolean other than ?0/?1"],
    ["?", "lone question mark"],
    ["@1.5", "decimal date"],
    ['%"%C3%BC"', "uppercase percent-encoding"],
    ['%"%c3"', "invalid UTF-8"],
    ['%"unterminated', "unterminated display string"],
    ["%x", "percent without DQUOTE"],
    ["1;A=1", "uppercase parameter key"],
    ["1;1a=1", "parameter key starting with a digit"],
    ["1 ;a=1", "space before ';'"],
    ["1;a= 1", "space after '='"],
    ["1, 2", "a list where an item is expected"],
    ["1 2", "two items"],
    ["_token", "token starting with _"],
    ["\t1", "leading tab"],
  ])("rejects %j (%s)", (field) => {
    expect(parseItem(field)).toBeUndefined();
  });
});

describe("lists", () => {
  it("RFC 9651 examples", () => {
    expect(list("sugar, tea, rum")).toEqual([
      [{ token: "sugar" }, []],
      [{ token: "tea" }, []],
      [{ token: "rum" }, []],
    ]);
    expect(list('("foo" "bar"), ("baz"), ("bat" "one"), ()')).toEqual([
      [[[{ string: "foo" }, []], [{ string: "bar" }, []]], []],
      [[[{ string: "baz" }, []]], []],
      [[[{ string: "bat" }, []], [{ string: "one" }, []]], []],
      [[], []],
    ]);
    expect(list('("foo"; a=1;b=2);lvl=5, ("bar" "baz");lvl=1')).toEqual([
      [[[{ string: "foo" }, [["a", { integer: 1 }], ["b", { integer: 2 }]]]], [["lvl", { integer: 5 }]]],
      [[[{ string: "bar" }, []], [{ string: "baz" }, []]], [["lvl", { integer: 1 }]]],
    ]);
    expect(list("abc;a=1;b=2; cde_456, (ghi;jk=4 l);q=\"9\";r=w")).toEqual([
      [{ token: "abc" }, [["a", { integer: 1 }], ["b", { integer: 2 }], ["cde_456", { boolean: true }]]],
      [
        [[{ token: "ghi" }, [["jk", { integer: 4 }]]], [{ token: "l" }, []]],
        [["q", { string: "9" }], ["r", { token: "w" }]],
      ],
    ]);
  });

  it("Dates are Integers, followed by parameters and more members like any item", () => {
    expect(list("@1659578233;tz=utc, @-1 ")).toEqual([
      [{ date: 1_659_578_233 }, [["tz", { token: "utc" }]]],
      [{ date: -1 }, []],
    ]);
    expect(parseList("@1.5, @2")).toBeUndefined();
  });

  it("an empty field is an empty list; whitespace around commas (SP and HTAB) is allowed", () => {
    expect(list("")).toEqual([]);
    expect(list("  ")).toEqual([]);
    expect(list("1 ,\t2   ,3")).toEqual([
      [{ integer: 1 }, []],
      [{ integer: 2 }, []],
      [{ integer: 3 }, []],
    ]);
    expect(list("(  1   2  )")).toEqual([[[[{ integer: 1 }, []], [{ integer: 2 }, []]], []]]);
  });

  it("the rate-limit fields of the IETF draft and of express-rate-limit's draft-8", () => {
    expect(list('"burst";r=0;t=2, "per-day";r=990;t=3432')).toEqual([
      [{ string: "burst" }, [["r", { integer: 0 }], ["t", { integer: 2 }]]],
      [{ string: "per-day" }, [["r", { integer: 990 }], ["t", { integer: 3432 }]]],
    ]);
    expect(list('"5-in-1min"; q=5; w=60; pk=:NTcwYWJlOWU2YjNi:')).toEqual([
      [
        { string: "5-in-1min" },
        [
          ["q", { integer: 5 }],
          ["w", { integer: 60 }],
          ["pk", { binary: [...new TextEncoder().encode("570abe9e6b3b")] }],
        ],
      ],
    ]);
  });

  it.each([
    ["1,", "trailing comma"],
    ["1, ", "trailing comma and space"],
    [",1", "leading comma"],
    ["1,,2", "empty member"],
    ["1 2", "missing comma"],
    ["(1 2", "unterminated inner list"],
    ["(1,2)", "comma in an inner list"],
    ["(1)(2)", "inner lists without a comma"],
    ["limit=100, remaining=42, reset=18", "a dictionary"],
    ['"a";r=1, "b";r=x y', "one bad member spoils the field"],
    ['"a";r=1,\n"b"', "newline"],
  ])("rejects %j (%s)", (field) => {
    expect(parseList(field)).toBeUndefined();
  });
});

describe("dictionaries", () => {
  it("RFC 9651 examples and draft-7's RateLimit", () => {
    expect(dict('en="Applepie", da=:w4ZibGV0w6ZydGU=:')).toEqual([
      ["en", [{ string: "Applepie" }, []]],
      ["da", [{ binary: [...new TextEncoder().encode("Æbletærte")] }, []]],
    ]);
    expect(dict("a=?0, b, c; foo=bar")).toEqual([
      ["a", [{ boolean: false }, []]],
      ["b", [{ boolean: true }, []]],
      ["c", [{ boolean: true }, [["foo", { token: "bar" }]]]],
    ]);
    expect(dict("rating=1.5, feelings=(joy sadness)")).toEqual([
      ["rating", [{ decimal: 1.5 }, []]],
      ["feelings", [[[{ token: "joy" }, []], [{ token: "sadness" }, []]], []]],
    ]);
    expect(dict("limit=100, remaining=42, reset=18")).toEqual([
      ["limit", [{ integer: 100 }, []]],
      ["remaining", [{ integer: 42 }, []]],
      ["reset", [{ integer: 18 }, []]],
    ]);
  });

  it("a repeated key keeps its first place and takes the last value", () => {
    expect(dict("a=1, b=2, a=3")).toEqual([
      ["a", [{ integer: 3 }, []]],
      ["b", [{ integer: 2 }, []]],
    ]);
  });

  it.each([
    ["a=1,", "trailing comma"],
    ["A=1", "uppercase key"],
    ["a =1", "space before '='"],
    ["a=1 b=2", "missing comma"],
    ['"a";r=1', "a list of strings"],
    ["a=", "missing value"],
  ])("rejects %j (%s)", (field) => {
    expect(parseDictionary(field)).toBeUndefined();
  });
});

describe("agrees with structured-headers, an independent RFC 9651 parser, on generated fields", () => {
  /** Both parsers' results in one shape (structured-headers does not tell Integers from Decimals). */
  function mine(value: BareItem): unknown {
    switch (value.type) {
      case "integer":
      case "decimal":
        return { number: value.value + 0 };
      case "binary":
        return { binary: [...value.value] };
      default:
        return { [value.type]: value.value };
    }
  }
  function theirs(value: sh.BareItem): unknown {
    if (typeof value === "number") return { number: value + 0 };
    if (typeof value === "string") return { string: value };
    if (typeof value === "boolean") return { boolean: value };
    if (value instanceof sh.Token) return { token: value.toString() };
    if (value instanceof sh.DisplayString) return { displaystring: value.toString() };
    if (value instanceof Date) return { date: value.getTime() / 1000 };
    return { binary: [...new Uint8Array(value as ArrayBuffer)] };
  }
  const myMember = (m: Member): unknown =>
    m.kind === "item"
      ? [mine(m.value), [...m.params].map(([k, v]) => [k, mine(v)])]
      : [m.items.map((i) => [mine(i.value), [...i.params].map(([k, v]) => [k, mine(v)])]), [...m.params].map(([k, v]) => [k, mine(v)])];
  const theirMember = (m: sh.Item | sh.InnerList): unknown =>
    Array.isArray(m[0])
      ? [(m[0] as sh.Item[]).map((i) => theirMember(i)), [...m[1]].map(([k, v]) => [k, theirs(v)])]
      : [theirs(m[0] as sh.BareItem), [...m[1]].map(([k, v]) => [k, theirs(v)])];
  const attempt = <T>(parse: () => T): T | undefined => {
    try {
      return parse();
    } catch {
      return undefined;
    }
  };

  /**
   * Fragments of valid and invalid syntax, glued at random: many fields fail, many parse. No
   * Dates: structured-headers 2.1.0 reads a Date to the end of the field, so it rejects `@1, @2`
   * and `@1;a=1`, which RFC 9651 §4.2.9 allows (see the list test above).
   */
  const fragment = fc.constantFrom(
    "1", "-12", "0", "3.14", "-0.5", "1.2345", "1.", "1234567890123456", "123456789012.5", "1234567890123.5",
    '"a b"', '"q\\"x"', '"\\\\"', '"\\x"', '"', "tok", "*t/x:y", "A-b.c", "_x",
    ":YWJj:", ":YQ:", ":YQ==:", ":YQ=:", ":Y=Q:", ":", "?1", "?0", "?2", "?",
    '%"a%c3%bc"', '%"%C3"', '%"%ff"', "%x", "()", "(1 2)", "( 1 )", "(1,2)", "(",  ")",
    ", ", ",", " ", "  ", "\t", ";", ";a=1", "; b", ";c=tok", ";A=1", ";1x", "=", "a=", "b=2", "*k", "é",
  );
  const field = fc.array(fragment, { maxLength: 8 }).map((parts) => parts.join(""));

  it("lists", () => {
    fc.assert(
      fc.property(field, (text) => {
        const a = parseList(text)?.map(myMember);
        const b = attempt(() => sh.parseList(text))?.map(theirMember);
        expect(a, JSON.stringify(text)).toEqual(b);
      }),
      { numRuns: 3_000 },
    );
  });

  it("dictionaries", () => {
    fc.assert(
      fc.property(field, (text) => {
        const d = parseDictionary(text);
        const a = d === undefined ? undefined : [...d].map(([k, m]) => [k, myMember(m)]);
        const t = attempt(() => sh.parseDictionary(text));
        const b = t === undefined ? undefined : [...t].map(([k, m]) => [k, theirMember(m)]);
        expect(a, JSON.stringify(text)).toEqual(b);
      }),
      { numRuns: 3_000 },
    );
  });

  it("items", () => {
    fc.assert(
      fc.property(field, (text) => {
        const i = parseItem(text);
        const t = attempt(() => sh.parseItem(text));
        expect(i === undefined ? undefined : myMember(i), JSON.stringify(text)).toEqual(t === undefined ? undefined : theirMember(t));
      }),
      { numRuns: 3_000 },
    );
  });
});
