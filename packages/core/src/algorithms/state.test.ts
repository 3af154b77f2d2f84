import { describe, expect, it } from "vitest";
import { stateLayout } from "./state.js";

describe("stateLayout: an algorithm's state by name over the engine's arrays", () => {
  const layout = stateLayout(["window", "count"], ["entries"]);

  it("says its widths and names, in their stored order", () => {
    expect([layout.numWidth, layout.objWidth, layout.fields, layout.lists]).toEqual([2, 1, ["window", "count"], ["entries"]]);
  });

  it("reads and writes the key's own slice, nothing beside it", () => {
    const num = new Float64Array([9, 9, 0, 0, 9]);
    const obj: unknown[] = ["x", undefined, "y"];
    const state = layout.at(num, 2, obj, 1);
    expect([state.window, state.count, state.entries]).toEqual([0, 0, undefined]);
    state.window = 7;
    state.count += 3;
    state.entries = [1, 2];
    expect([...num]).toEqual([9, 9, 7, 3, 9]);
    expect(obj).toEqual(["x", [1, 2], "y"]);
  });

  it("is one view moved to each key: after `at` it reads the new key", () => {
    const num = new Float64Array([1, 2, 3, 4]);
    const first = layout.at(num, 0, [], 0);
    expect(first.count).toBe(2);
    const second = layout.at(num, 2, [], 0);
    expect(second.count).toBe(4);
    expect(first).toBe(second); // the algorithm never keeps a view across calls
  });

  it("copies the numbers out and in, in their stored order", () => {
    const num = new Float64Array([0, 5, 6, 0]);
    const out: number[] = [100];
    layout.pushNumbers(layout.at(num, 1, [], 0), out);
    expect(out).toEqual([100, 5, 6]);
    layout.setNumbers(layout.at(num, 2, [], 0), [0, 8, 9], 1);
    expect([...num]).toEqual([0, 5, 8, 9]);
  });

  it("gives each algorithm its own view: two layouts never share names or positions", () => {
    const other = stateLayout(["tat", "shift"]);
    const num = new Float64Array([1, 2, 3, 4]);
    const a = layout.at(num, 0, [], 0);
    const b = other.at(num, 2, [], 0);
    expect([a.window, b.tat]).toEqual([1, 3]);
    expect("window" in b).toBe(false);
  });
});
