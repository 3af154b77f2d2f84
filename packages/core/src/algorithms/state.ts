/**
 * An algorithm's state for one key, read and written by name.
 *
 * An algorithm declares its state as named numbers (`fields`) and, when it needs a variable-length
 * list (the sliding log's entries, the concurrency cap's leases), named lists; it then reads
 * `state.count` where it means the count. Where the state lives is the store's business: the
 * engine keeps every key's numbers in one `Float64Array` and its lists in one array (compact: no
 * object per key), and hands an algorithm a view of its part of them, moved to the key before each
 * call. A view is valid until the next call into the same algorithm; an algorithm never keeps one.
 *
 * Every field of the empty state is 0 and every list `undefined`: an all-zero slice is the empty
 * state of every algorithm.
 *
 * @module
 */

/** A state with the numbers `F` and the lists `L` (each a flat list of numbers, or `undefined` when empty). */
export type State<F extends string, L extends string = never> = { [K in F]: number } & { [K in L]: number[] | undefined };

const NO_NUMBERS = new Float64Array(0);
const NO_LISTS: unknown[] = [];

/** Where a view points: a key's part of the engine's arrays. */
class Slot {
  num: Float64Array = NO_NUMBERS;
  off = 0;
  obj: unknown[] = NO_LISTS;
  oOff = 0;
}

/** An algorithm's state as declared (its names, in their stored order), and the view over the engine's arrays. */
export interface StateLayout<S> {
  /** The numbers' names, in the order they are stored. */
  readonly fields: readonly string[];
  /** The lists' names. */
  readonly lists: readonly string[];
  /** Numbers per key (`fields.length`). */
  readonly numWidth: number;
  /** List slots per key (`lists.length`). */
  readonly objWidth: number;
  /**
   * The state whose numbers start at `off` in `num` and whose lists start at `oOff` in `obj`: the
   * algorithm's one view, moved there (valid until the next call to `at`).
   */
  at(num: Float64Array, off: number, obj: unknown[], oOff: number): S;
  /** Appends the numbers of `state` to `out`, in their stored order. */
  pushNumbers(state: S, out: number[]): void;
  /** Sets the numbers of `state` from `values[from..]`, in their stored order. */
  setNumbers(state: S, values: readonly number[], from: number): void;
}

/**
 * Declares an algorithm's state: its numbers and its lists, by name.
 *
 * @example
 * ```ts
 * const layout = stateLayout(["window", "count"]);
 * const state = layout.at(new Float64Array(2), 0, [], 0);
 * state.count += 1; // the second number of the slice
 * ```
 */
export function stateLayout<const F extends string, const L extends string = never>(fields: readonly F[], lists: readonly L[] = []): StateLayout<State<F, L>> {
  // a class per algorithm, so that each accessor below sees one shape
  class View extends Slot {}
  fields.forEach((name, i) => {
    Object.defineProperty(View.prototype, name, {
      get(this: Slot): number {
        return this.num[this.off + i] as number;
      },
      set(this: Slot, value: number) {
        this.num[this.off + i] = value;
      },
    });
  });
  lists.forEach((name, i) => {
    Object.defineProperty(View.prototype, name, {
      get(this: Slot): number[] | undefined {
        return this.obj[this.oOff + i] as number[] | undefined;
      },
      set(this: Slot, value: number[] | undefined) {
        this.obj[this.oOff + i] = value;
      },
    });
  });
  const view = new View();
  const width = fields.length;
  return {
    fields,
    lists,
    numWidth: width,
    objWidth: lists.length,
    at(num, off, obj, oOff) {
      view.num = num;
      view.off = off;
      view.obj = obj;
      view.oOff = oOff;
      return view as unknown as State<F, L>;
    },
    pushNumbers(state, out) {
      const slot = state as unknown as Slot;
      for (let j = 0; j < width; j++) out.push(slot.num[slot.off + j] as number);
    },
    setNumbers(state, values, from) {
      const slot = state as unknown as Slot;
      for (let j = 0; j < width; j++) slot.num[slot.off + j] = values[from + j] as number;
    },
  };
}
