/**
 * A tiny Redis impostor for hostile-store tests: a TCP server speaking enough RESP2 and RESP3 for
 * ioredis (5 and 6) and node-redis (5 and 6, RESP2 or RESP3) to connect, that answers every script
 * call (`EVALSHA`, `EVAL` and their `_RO` forms) with whatever reply the test chose. The real client
 * parses the real bytes: integers beyond 2^53, doubles, booleans, maps, nested arrays, nulls and
 * error replies reach the store exactly as a misbehaving server or proxy would send them.
 *
 * The rest of the protocol: `HELLO` (answered in the version it asks for, and switching the
 * connection to it), `PING`, `INFO` (`loading:0`, which ioredis's ready check reads), `SCRIPT
 * LOAD` (the script's SHA-1), `QUIT`; anything else gets `+OK`.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { type Server, type Socket, createServer } from "node:net";

/**
 * A reply: a JavaScript value written as the RESP type it reads as. An integer `number` or a
 * `bigint` is a RESP integer (`:`, any number of digits); another number a RESP3 double (`,`; a bulk
 * string under RESP2); a string a bulk string; `null` the null of the connection's protocol; an
 * array a RESP array; the tagged objects the other types.
 */
export type RespValue =
  | number
  | bigint
  | string
  | null
  | RespValue[]
  | { readonly simple: string }
  | { readonly error: string }
  | { readonly bool: boolean }
  | { readonly big: bigint }
  | { readonly map: readonly (readonly [RespValue, RespValue])[] };

/** What the impostor answers a script call with: the command as sent (`EVALSHA sha numkeys …`), and the connection's protocol. */
export type ScriptAnswer = (command: readonly string[], protocol: 2 | 3) => RespValue;

/** A running impostor. */
export interface HostileRedis {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Script calls answered so far. */
  readonly scriptCalls: number;
  /** Closes the server and every connection. */
  close(): Promise<void>;
}

const CRLF = "\r\n";

/** `value` in RESP, for a connection speaking `protocol`. */
export function encodeResp(value: RespValue, protocol: 2 | 3): string {
  if (value === null) return protocol === 3 ? `_${CRLF}` : `$-1${CRLF}`;
  if (typeof value === "bigint") return `:${value}${CRLF}`;
  if (typeof value === "number") {
    if (Number.isInteger(value)) return `:${BigInt(value)}${CRLF}`;
    const text = Number.isNaN(value) ? "nan" : value === Infinity ? "inf" : value === -Infinity ? "-inf" : String(value);
    return protocol === 3 ? `,${text}${CRLF}` : bulk(text);
  }
  if (typeof value === "string") return bulk(value);
  if (Array.isArray(value)) return `*${value.length}${CRLF}${value.map((v) => encodeResp(v, protocol)).join("")}`;
  if ("simple" in value) return `+${value.simple.replace(/[\r\n]/g, " ")}${CRLF}`;
  if ("error" in value) return `-${value.error.replace(/[\r\n]/g, " ")}${CRLF}`;
  if ("bool" in value) return protocol === 3 ? `#${value.bool ? "t" : "f"}${CRLF}` : `:${value.bool ? 1 : 0}${CRLF}`;
  if ("big" in value) return protocol === 3 ? `(${value.big}${CRLF}` : bulk(String(value.big));
  const pairs = value.map.map(([k, v]) => encodeResp(k, protocol) + encodeResp(v, protocol)).join("");
  return protocol === 3 ? `%${value.map.length}${CRLF}${pairs}` : `*${value.map.length * 2}${CRLF}${pairs}`;
}

function bulk(text: string): string {
  return `$${Buffer.byteLength(text)}${CRLF}${text}${CRLF}`;
}

/**
 * The commands complete in `buffer` (RESP arrays of bulk strings, as clients send them), and how
 * many bytes they took; an incomplete command at the end waits for more bytes.
 */
export function parseCommands(buffer: Buffer): { commands: string[][]; used: number } {
  const commands: string[][] = [];
  let at = 0;
  for (;;) {
    const command = parseCommand(buffer, at);
    if (command === undefined) return { commands, used: at };
    commands.push(command.args);
    at = command.end;
  }
}

function parseCommand(buffer: Buffer, start: number): { args: string[]; end: number } | undefined {
  const header = lineAt(buffer, start);
  if (header === undefined) return undefined;
  if (!header.text.startsWith("*")) return { args: header.text.trim().split(/\s+/), end: header.end }; // an inline command
  const count = Number(header.text.slice(1));
  const args: string[] = [];
  let at = header.end;
  for (let i = 0; i < count; i++) {
    const size = lineAt(buffer, at);
    if (size === undefined) return undefined;
    const length = Number(size.text.slice(1));
    if (buffer.length < size.end + length + 2) return undefined;
    args.push(buffer.toString("utf8", size.end, size.end + length));
    at = size.end + length + 2;
  }
  return { args, end: at };
}

function lineAt(buffer: Buffer, start: number): { text: string; end: number } | undefined {
  const eol = buffer.indexOf(CRLF, start);
  return eol < 0 ? undefined : { text: buffer.toString("utf8", start, eol), end: eol + 2 };
}

const SCRIPT_CALLS = new Set(["EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"]);

/** The server's answer to a command other than a script call. */
function protocolReply(args: readonly string[], protocol: 2 | 3): RespValue {
  const name = (args[0] ?? "").toUpperCase();
  const sub = (args[1] ?? "").toUpperCase();
  if (name === "PING") return { simple: "PONG" };
  if (name === "HELLO") {
    const info: [RespValue, RespValue][] = [["server", "redis"], ["version", "7.4.0"], ["proto", protocol], ["id", 1], ["mode", "standalone"], ["role", "master"], ["modules", []]];
    return { map: info };
  }
  if (name === "INFO") return "# Server\r\nredis_version:7.4.0\r\nredis_mode:standalone\r\n# Persistence\r\nloading:0\r\n";
  if (name === "SCRIPT" && sub === "LOAD") return createHash("sha1").update(args[2] ?? "").digest("hex");
  if (name === "COMMAND") return [];
  return { simple: "OK" };
}

/**
 * Starts the impostor on 127.0.0.1 (a free port), answering script calls with `answer`.
 *
 * @example
 * ```ts
 * let reply: RespValue = [1, 2, 3];
 * const server = await startHostileRedis(() => reply);
 * const client = new IORedis(server.url);
 * await client.evalsha("0".repeat(40), 0); // [1, 2, 3]
 * ```
 */
export async function startHostileRedis(answer: ScriptAnswer): Promise<HostileRedis> {
  const sockets = new Set<Socket>();
  let scriptCalls = 0;
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let protocol: 2 | 3 = 2;
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const { commands, used } = parseCommands(pending);
      pending = pending.subarray(used);
      let out = "";
      for (const args of commands) {
        const name = (args[0] ?? "").toUpperCase();
        if (name === "HELLO" && (args[1] === "2" || args[1] === "3")) protocol = Number(args[1]) as 2 | 3;
        if (SCRIPT_CALLS.has(name)) {
          scriptCalls++;
          out += encodeResp(answer(args, protocol), protocol);
        } else {
          out += encodeResp(protocolReply(args, protocol), protocol);
        }
        if (name === "QUIT") {
          socket.end(out);
          return;
        }
      }
      if (out !== "") socket.write(out);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get scriptCalls() {
      return scriptCalls;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
