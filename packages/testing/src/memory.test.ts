import { MemoryStore } from "@sluice/core";
import { testStore } from "./conformance.js";

testStore({ name: "MemoryStore", makeStore: ({ clock }) => new MemoryStore({ clock }), numRuns: 200 });
testStore({ name: "MemoryStore (maxKeys 64, evicting across namespaces)", makeStore: ({ clock }) => new MemoryStore({ clock, maxKeys: 64 }), numRuns: 50 });
