/** The sliding window's column: `limit` per `window`. @module */
import { slidingWindow } from "@sluice/core";
import { windowAlgorithm } from "./definition.js";

export const slidingWindowColumn = windowAlgorithm("Sliding window", slidingWindow);
