/**
 * Reservations (the limiter's `reserve` option): an instance that sees a key often charges units
 * for it ahead of their use, in one atomic store call (`BoundStore.reserve`), and admits that key's
 * requests from them locally, without a round trip each.
 *
 * DESIGN, the rules and why they hold:
 * - **Never over.** A unit is charged in the store before it is used, against every policy of the
 *   key, all or nothing, as an ordinary charge would be; so the store's bound holds for the sum of
 *   every instance's decisions, provided a unit does nothing between its charge and its use that the
 *   store did not count. Each algorithm says what that is (`ReservationRule`): a window's units
 *   serve only inside the window they were charged in; a bucket's are counted as used at the end of
 *   the reservation's hold, the last moment they may serve. A reservation also ends after `maxAgeMs`.
 *   Every end is converted to this process's clock conservatively: from the moment the call was
 *   *sent* (the store charged no earlier), less the deny cache's skew margin.
 * - **Seldom under.** A reservation's size is what this instance's rate for the key will use before
 *   it ends, never more than `share` of what the store last said was left, and nothing below two
 *   units: near the limit nothing is reserved and every decision is exact again. Units left when a
 *   reservation ends go back through the exact refund (its charge's marks and prices), unless no
 *   policy would count them any more (a fixed window that ended).
 * - **Bounded staleness.** A reservation lives at most `maxAgeMs`: a block, an unblock, an override
 *   or a penalty box set through another instance binds this one within it. Through this limiter
 *   (`block`, `setOverride`, `reset`, …) the key's reservations end at once.
 * - **No waiting at a steady rate.** The next reservation is asked for before the units in hand run
 *   out (when they would last less than three round trips), in the background: the promise is the
 *   decision's `pending`, for `waitUntil`.
 * - **Cold keys pay (almost) nothing.** A key is tracked as an object only once its rate is
 *   believed (`MIN_HITS` requests within `maxAgeMs`); until then it is a slot of a fixed table of
 *   numbers (`cold-keys.ts`), counted when the store answers, on the store's clock (the decision's
 *   `now`): no allocation, no clock read, no lookup into a map of every key seen. The tracked keys'
 *   map holds hot keys only, so cold keys never push a hot key out of it.
 * - **Headers.** A decision made from a reservation (`reserved: true`) reports what this instance
 *   knows: each policy's `remaining` is the store's at the reservation plus the units this instance
 *   still holds; its times are the store's, moved on by the time elapsed. It is always an allowed
 *   decision: every denial comes from the store, so no `retryAfterMs` is ever made up here.
 *
 * @module
 */
import { type Policy, algorithmOf } from "./algorithms/index.js";
import { COLD_SLOTS, ColdKeys } from "./cold-keys.js";
import { StoreDecision, decisionOf, toDecision } from "./decision.js";
import { denyCacheMarginMs, monotonicClock } from "./deny-cache.js";
import { SluiceConfigError, describe } from "./errors.js";
import type { Override } from "./overrides.js";
import type { Decision, MaybePromise, PolicyResult, ReserveResult } from "./types.js";

/** Options of reservations: the `reserve` option of `RateLimiter` (and of a tiered guard). */
export interface ReserveOptions {
  /**
   * The longest a reservation's units serve (ms): the bound on how long a block, an override or a
   * penalty box set through another instance can go unseen here, and on how long a crashed
   * instance's units stay charged. A second keeps a hot key's store calls near one per second per
   * instance while a change made elsewhere binds everywhere within it.
   * @default 1000
   */
  maxAgeMs?: number;
  /**
   * The largest share of what the store says is left that one reservation may take, so that the
   * other instances get theirs (a number in (0, 1]). Near the limit a share is under two units and
   * nothing is reserved: every decision goes to the store and is exact again.
   * @default 0.1
   */
  share?: number;
  /**
   * The most units one reservation takes, whatever the rate.
   * @default no cap but `share`
   */
  maxUnits?: number;
  /**
   * The most hot keys whose rate and reservations are tracked; the oldest is forgotten first (its
   * unused units given back). A key not yet hot is counted in a fixed table of 4,096 slots instead
   * (no object per key), so cold keys never push a hot one out.
   * @default 10_000
   */
  maxKeys?: number;
  /**
   * The local monotonic clock, in ms from any origin (a test hook, like the deny cache's).
   * @default performance.now() where it exists, else Date.now()
   */
  clock?: () => number;
}

/** The `reserve` option: `true` for the defaults, `false` or omitted for none, or its {@link ReserveOptions}. */
export type ReserveOption = boolean | ReserveOptions;

/** The default `maxAgeMs` of a reservation. */
export const DEFAULT_RESERVE_MAX_AGE_MS = 1000;
/** The default `share` of the remaining quota one reservation may take. */
export const DEFAULT_RESERVE_SHARE = 0.1;
/** The default `maxKeys` of reservations. */
export const DEFAULT_RESERVE_MAX_KEYS = 10_000;
/** The fewest units worth a reservation: one unit is a decision, better made by the store. */
const MIN_UNITS = 2;
/** The fewest requests seen before a key's rate is believed. */
const MIN_HITS = 4;
/** The round trip assumed before one was measured (ms). */
const FIRST_RTT_MS = 10;
/** How many round trips ahead of running out the next reservation is asked for. */
const LEAD_RTTS = 3;

/** Validates the `reserve` option (`SluiceConfigError` naming `reserve` or `reserve.<field>`); `undefined` when off. */
export function resolveReserve(option: unknown): Required<ReserveOptions> | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) option = {};
  if (typeof option !== "object" || option === null || Array.isArray(option)) {
    throw new SluiceConfigError(`reserve must be true, false or { maxAgeMs?, share?, maxUnits?, maxKeys?, clock? }; got ${describe(option)}`, { option: "reserve" });
  }
  const o = option as Record<string, unknown>;
  for (const name of Object.keys(o)) {
    if (!["maxAgeMs", "share", "maxUnits", "maxKeys", "clock"].includes(name)) {
      throw new SluiceConfigError(`reserve.${name} is not an option: reserve takes maxAgeMs, share, maxUnits, maxKeys and clock`, { option: `reserve.${name}` });
    }
  }
  const { maxAgeMs = DEFAULT_RESERVE_MAX_AGE_MS, share = DEFAULT_RESERVE_SHARE, maxUnits = Number.MAX_SAFE_INTEGER, maxKeys = DEFAULT_RESERVE_MAX_KEYS, clock } = o as ReserveOptions;
  const count = (value: unknown, field: string, max = Number.MAX_SAFE_INTEGER) => {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0 || value > max) {
      throw new SluiceConfigError(`reserve.${field} must be a positive integer${max === Number.MAX_SAFE_INTEGER ? "" : ` of at most ${max}`}; got ${describe(value)}`, { option: `reserve.${field}` });
    }
  };
  count(maxAgeMs, "maxAgeMs", 2 ** 31 - 1);
  count(maxUnits, "maxUnits");
  count(maxKeys, "maxKeys");
  if (typeof share !== "number" || !(share > 0 && share <= 1)) {
    throw new SluiceConfigError(`reserve.share must be a number in (0, 1]; got ${describe(share)}`, { option: "reserve.share" });
  }
  if (clock !== undefined && typeof clock !== "function") {
    throw new SluiceConfigError(`reserve.clock must be a function returning monotonic milliseconds; got ${describe(clock)}`, { option: "reserve.clock" });
  }
  return { maxAgeMs, share, maxUnits, maxKeys, clock: clock ?? monotonicClock() };
}

/** Whether every policy of a limiter can hand out units ahead of their use (else it never reserves). */
export function canReserve(policies: readonly Policy[]): boolean {
  return policies.every((p) => algorithmOf(p).reservation?.reservable(p) === true);
}

/** What reservations need of the limiter that owns them. */
export interface ReservationHost {
  /** The store's `reserve` under the limiter's timeout (rejects or throws on a failure). */
  reserve(key: string, units: number, holdMs: number): MaybePromise<ReserveResult>;
  /** Gives `units` of the reservation whose charge is `charge` back through the store. */
  giveBack(key: string, charge: Decision, units: number): Promise<unknown>;
  /** A failure of background work (a reservation, a give-back), for `onStoreFailure`. */
  failed(error: unknown): void;
  /** A decision on its way out: stamped as the limiter's, for `key`. */
  mark(decision: Decision, key: string): Decision;
}

/** Units charged ahead for one key, as this instance holds them. */
class Held {
  /** Units not used yet. */
  left: number;
  constructor(
    readonly granted: number,
    /** Local ms from which the units may no longer serve. */
    readonly expiresAt: number,
    /** Local ms when the store's answer arrived: the base of the time elapsed since. */
    readonly receivedAt: number,
    /** The store's clock (epoch ms) when it charged them. */
    readonly storeNow: number,
    /** Each policy's state after the charge, as the store answered it. */
    readonly policies: readonly PolicyResult[],
    readonly override: Override | undefined,
    /** The reservation as a charge (its marks and prices): what refunds of its units go through. */
    readonly charge: Decision,
    /** Epoch ms after which no policy counts these units any more (a refund of them would change nothing). */
    readonly countedUntil: number,
  ) {
    this.left = granted;
  }
}

/** What this instance knows of one key. */
class Book {
  /** Requests seen since `since` (local ms), and the rate measured before (units per ms; 0: not yet). */
  hits = 0;
  since: number;
  rate = 0;
  /** The least `remaining` of the store's last answer for the key (-1: none yet), and its clock then. */
  storeRemaining = -1;
  storeNow = 0;
  seenAt = 0;
  /** Live reservations, oldest first. */
  held: Held[] = [];
  /** The reservation being asked for. */
  fetching: Promise<void> | undefined = undefined;
  /** No reservation is asked for before this (local ms): after a failure or an empty grant. */
  quietUntil = 0;
  /** Bumped when the key's reservations are ended here: an answer on its way then is given back. */
  epoch = 0;
  /** Background work started while the store decided (a give-back), for that decision's `pending`. */
  work: Promise<void> | undefined = undefined;
  constructor(now: number) {
    this.since = now;
  }
}

/** The reservations of one limiter (a tier's limiter has its own). */
export class Reservations {
  /** The keys tracked: those whose rate was believed (the others are counted in {@link Reservations.#cold}). */
  readonly #books = new Map<string, Book>();
  /** The keys seen but not believed hot yet, without an object each (made at the first). */
  #cold: ColdKeys | undefined;
  /** The books in the order they were tracked, from the oldest still kept (see #track). */
  #oldest: MapIterator<[string, Book]> | undefined;
  readonly #options: Required<ReserveOptions>;
  readonly #policies: readonly Policy[];
  readonly #host: ReservationHost;
  readonly #clock: () => number;
  /** The measured round trip of a reservation (ms, smoothed). */
  #rttMs = FIRST_RTT_MS;
  /** Whether {@link Reservations.#rttMs} was measured yet: the first answer sets it outright. */
  #rttMeasured = false;
  /** The longest hold the policies allow (ms): a quarter of the fastest-filling bucket's fill time. */
  readonly #maxHoldMs: number;

  constructor(options: Required<ReserveOptions>, policies: readonly Policy[], host: ReservationHost) {
    this.#options = options;
    this.#policies = policies;
    this.#host = host;
    this.#clock = options.clock;
    this.#maxHoldMs = Math.min(options.maxAgeMs, ...policies.map((p) => algorithmOf(p).reservation!.maxHoldMs(p)));
  }

  /** Keys tracked (rate or reservations). */
  get size(): number {
    return this.#books.size;
  }

  /**
   * A decision for `key` at `cost` made from units this instance holds, or `undefined` (the store
   * decides). For a tracked key: counts the request toward its rate either way, ends reservations
   * that are over, and asks for the next one ahead of need. A key not tracked is counted when the
   * store has answered ({@link Reservations.observe}): here it costs one lookup, not even a clock read.
   */
  take(key: string, cost: number): Decision | undefined {
    const book = this.#books.get(key);
    if (book === undefined) return undefined;
    const now = this.#clock();
    this.#count(book, now);
    const pending = book.held.length === 0 ? undefined : this.#retire(key, book, now);
    let source: Held | undefined;
    for (const held of book.held) {
      if (held.left >= cost) {
        source = held;
        break;
      }
    }
    if (source === undefined) {
      // the store decides, and the next reservation is asked for now rather than after its answer
      // (a window that just ended costs one round trip of store decisions, not two); what either
      // started goes with the store's decision (see observe)
      const work = both(pending, this.#ahead(key, book, now));
      if (work !== undefined) book.work = both(book.work, work);
      return undefined;
    }
    source.left -= cost;
    const decision = this.#decision(key, book, source, cost, now);
    const next = this.#ahead(key, book, now);
    const all = pending === undefined ? next : next === undefined ? pending : Promise.all([pending, next]).then(noop);
    if (all !== undefined) decision.pending = all;
    return decision;
  }

  /**
   * After a decision the store made for `key`: what the store says is left, and a reservation
   * asked for when the key is hot enough. A key not tracked is counted here, in the table of cold
   * keys on the store's clock (the decision's `now`), and tracked from the answer that makes its
   * rate believed (a tracked key's request was counted by {@link take}). Answers the background
   * work started, or `undefined`.
   */
  observe(key: string, decision: Decision): Promise<void> | undefined {
    let book = this.#books.get(key);
    if (book === undefined) {
      // nothing allocated and no clock read until the key turns hot
      const cold = (this.#cold ??= new ColdKeys(COLD_SLOTS, this.#options.maxAgeMs, MIN_HITS));
      const rate = cold.count(key, decision.now);
      if (rate === 0) return undefined;
      book = this.#warmed(key, rate);
    } else if (book.rate === 0 && book.work === undefined) {
      // a tracked key gone cold: nothing to ask for, so nothing read. What the store says is left
      // is read afresh once the key is hot (a stale figure could size a reservation past its share)
      book.storeRemaining = -1;
      return undefined;
    }
    const now = this.#clock();
    this.#saw(book, decision.policies, decision.now, now);
    const next = this.#ahead(key, book, now);
    const work = book.work;
    if (work === undefined) return next;
    book.work = undefined;
    return next === undefined ? work : Promise.all([work, next]).then(noop);
  }

  /**
   * Ends `key`'s reservations here at once (a block, an override or a reset through this limiter
   * must bind at once), giving their unused units back unless told not to (a reset forgets them
   * anyway). An answer on its way is given back when it comes.
   */
  end(key: string, giveBack = true): Promise<void> | undefined {
    const book = this.#books.get(key);
    if (book === undefined) return undefined;
    book.epoch++;
    book.storeRemaining = -1;
    const held = book.held;
    book.held = [];
    return giveBack ? this.#giveBackAll(key, held, this.#clock()) : undefined;
  }

  /** Ends every reservation, giving every unused unit back now (shutdown, tests, `waitUntil`). */
  async returnAll(): Promise<void> {
    const work: Promise<unknown>[] = [];
    for (const [key, book] of this.#books) {
      if (book.fetching !== undefined) work.push(book.fetching.then(() => this.end(key)));
      const ended = this.end(key);
      if (ended !== undefined) work.push(ended);
    }
    await Promise.all(work);
  }

  /**
   * Gives `units` of a reserved decision back to the reservation it came from while that serves
   * (the units serve again here, as had they never been taken): the key's state afterwards as this
   * instance knows it (as a peek answers), or `undefined` when that reservation is over (the
   * limiter then gives back through its charge).
   */
  restore(key: string, source: Decision, units: number): Decision | undefined {
    const book = this.#books.get(key);
    if (book === undefined) return undefined;
    const now = this.#clock();
    for (const held of book.held) {
      if (held.charge === source && now < held.expiresAt) {
        held.left += units;
        return this.#known(key, book, held, now);
      }
    }
    return undefined;
  }

  /**
   * Tracks a key that just turned hot in the cold table, at the rate the table measured. Its own
   * count starts now: the requests sent since the one that turned it hot (on their way to the
   * store, a round trip's worth) were counted nowhere, and a window that began before them would
   * read the rate that low until it ends.
   */
  #warmed(key: string, rate: number): Book {
    const book = this.#track(key, this.#clock());
    book.rate = rate;
    return book;
  }

  #track(key: string, now: number): Book {
    const books = this.#books;
    if (books.size >= this.#options.maxKeys) {
      // the oldest key goes; its unused units are given back. Keys leave only from here, oldest
      // first, so one iterator kept across calls always points at the oldest: a fresh one would
      // step over every key deleted before it (a Map keeps their slots until it rehashes), which
      // made each new key cost a scan once more keys came than maxKeys
      const [oldKey, oldBook] = (this.#oldest ??= books.entries()).next().value as [string, Book];
      books.delete(oldKey);
      if (oldBook.held.length > 0) void this.#giveBackAll(oldKey, oldBook.held, now);
    }
    const book = new Book(now);
    books.set(key, book);
    return book;
  }

  /** Counts a request toward the key's rate: measured over windows of `maxAgeMs`, believed after {@link MIN_HITS}. */
  #count(book: Book, now: number): void {
    book.hits++;
    const elapsed = now - book.since;
    if (elapsed >= this.#options.maxAgeMs) {
      // too few requests in a whole window: a cold key, decided by the store
      book.rate = book.hits >= MIN_HITS ? book.hits / elapsed : 0;
      book.hits = 0;
      book.since = now;
    } else if (book.hits >= MIN_HITS) {
      // a young window: its own rate, when it says more than the last one did
      const young = book.hits / Math.max(1, elapsed);
      if (young > book.rate) book.rate = young;
    }
  }

  /** Records what the store said of the key: the least remaining among the policies, and its clock. */
  #saw(book: Book, policies: readonly PolicyResult[], storeNow: number, now: number): void {
    let least = Number.MAX_SAFE_INTEGER;
    for (const p of policies) if (p.remaining < least) least = p.remaining;
    book.storeRemaining = least;
    book.storeNow = storeNow;
    book.seenAt = now;
  }

  /** The decision of a request served from `held`: what this instance knows of the key, charged `cost` of `held`. */
  #decision(key: string, book: Book, held: Held, cost: number, now: number): Decision {
    const decision = this.#known(key, book, held, now);
    StoreDecision.drawn(decision, cost, held.charge);
    return decision;
  }

  /**
   * The key's state as this instance knows it, as an allowed decision: `held`'s policies as the
   * store answered them, each `remaining` plus the units this instance holds, the clock moved on.
   */
  #known(key: string, book: Book, held: Held, now: number): Decision {
    let holding = 0;
    for (const h of book.held) if (now < h.expiresAt) holding += h.left;
    const policies: PolicyResult[] = held.policies.map((p) => ({ ...p, allowed: true, remaining: p.remaining + holding, retryAfterMs: 0, delayMs: 0 }));
    const decision = decisionOf(held.storeNow + Math.max(0, Math.floor(now - held.receivedAt)), policies, "ok");
    if (held.override !== undefined) decision.override = held.override;
    decision.reserved = true;
    return this.#host.mark(decision, key);
  }

  /** Drops the reservations that are over (expired, or used up), giving unused units back. */
  #retire(key: string, book: Book, now: number): Promise<void> | undefined {
    let over: Held[] | undefined;
    const live: Held[] = [];
    for (const held of book.held) {
      if (now >= held.expiresAt) (over ??= []).push(held);
      else if (held.left > 0) live.push(held);
    }
    if (over === undefined && live.length === book.held.length) return undefined;
    book.held = live;
    return over === undefined ? undefined : this.#giveBackAll(key, over, now);
  }

  /** Gives the unused units of `held` back through the store (those some policy still counts). */
  #giveBackAll(key: string, held: readonly Held[], now: number): Promise<void> | undefined {
    let work: Promise<unknown>[] | undefined;
    for (const h of held) {
      if (h.left <= 0) continue;
      const units = h.left;
      h.left = 0;
      // the store's clock now, at the latest: a window that ended counts nothing any more
      const storeNow = h.storeNow + (now - h.receivedAt);
      if (storeNow >= h.countedUntil) continue;
      (work ??= []).push(this.#host.giveBack(key, h.charge, units).catch((error: unknown) => this.#host.failed(error)));
    }
    return work === undefined ? undefined : Promise.all(work).then(noop);
  }

  /**
   * A round trip measured (ms), into the smoothed estimate. The first replaces the guess: a store
   * farther than it would otherwise be taken for near for a dozen answers, each reservation sized
   * and asked for too late.
   */
  #measured(rttMs: number): void {
    const sample = Math.max(0, rttMs);
    this.#rttMs = this.#rttMeasured ? this.#rttMs * 0.8 + sample * 0.2 : sample;
    this.#rttMeasured = true;
  }

  /**
   * Asks for the next reservation when the key is hot enough and the units in hand would last
   * less than {@link LEAD_RTTS} round trips; answers the work started, or `undefined`.
   */
  #ahead(key: string, book: Book, now: number): Promise<void> | undefined {
    if (book.fetching !== undefined || now < book.quietUntil || book.rate === 0 || book.storeRemaining < 0) return undefined;
    let holding = 0;
    let lastsUntil = now;
    for (const h of book.held) {
      holding += h.left;
      if (h.expiresAt > lastsUntil) lastsUntil = h.expiresAt;
    }
    const leadMs = LEAD_RTTS * this.#rttMs;
    const outAt = Math.min(now + holding / book.rate, lastsUntil);
    if (holding > 0 && outAt - now > leadMs) return undefined;
    const units = this.#size(book, now, outAt);
    if (units < MIN_UNITS) return undefined;
    return this.#fetch(key, book, units, now);
  }

  /**
   * How many units to ask for: what the key's rate uses from when the new ones can serve (once the
   * units in hand run out, and a round trip from now at the earliest) until they end. The store's
   * clock when it charges them is the last answer's moved on by the time since and a round trip
   * (half for where in its trip that answer's clock was read, half for this call's way there):
   * near a window's end no units are asked for that would end before they arrive, only to go back.
   */
  #size(book: Book, now: number, startsAt: number): number {
    // only reservations measure the round trip: however slow one answer was, the next is still
    // asked for (taken to wait half a hold at most), so that its answer measures it again
    const rttMs = Math.min(this.#rttMs, this.#maxHoldMs / 2);
    const storeNow = book.storeNow + (now - book.seenAt) + rttMs;
    let endStore = storeNow + this.#maxHoldMs;
    for (const p of this.#policies) {
      const until = algorithmOf(p).reservation!.servesUntilMs(p, storeNow);
      if (until < endStore) endStore = until;
    }
    const lifeMs = endStore - storeNow - denyCacheMarginMs(endStore - storeNow);
    const useMs = now + lifeMs - Math.max(startsAt, now + rttMs);
    if (useMs <= 0) return 0;
    const want = Math.ceil(book.rate * useMs);
    return Math.min(want, Math.floor(this.#options.share * book.storeRemaining), this.#options.maxUnits);
  }

  #fetch(key: string, book: Book, units: number, sentAt: number): Promise<void> | undefined {
    const epoch = book.epoch;
    let answer: MaybePromise<ReserveResult>;
    try {
      answer = this.#host.reserve(key, units, this.#maxHoldMs);
    } catch (error) {
      this.#failedFetch(book, error, sentAt);
      return undefined;
    }
    if (!(answer instanceof Promise)) {
      // a store that answers in place: the reservation is ready now
      return this.#arrived(key, book, answer, epoch, sentAt);
    }
    const fetching = answer.then(
      (result) => this.#arrived(key, book, result, epoch, sentAt),
      (error: unknown) => this.#failedFetch(book, error, sentAt),
    );
    book.fetching = fetching.then(
      () => {
        book.fetching = undefined;
      },
      () => {
        book.fetching = undefined;
      },
    );
    return book.fetching;
  }

  #failedFetch(book: Book, error: unknown, sentAt: number): void {
    this.#host.failed(error);
    // a store that fails is not asked again for a while: decisions go to it (and to onStoreError)
    book.quietUntil = sentAt + this.#options.maxAgeMs;
  }

  /** A reservation's answer: its units held until its end (by this clock, conservatively), or given back when it is too late. */
  #arrived(key: string, book: Book, result: ReserveResult, epoch: number, sentAt: number): Promise<void> | undefined {
    const receivedAt = this.#clock();
    this.#measured(receivedAt - sentAt);
    this.#saw(book, result.policies, result.now, receivedAt);
    if (result.granted <= 0) {
      // nothing to hold (a limit reached, a block, an unlimited override): exact decisions for a while
      book.quietUntil = receivedAt + this.#options.maxAgeMs;
      return undefined;
    }
    const charge = toDecision(result);
    StoreDecision.charge(charge, result.granted, result.marks);
    this.#host.mark(charge, key);
    let endStore = result.now + this.#maxHoldMs;
    let countedUntil = 0;
    for (const p of this.#policies) {
      const rule = algorithmOf(p).reservation!;
      const until = rule.servesUntilMs(p, result.now);
      if (until < endStore) endStore = until;
      countedUntil = Math.max(countedUntil, rule.countedUntilMs?.(p, result.now) ?? Number.MAX_SAFE_INTEGER);
    }
    const lifeMs = endStore - result.now;
    const held = new Held(result.granted, sentAt + lifeMs - denyCacheMarginMs(lifeMs), receivedAt, result.now, result.policies, result.override, charge, countedUntil);
    if (book.epoch !== epoch || held.expiresAt <= receivedAt || this.#books.get(key) !== book) {
      // ended here while on its way, or too late to serve: every unit goes back
      return this.#giveBackAll(key, [held], receivedAt);
    }
    book.held.push(held);
    return undefined;
  }
}

function noop(): void {}

/** Both pieces of background work as one (either may be absent). */
function both(a: Promise<void> | undefined, b: Promise<void> | undefined): Promise<void> | undefined {
  return a === undefined ? b : b === undefined ? a : Promise.all([a, b]).then(noop);
}
