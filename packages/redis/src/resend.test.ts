import { describe, expect, it } from "vitest";
import { type IORedisLike, ioredisResend } from "./redis-store.js";

// After NOSCRIPT, the EVALSHAs a single ioredis node is sent again go out in one pipeline per turn
// of the event loop (one write instead of one per call); each call gets its own reply or error.

type Commands = (string | number)[][];

function fakeClient(answer: (commands: Commands) => Promise<[Error | null, unknown][] | null>) {
  const pipelines: Commands[] = [];
  const client = {
    pipeline: (commands: Commands) => {
      pipelines.push(commands);
      return { exec: () => answer(commands) };
    },
  } as unknown as IORedisLike;
  return { client, pipelines };
}

describe("ioredisResend", () => {
  it("sends the EVALSHAs of one turn in one pipeline, in the order they were asked for, and answers each", async () => {
    const { client, pipelines } = fakeClient(async (commands) => commands.map((c, i) => (i === 1 ? [new Error("NOSCRIPT again"), null] : [null, `ok ${c[3]}`])));
    const resend = ioredisResend(client);
    if (resend === undefined) throw new Error("a client with pipeline() batches");
    const calls = ["a", "b", "c"].map((key) => resend("sha", [key], ["1"]));
    const settled = await Promise.allSettled(calls);
    expect(pipelines).toEqual([
      [
        ["evalsha", "sha", 1, "a", "1"],
        ["evalsha", "sha", 1, "b", "1"],
        ["evalsha", "sha", 1, "c", "1"],
      ],
    ]);
    expect(settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message))).toEqual(["ok a", "NOSCRIPT again", "ok c"]);
    // the next turn's calls make the next pipeline
    expect(await resend("sha", ["d"], ["1"])).toBe("ok d");
    expect(pipelines).toHaveLength(2);
  });

  it("a pipeline that fails as a whole fails each of its calls with its error", async () => {
    const down = new Error("Connection is closed.");
    const { client } = fakeClient(() => Promise.reject(down));
    const resend = ioredisResend(client);
    const settled = await Promise.allSettled(["a", "b"].map((key) => resend?.("sha", [key], [])));
    expect(settled.map((s) => s.status === "rejected" && s.reason)).toEqual([down, down]);
  });

  it("a client without pipeline() sends them one by one", () => {
    expect(ioredisResend({} as IORedisLike)).toBeUndefined();
  });
});
