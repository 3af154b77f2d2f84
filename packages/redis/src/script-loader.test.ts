import { describe, expect, it } from "vitest";
import { MAX_NOSCRIPT, type ScriptTransport, isNoScript, runScript, scriptLoadState } from "./script-loader.js";

// The single-flight rules with a scripted fake server: what each call sends, in order. The real
// servers (one node, a 3-master cluster, Upstash) are counted in cold-start.test.ts.

const SCRIPT = { script: "return 1", sha: "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" };
const NOSCRIPT = () => new Error("NOSCRIPT No matching script. Please use EVAL.");

/** A fake server: each call is logged and answered once `flush()` runs (like replies on a socket, in order). */
function fakeServer(options: { cluster?: boolean; inOrder?: boolean } = {}) {
  let loaded = false;
  const log: string[] = [];
  const queue: (() => void)[] = [];
  const reply = <T>(answer: () => T): Promise<T> =>
    new Promise((resolve, reject) =>
      queue.push(() => {
        try {
          resolve(answer());
        } catch (error) {
          reject(error);
        }
      }),
    );
  const transport: ScriptTransport = {
    evalsha: (_sha, keys) => {
      log.push(`evalsha ${keys[0]}`);
      return reply(() => {
        if (!loaded) throw NOSCRIPT();
        return `ok ${keys[0]}`;
      });
    },
    eval: (_script, keys) => {
      log.push(`eval ${keys[0]}`);
      return reply(() => {
        loaded = true;
        return `ok ${keys[0]}`;
      });
    },
    loadScript: options.cluster
      ? () => {
          log.push("script load");
          return reply(() => {
            loaded = true;
          });
        }
      : undefined,
    inOrder: options.inOrder,
  };
  /** Answers every queued call, then lets the callers react (repeatedly, until nothing is queued). */
  const flush = async () => {
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 10; i++) await Promise.resolve();
      if (queue.length === 0) continue;
      for (const answer of queue.splice(0)) answer();
    }
  };
  /** Lets callers react to what was answered (a few microtask turns). */
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  /** Answers what is queued now, then lets the callers react. */
  const step = async () => {
    await settle();
    for (const answer of queue.splice(0)) answer();
    await settle();
  };
  return { transport, log, flush, step, settle };
}

describe("single-flight script loading", () => {
  it("one node: the first call to see NOSCRIPT loads with EVAL (and gets its answer), the others wait and send EVALSHA again", async () => {
    const server = fakeServer();
    const state = scriptLoadState({}, SCRIPT.sha);
    const calls = ["a", "b", "c", "d"].map((key) => runScript(server.transport, state, SCRIPT, [key], []));
    await server.flush();
    expect(await Promise.all(calls)).toEqual(["ok a", "ok b", "ok c", "ok d"]);
    expect(server.log).toEqual(["evalsha a", "evalsha b", "evalsha c", "evalsha d", "eval a", "evalsha b", "evalsha c", "evalsha d"]);
    expect(state).toMatchObject({ loading: undefined, loads: 1 });
  });

  it("a cluster: one SCRIPT LOAD (to every master) for the whole burst, then every call sends EVALSHA again", async () => {
    const server = fakeServer({ cluster: true });
    const state = scriptLoadState({}, SCRIPT.sha);
    const calls = ["a", "b", "c"].map((key) => runScript(server.transport, state, SCRIPT, [key], []));
    await server.flush();
    expect(await Promise.all(calls)).toEqual(["ok a", "ok b", "ok c"]);
    expect(server.log).toEqual(["evalsha a", "evalsha b", "evalsha c", "script load", "evalsha a", "evalsha b", "evalsha c"]);
  });

  it("a call that starts while the script is being loaded waits for the load instead of sending a doomed EVALSHA", async () => {
    const server = fakeServer();
    const state = scriptLoadState({}, SCRIPT.sha);
    const b = runScript(server.transport, state, SCRIPT, ["b"], []);
    await server.step(); // b's EVALSHA: NOSCRIPT; b sends EVAL, not answered yet
    expect(server.log).toEqual(["evalsha b", "eval b"]);
    expect(state.loading).toBeDefined();
    const c = runScript(server.transport, state, SCRIPT, ["c"], []);
    await server.settle();
    expect(server.log).toEqual(["evalsha b", "eval b"]); // c sent nothing yet
    await server.step(); // the EVAL answers: loaded; c sends EVALSHA
    expect(server.log).toEqual(["evalsha b", "eval b", "evalsha c"]);
    await server.step();
    expect([await b, await c]).toEqual(["ok b", "ok c"]);
  });

  it("a NOSCRIPT to an EVALSHA sent before the last load finished is stale: EVALSHA again, no second load", async () => {
    // two connections (or a reply that took a slow path): b's NOSCRIPT arrives after a's EVAL
    const log: string[] = [];
    let loaded = false;
    let answerB: ((error: Error) => void) | undefined;
    const transport: ScriptTransport = {
      evalsha: (_sha, keys) => {
        log.push(`evalsha ${keys[0]}`);
        if (keys[0] === "b" && answerB === undefined) return new Promise((_, reject) => (answerB = reject));
        return loaded ? Promise.resolve(`ok ${keys[0]}`) : Promise.reject(NOSCRIPT());
      },
      eval: (_script, keys) => {
        log.push(`eval ${keys[0]}`);
        loaded = true;
        return Promise.resolve(`ok ${keys[0]}`);
      },
    };
    const state = scriptLoadState({}, SCRIPT.sha);
    const b = runScript(transport, state, SCRIPT, ["b"], []);
    expect(await runScript(transport, state, SCRIPT, ["a"], [])).toBe("ok a");
    for (let i = 0; i < 5; i++) await Promise.resolve();
    answerB?.(NOSCRIPT());
    expect(await b).toBe("ok b");
    expect(log).toEqual(["evalsha b", "evalsha a", "eval a", "evalsha b"]);
    expect(state.loads).toBe(1);
  });

  it("one connection (in order): each NOSCRIPT sends EVALSHA again at once, behind the one EVAL, without waiting for its answer", async () => {
    const server = fakeServer({ inOrder: true });
    const state = scriptLoadState({}, SCRIPT.sha);
    const calls = ["a", "b", "c"].map((key) => runScript(server.transport, state, SCRIPT, [key], []));
    await server.step(); // three NOSCRIPTs: a loads, b and c resend; nothing answered yet
    expect(server.log).toEqual(["evalsha a", "evalsha b", "evalsha c", "eval a", "evalsha b", "evalsha c"]);
    expect(state.loading).toBeDefined();
    const d = runScript(server.transport, state, SCRIPT, ["d"], []); // started during the load: sent at once, after it
    await server.settle();
    expect(server.log.at(-1)).toBe("evalsha d");
    await server.flush();
    expect(await Promise.all([...calls, d])).toEqual(["ok a", "ok b", "ok c", "ok d"]);
    expect(state).toMatchObject({ loading: undefined, loads: 1, started: 1 });
  });

  it("in order: a NOSCRIPT to an EVALSHA sent after the last load means the script was flushed again: one more load", async () => {
    const log: string[] = [];
    let evals = 0;
    const transport: ScriptTransport = {
      inOrder: true,
      // flushed again right after the first load: only the second EVAL's script stays
      evalsha: (_sha, keys) => (log.push(`evalsha ${keys[0]}`), evals >= 2 ? Promise.resolve(`ok ${keys[0]}`) : Promise.reject(NOSCRIPT())),
      eval: (_script, keys) => (log.push(`eval ${keys[0]}`), evals++, Promise.resolve(`ok ${keys[0]}`)),
    };
    const state = scriptLoadState({}, SCRIPT.sha);
    const results = await Promise.all(["a", "b"].map((key) => runScript(transport, state, SCRIPT, [key], [])));
    expect(results).toEqual(["ok a", "ok b"]);
    expect(log).toEqual(["evalsha a", "evalsha b", "eval a", "evalsha b", "eval b"]);
    expect(state.started).toBe(2);
  });

  it("an EVALSHA sent again after NOSCRIPT goes through resend (a transport batches those of one turn)", async () => {
    const server = fakeServer({ inOrder: true });
    const resent: string[] = [];
    const transport: ScriptTransport = { ...server.transport, resend: (sha, keys, args) => (resent.push(keys[0] as string), server.transport.evalsha(sha, keys, args)) };
    const state = scriptLoadState({}, SCRIPT.sha);
    const calls = ["a", "b", "c"].map((key) => runScript(transport, state, SCRIPT, [key], []));
    await server.flush();
    expect(await Promise.all(calls)).toEqual(["ok a", "ok b", "ok c"]);
    expect(resent).toEqual(["b", "c"]);
  });

  it(`never loops: after ${MAX_NOSCRIPT} NOSCRIPT replies a call sends EVAL itself`, async () => {
    const log: string[] = [];
    const transport: ScriptTransport = {
      evalsha: () => {
        log.push("evalsha");
        return Promise.reject(NOSCRIPT()); // flushed again after every load
      },
      eval: () => {
        log.push("eval");
        return Promise.resolve("ok");
      },
      loadScript: () => {
        log.push("script load");
        return Promise.resolve();
      },
    };
    expect(await runScript(transport, scriptLoadState({}, SCRIPT.sha), SCRIPT, ["k"], [])).toBe("ok");
    expect(log).toEqual(["evalsha", "script load", "evalsha", "script load", "evalsha", "eval"]);
  });

  it("a failing load fails its own call only; the waiting calls send EVALSHA again (and one of them loads)", async () => {
    const log: string[] = [];
    let loaded = false;
    let evals = 0;
    const transport: ScriptTransport = {
      evalsha: (_sha, keys) => {
        log.push(`evalsha ${keys[0]}`);
        return loaded ? Promise.resolve(`ok ${keys[0]}`) : Promise.reject(NOSCRIPT());
      },
      eval: (_script, keys) => {
        log.push(`eval ${keys[0]}`);
        if (evals++ === 0) return Promise.reject(new Error("BUSY Redis is busy running a script"));
        loaded = true;
        return Promise.resolve(`ok ${keys[0]}`);
      },
    };
    const state = scriptLoadState({}, SCRIPT.sha);
    const results = await Promise.allSettled(["a", "b", "c"].map((key) => runScript(transport, state, SCRIPT, [key], [])));
    expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([
      "BUSY Redis is busy running a script",
      "ok b",
      "ok c",
    ]);
    expect(log).toEqual(["evalsha a", "evalsha b", "evalsha c", "eval a", "evalsha b", "evalsha c", "eval b", "evalsha c"]);
  });

  it("errors other than NOSCRIPT pass through untouched, with no retry", async () => {
    const cause = new Error("OOM command not allowed");
    let calls = 0;
    const transport: ScriptTransport = {
      evalsha: () => {
        calls++;
        return Promise.reject(cause);
      },
      eval: () => Promise.reject(new Error("unreachable")),
    };
    await expect(runScript(transport, scriptLoadState({}, SCRIPT.sha), SCRIPT, ["k"], [])).rejects.toBe(cause);
    expect(calls).toBe(1);
  });

  it("the load state is shared per client object and per script", () => {
    const client = {};
    expect(scriptLoadState(client, SCRIPT.sha)).toBe(scriptLoadState(client, SCRIPT.sha));
    expect(scriptLoadState(client, "other")).not.toBe(scriptLoadState(client, SCRIPT.sha));
    expect(scriptLoadState({}, SCRIPT.sha)).not.toBe(scriptLoadState(client, SCRIPT.sha));
  });

  it("recognises NOSCRIPT in the clients' error shapes", () => {
    expect(isNoScript(NOSCRIPT())).toBe(true);
    expect(isNoScript("NOSCRIPT No matching script")).toBe(true);
    expect(isNoScript(new Error("ERR unknown command"))).toBe(false);
    expect(isNoScript(null)).toBe(false);
  });
});
