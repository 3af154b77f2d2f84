/**
 * Every module of the conformance suite runs alone, as a store's test file may run one: each in a
 * `storeSuite` of its own, on a fresh MemoryStore, with no section before it to set the clock or
 * fill the store. Few property runs: the whole suite runs them in full on every store.
 */
import { MemoryStore } from "@sluice/core";
import { SECTIONS } from "../conformance.js";
import { storeSuite } from "./context.js";

for (const [title, modules] of SECTIONS) {
  for (const module of modules) {
    storeSuite({ name: `MemoryStore, ${module.name} alone (${title})`, makeStore: ({ clock }) => new MemoryStore({ clock }), numRuns: 10, invariantRuns: 5 }, module);
  }
}
