/** The sliding log's column: `limit` per `window`. @module */
import { slidingLog } from "@sluice/core";
import { windowAlgorithm } from "./definition.js";

export const slidingLogColumn = windowAlgorithm("Sliding log", slidingLog);
